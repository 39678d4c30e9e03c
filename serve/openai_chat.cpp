#include "serve/openai_chat.hpp"

#include "base/json_count.hpp"


namespace mibyan {

status parse_chat_completion(std::string_view body,
                             chat_completion_request& out,
                             size_t max_messages) {
  auto bad = [](std::string msg) {
    return status::failure(status_code::invalid_argument, std::move(msg));
  };
  // The count first: a DOM of 100k small messages costs about 60 times
  // the body's size, and converting and storing them more.
  if (auto n = json::array_member_size(body, "messages");
      n >= 0 && static_cast<uint64_t>(n) > max_messages)
    return status::failure(status_code::resource_exhausted,
                           "'messages' has " + std::to_string(n)
                             + " elements; this server takes at most "
                             + std::to_string(max_messages)
                             + " (server.max_messages)");
  auto parsed = json::parse(body);
  if (!parsed)
    return bad("the request body is not valid JSON: " + parsed.error);
  auto& v = *parsed.v;
  if (!v.is_object())
    return bad("the request body must be a JSON object");
  auto model = v.find("model");
  if (model != nullptr && !model->is_string())
    return bad("'model' must be a string");
  out.model = model ? model->as_string() : "";
  if (auto s = v.find("stream"); s != nullptr && !s->is_null()) {
    if (!s->is_bool())
      return bad("'stream' must be a boolean");
    out.stream = s->as_bool();
  }
  if (auto so = v.find("stream_options"); so != nullptr && so->is_object())
    out.include_usage = so->get_bool("include_usage", false);
  auto msgs = v.find("messages");
  if (msgs == nullptr)
    return bad("'messages' is required");
  if (!msgs->is_array() || msgs->size() == 0)
    return bad("'messages' must be a non-empty array");
  if (msgs->size() > max_messages) // a duplicate key the count did not see
    return status::failure(status_code::resource_exhausted,
                           "'messages' has more than "
                             + std::to_string(max_messages)
                             + " elements (server.max_messages)");
  std::vector<chat_message> list;
  std::string err;
  if (!chat_messages_from_openai(*msgs, list, err))
    return bad(err);
  // System messages: the node has its own system prompt; the client's
  // instructions go in front of the first user message.
  std::string system;
  std::vector<chat_message> rest;
  for (auto& m : list) {
    if (m.role == "system")
      system += (system.empty() ? "" : "\n\n") + m.content;
    else
      rest.push_back(std::move(m));
  }
  if (rest.empty() || rest.back().role != "user")
    return bad("the last message must have role 'user'");
  if (!system.empty())
    for (auto& m : rest)
      if (m.role == "user") {
        m.content = system + "\n\n" + m.content;
        break;
      }
  out.prompt = std::move(rest.back().content);
  rest.pop_back();
  if (out.prompt.find_first_not_of(" \t\r\n") == std::string::npos)
    return bad("the last user message is empty");
  out.history = history_of(std::move(rest));
  return {};
}

std::vector<chat_message> history_of(std::vector<chat_message> messages) {
  std::vector<chat_message> out;
  out.reserve(messages.size());
  for (auto& m : messages) {
    if (m.role == "system")
      continue;
    chat_message h;
    h.role = std::move(m.role);
    h.content = std::move(m.content);
    if (h.role == "assistant")
      h.tool_calls = std::move(m.tool_calls);
    if (h.role == "tool") {
      h.tool_call_id = std::move(m.tool_call_id);
      h.tool_name = std::move(m.tool_name);
    }
    out.push_back(std::move(h));
  }
  return out;
}

namespace {

json::value usage_json(const completion_usage& u) {
  json::value v;
  v["prompt_tokens"] = u.prompt_tokens;
  v["completion_tokens"] = u.completion_tokens;
  v["total_tokens"] = u.total_tokens;
  return v;
}

} // namespace

std::string completion_body(const std::string& id, int64_t created,
                            const std::string& model,
                            const std::string& content,
                            const std::string& finish_reason,
                            const completion_usage& usage,
                            const json::value& extension) {
  json::value msg;
  msg["role"] = "assistant";
  msg["content"] = content;
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish_reason;
  json::value v;
  v["id"] = id;
  v["object"] = "chat.completion";
  v["created"] = created;
  v["model"] = model;
  v["choices"] = json::value::make_array();
  v["choices"].push_back(std::move(choice));
  v["usage"] = usage_json(usage);
  if (!extension.is_null())
    v["mibyan"] = extension;
  return v.dump();
}

std::string chunk_event(const std::string& id, int64_t created,
                        const std::string& model, const json::value& delta,
                        const std::string& finish_reason,
                        const json::value& extension,
                        const completion_usage* usage) {
  json::value v;
  v["id"] = id;
  v["object"] = "chat.completion.chunk";
  v["created"] = created;
  v["model"] = model;
  v["choices"] = json::value::make_array();
  if (usage != nullptr) {
    v["usage"] = usage_json(*usage);
  } else {
    json::value choice;
    choice["index"] = 0;
    choice["delta"] = delta.is_null() ? json::value::make_object() : delta;
    choice["logprobs"] = nullptr;
    choice["finish_reason"] = finish_reason.empty()
                                ? json::value{}
                                : json::value{finish_reason};
    v["choices"].push_back(std::move(choice));
  }
  if (!extension.is_null())
    v["mibyan"] = extension;
  return "data: " + v.dump() + "\n\n";
}

std::string error_body(const std::string& message, const std::string& type,
                       const std::string& code) {
  json::value e;
  e["message"] = message;
  e["type"] = type;
  e["code"] = code.empty() ? json::value{} : json::value{code};
  e["param"] = nullptr;
  json::value v;
  v["error"] = std::move(e);
  return v.dump();
}

} // namespace mibyan
