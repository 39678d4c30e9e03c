#include "serve/responses.hpp"

#include <cstdio>
#include <mutex>
#include <random>

#include "base/crypto.hpp"
#include "base/json_count.hpp"
#include "storage/response_record.hpp"

namespace mibyan {

namespace {

constexpr size_t max_metadata_pairs = 16;
constexpr size_t max_metadata_key = 64;
constexpr size_t max_metadata_value = 512;

const char* kind_of(const json::value& v) {
  return json::kind_name(v.type());
}

// The text of one input item's content (a string, or an array of text
// parts); false with `why` set otherwise. `where` names the item.
bool item_text(const json::value& content, const std::string& where,
               std::string& out, responses_refusal& why) {
  if (content.is_string()) {
    out = content.as_string();
    return true;
  }
  if (!content.is_array()) {
    why = {where + ".content must be a string or an array of content parts "
             "(got " + kind_of(content) + ")",
           "invalid_request", where + ".content"};
    return false;
  }
  out.clear();
  size_t j = 0;
  for (auto& part : content.as_array()) {
    auto at = where + ".content[" + std::to_string(j++) + "]";
    if (!part.is_object()) {
      why = {at + " must be an object", "invalid_request", at};
      return false;
    }
    auto type = part.get_string("type");
    if (type == "input_text" || type == "output_text") {
      auto t = part.find("text");
      if (t == nullptr || !t->is_string()) {
        why = {at + ".text must be a string", "invalid_request",
               at + ".text"};
        return false;
      }
      if (!out.empty())
        out += "\n";
      out += t->as_string();
    } else if (type == "input_image" || type == "input_file"
               || type == "input_audio" || type == "refusal") {
      why = {at + ": content parts of type '" + type
               + "' are not supported; this node takes text only "
                 "(input_text)",
             "unsupported_parameter", at + ".type"};
      return false;
    } else {
      why = {at + ".type must be 'input_text' (got '" + type + "')",
             "invalid_request", at + ".type"};
      return false;
    }
  }
  return true;
}

bool parse_input(const json::value& input, responses_request& out,
                 std::string& system, responses_refusal& why) {
  if (input.is_string()) {
    out.prompt = input.as_string();
    return true;
  }
  if (!input.is_array() || input.size() == 0) {
    why = {"'input' must be a string or a non-empty array of input items",
           "invalid_request", "input"};
    return false;
  }
  std::vector<chat_message> list;
  // The assistant message that holds the calls of the current run of
  // mibyan_tool_call items (-1: none; the run ends at the next message).
  int64_t owner = -1;
  size_t i = 0;
  for (auto& item : input.as_array()) {
    auto where = "input[" + std::to_string(i++) + "]";
    if (!item.is_object()) {
      why = {where + " must be an object", "invalid_request", where};
      return false;
    }
    auto type = item.get_string("type", "message");
    if (type == "mibyan_tool_call") {
      // A tool item of an earlier response sent back as input: the model's
      // call (on the assistant message before it) and the tool's result.
      auto field = [&](const char* key, std::string& out) {
        auto f = item.find(key);
        if (f == nullptr || !f->is_string() || f->as_string().empty()) {
          why = {where + "." + key + " must be a non-empty string",
                 "invalid_request", where + "." + key};
          return false;
        }
        out = f->as_string();
        return true;
      };
      tool_call call;
      if (!field("call_id", call.id) || !field("name", call.name))
        return false;
      if (auto a = item.find("arguments"); a != nullptr && a->is_string())
        call.arguments = a->as_string();
      auto result = item.find("result");
      if (result == nullptr || !result->is_string())
        continue; // the call never finished: no result to give the model
      if (owner < 0) {
        if (list.empty() || list.back().role != "assistant"
            || !list.back().tool_calls.empty()) {
          chat_message a;
          a.role = "assistant";
          list.push_back(std::move(a));
        }
        owner = static_cast<int64_t>(list.size()) - 1;
      }
      chat_message res;
      res.role = "tool";
      res.tool_call_id = call.id;
      res.tool_name = call.name;
      res.content = result->as_string();
      list[static_cast<size_t>(owner)].tool_calls.push_back(std::move(call));
      list.push_back(std::move(res));
      continue;
    }
    owner = -1;
    if (type != "message") {
      why = {where + ": input items of type '" + type
               + "' are not supported. Mibyan runs its own tools and keeps "
                 "their calls in the session: send messages, and continue "
                 "a conversation with previous_response_id",
             "unsupported_parameter", where + ".type"};
      return false;
    }
    auto role = item.get_string("role");
    if (role != "user" && role != "assistant" && role != "system"
        && role != "developer") {
      why = {where + ".role must be user, assistant, system or developer",
             "invalid_request", where + ".role"};
      return false;
    }
    auto content = item.find("content");
    if (content == nullptr) {
      why = {where + ".content is required", "invalid_request",
             where + ".content"};
      return false;
    }
    std::string text;
    if (!item_text(*content, where, text, why))
      return false;
    // An assistant message voided by a retried provider call.
    if (role == "assistant" && item.get_string("status") == "incomplete")
      continue;
    if (role == "system" || role == "developer") {
      system += (system.empty() ? "" : "\n\n") + text;
      continue;
    }
    chat_message m;
    m.role = role;
    m.content = std::move(text);
    list.push_back(std::move(m));
  }
  if (list.empty() || list.back().role != "user") {
    why = {"the last input item must be a message with role 'user'",
           "invalid_request", "input"};
    return false;
  }
  if (!system.empty()) {
    for (auto& m : list)
      if (m.role == "user") {
        m.content = system + "\n\n" + m.content;
        break;
      }
    system.clear();
  }
  out.prompt = std::move(list.back().content);
  list.pop_back();
  out.earlier = std::move(list);
  return true;
}

} // namespace

bool parse_responses_request(std::string_view body, responses_request& out,
                             size_t max_items, responses_refusal& why) {
  auto refuse = [&](std::string msg, std::string param,
                    std::string code = "invalid_request") {
    why = {std::move(msg), std::move(code), std::move(param)};
    return false;
  };
  auto unsupported = [&](const std::string& param, const std::string& msg) {
    return refuse("'" + param + "' is not supported: " + msg, param,
                  "unsupported_parameter");
  };
  // The count first, before a DOM of the items is built.
  if (auto n = json::array_member_size(body, "input");
      n >= 0 && static_cast<uint64_t>(n) > max_items)
    return refuse("'input' has " + std::to_string(n)
                    + " items; this server takes at most "
                    + std::to_string(max_items) + " (server.max_messages)",
                  "input", "too_many_items");
  auto parsed = json::parse(body);
  if (!parsed)
    return refuse("the request body is not valid JSON: " + parsed.error, "");
  auto& v = *parsed.v;
  if (!v.is_object())
    return refuse("the request body must be a JSON object", "");
  auto present = [&](const char* key) -> const json::value* {
    auto p = v.find(key);
    return p != nullptr && !p->is_null() ? p : nullptr;
  };
  if (auto m = present("model")) {
    if (!m->is_string())
      return refuse("'model' must be a string", "model");
    out.model = m->as_string();
  }
  for (auto [key, dst] : {std::pair<const char*, bool*>{"stream", &out.stream},
                          {"store", &out.store}})
    if (auto b = present(key)) {
      if (!b->is_bool())
        return refuse(std::string{"'"} + key + "' must be a boolean", key);
      *dst = b->as_bool();
    }
  if (auto p = present("previous_response_id")) {
    if (!p->is_string())
      return refuse("'previous_response_id' must be a string",
                    "previous_response_id");
    if (auto err = check_response_id(p->as_string()).error; !err.empty())
      return refuse("'previous_response_id' is malformed: " + err,
                    "previous_response_id");
    out.previous_response_id = p->as_string();
  }
  if (auto p = present("instructions")) {
    if (!p->is_string())
      return refuse("'instructions' must be a string", "instructions");
    out.instructions = *p;
  }
  if (auto p = present("metadata")) {
    if (!p->is_object())
      return refuse("'metadata' must be an object", "metadata");
    if (p->size() > max_metadata_pairs)
      return refuse("'metadata' has at most 16 pairs", "metadata");
    for (auto& [k, val] : p->as_object()) {
      if (k.size() > max_metadata_key || !val.is_string()
          || val.as_string().size() > max_metadata_value)
        return refuse("'metadata' keys have at most 64 characters and "
                      "values are strings of at most 512",
                      "metadata." + json::sanitize_utf8(k));
    }
    out.metadata = *p;
  }
  if (auto p = present("max_output_tokens")) {
    if (!p->is_int() || p->as_int() < 1)
      return refuse("'max_output_tokens' must be a positive integer",
                    "max_output_tokens");
    return unsupported("max_output_tokens",
                       "a turn makes several model calls and the node sets "
                       "the output limit of each; leave it out");
  }
  if (auto p = present("tools")) {
    if (!p->is_array())
      return refuse("'tools' must be an array", "tools");
    if (p->size() > 0)
      return unsupported("tools",
                         "Mibyan runs its own tools (files, terminal, "
                         "execute_code, ...); client-side tools are not "
                         "offered to the model. Leave 'tools' out");
  }
  if (auto p = present("tool_choice");
      p && !(p->is_string() && p->as_string() == "auto"))
    return unsupported("tool_choice", "only 'auto' (the default)");
  if (auto p = present("text")) {
    if (!p->is_object())
      return refuse("'text' must be an object", "text");
    if (auto f = p->find("format"); f && !f->is_null()
                                    && f->get_string("type") != "text")
      return unsupported("text.format", "only {\"type\":\"text\"}");
  }
  if (auto p = present("background"); p && !(p->is_bool() && !p->as_bool()))
    return unsupported("background", "responses run in the foreground");
  if (present("prompt"))
    return unsupported("prompt", "prompt templates are not offered");
  if (present("conversation"))
    return unsupported("conversation", "use previous_response_id");
  auto input = present("input");
  if (input == nullptr)
    return refuse("'input' is required", "input");
  std::string system;
  if (out.instructions.is_string())
    system = out.instructions.as_string();
  if (!parse_input(*input, out, system, why))
    return false;
  if (!system.empty()) // a string input: the instructions go in front
    out.prompt = system + "\n\n" + out.prompt;
  if (out.prompt.find_first_not_of(" \t\r\n") == std::string::npos)
    return refuse("the last user message is empty", "input");
  return true;
}

namespace {

std::string key_digest(const std::string& key) {
  return sha256_hex("mibyan responses Idempotency-Key\n" + key);
}

std::string sse_event(const std::string& type, json::value data,
                      int64_t& seq) {
  data["type"] = type;
  data["sequence_number"] = seq++;
  return "event: " + type + "\ndata: " + data.dump() + "\n\n";
}

} // namespace

std::string keyed_response_id(const std::string& key) {
  return "resp_" + key_digest(key).substr(0, 48);
}

std::string keyed_session_id(const std::string& key) {
  return "resp-" + key_digest(key).substr(0, 32);
}

std::string replay_response_events(const json::value& object) {
  int64_t seq = 0;
  std::string out;
  json::value start = object;
  start["status"] = "in_progress";
  start["output"] = json::value::make_array();
  start["usage"] = json::value{};
  json::value d;
  d["response"] = start;
  out += sse_event("response.created", d, seq);
  out += sse_event("response.in_progress", std::move(d), seq);
  int64_t index = 0;
  if (auto items = object.find("output"); items && items->is_array())
    for (auto& item : items->as_array()) {
      json::value added;
      added["output_index"] = index;
      added["item"] = item;
      bool message = item.get_string("type") == "message";
      if (message) {
        added["item"]["status"] = "in_progress";
        added["item"]["content"] = json::value::make_array();
      }
      out += sse_event("response.output_item.added", std::move(added), seq);
      if (message) {
        std::string text;
        if (auto parts = item.find("content"); parts && parts->is_array())
          for (auto& part : parts->as_array())
            text += part.get_string("text");
        json::value base;
        base["item_id"] = item.get_string("id");
        base["output_index"] = index;
        base["content_index"] = 0;
        json::value empty_part;
        empty_part["type"] = "output_text";
        empty_part["text"] = "";
        empty_part["annotations"] = json::value::make_array();
        json::value part_added = base;
        part_added["part"] = empty_part;
        out += sse_event("response.content_part.added", std::move(part_added),
                         seq);
        if (!text.empty()) {
          json::value delta = base;
          delta["delta"] = text;
          out += sse_event("response.output_text.delta", std::move(delta),
                           seq);
        }
        json::value done = base;
        done["text"] = text;
        out += sse_event("response.output_text.done", std::move(done), seq);
        json::value part_done = base;
        part_done["part"] = empty_part;
        part_done["part"]["text"] = text;
        out += sse_event("response.content_part.done", std::move(part_done),
                         seq);
      }
      json::value done;
      done["output_index"] = index;
      done["item"] = item;
      out += sse_event("response.output_item.done", std::move(done), seq);
      ++index;
    }
  auto status = object.get_string("status");
  if (status != "failed" && status != "incomplete")
    status = "completed";
  json::value end;
  end["response"] = object;
  return out + sse_event("response." + status, std::move(end), seq);
}

std::string response_id() {
  static std::mutex mtx;
  static std::mt19937_64 gen{std::random_device{}()};
  unsigned long long a, b, c;
  {
    std::lock_guard<std::mutex> g{mtx};
    a = gen();
    b = gen();
    c = gen();
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "resp_%016llx%016llx%016llx", a, b, c);
  return buf;
}

std::string error_body_param(const std::string& message,
                             const std::string& type, const std::string& code,
                             const std::string& param) {
  json::value e;
  e["message"] = message;
  e["type"] = type;
  e["code"] = code.empty() ? json::value{} : json::value{code};
  e["param"] = param.empty() ? json::value{} : json::value{param};
  json::value v;
  v["error"] = std::move(e);
  return v.dump();
}

// -- response_builder ---------------------------------------------------------

namespace {

json::value text_part(const std::string& text) {
  json::value p;
  p["type"] = "output_text";
  p["annotations"] = json::value::make_array();
  p["text"] = text;
  return p;
}

json::value usage_object(const completion_usage& u) {
  json::value v;
  v["input_tokens"] = u.prompt_tokens;
  v["input_tokens_details"]["cached_tokens"] = u.cached_tokens;
  v["output_tokens"] = u.completion_tokens;
  v["output_tokens_details"]["reasoning_tokens"] = u.reasoning_tokens;
  v["total_tokens"] = u.total_tokens;
  return v;
}

} // namespace

response_builder::response_builder(std::string id, int64_t created_at,
                                   std::string model, json::value echo,
                                   bool events)
  : id_(std::move(id)),
    created_at_(created_at),
    model_(std::move(model)),
    echo_(std::move(echo)),
    events_(events) {}

json::value response_builder::object() const {
  json::value o;
  o["id"] = id_;
  o["object"] = "response";
  o["created_at"] = created_at_;
  o["status"] = status_;
  o["background"] = false;
  o["error"] = error_;
  o["incomplete_details"] = incomplete_;
  auto echoed = [this](const char* key, json::value fallback) {
    auto p = echo_.find(key);
    return p != nullptr ? *p : fallback;
  };
  o["instructions"] = echoed("instructions", json::value{});
  o["max_output_tokens"] = nullptr;
  o["metadata"] = echoed("metadata", json::value::make_object());
  o["model"] = model_;
  o["output"] = json::value{output_};
  o["parallel_tool_calls"] = false;
  o["previous_response_id"] = echoed("previous_response_id", json::value{});
  o["reasoning"]["effort"] = nullptr;
  o["reasoning"]["summary"] = nullptr;
  o["store"] = echo_.get_bool("store", true);
  o["temperature"] = nullptr;
  o["text"]["format"]["type"] = "text";
  o["tool_choice"] = "auto";
  o["tools"] = json::value::make_array();
  o["top_p"] = nullptr;
  o["truncation"] = "disabled";
  o["usage"] = usage_;
  o["user"] = nullptr;
  if (!ext_.is_null())
    o["mibyan"] = ext_;
  return o;
}

std::string response_builder::emit(const std::string& type,
                                   json::value data) {
  if (!events_)
    return {};
  data["type"] = type;
  data["sequence_number"] = seq_++;
  return "event: " + type + "\ndata: " + data.dump() + "\n\n";
}

std::string response_builder::extension(const std::string& name,
                                        json::value data) {
  return emit("mibyan." + name, std::move(data));
}

std::string response_builder::item_id(const char* prefix) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%s_%.40s%04llx", prefix,
                id_.c_str() + (id_.size() > 5 ? 5 : 0),
                static_cast<unsigned long long>(items_++));
  return buf;
}

std::string response_builder::start() {
  json::value d;
  d["response"] = object();
  auto out = emit("response.created", d);
  return out + emit("response.in_progress", std::move(d));
}

std::string response_builder::open_message() {
  json::value item;
  item["id"] = item_id("msg");
  item["type"] = "message";
  item["role"] = "assistant";
  item["status"] = "in_progress";
  item["content"] = json::value::make_array();
  open_ = static_cast<int64_t>(output_.size());
  text_.clear();
  output_.push_back(item);
  json::value added;
  added["output_index"] = open_;
  added["item"] = item;
  auto out = emit("response.output_item.added", std::move(added));
  json::value part;
  part["item_id"] = item["id"];
  part["output_index"] = open_;
  part["content_index"] = 0;
  part["part"] = text_part("");
  return out + emit("response.content_part.added", std::move(part));
}

std::string response_builder::close_message(const std::string& text,
                                            const char* status) {
  auto& item = output_[static_cast<size_t>(open_)];
  item["status"] = status;
  item["content"] = json::value::make_array();
  item["content"].push_back(text_part(text));
  std::string out;
  json::value base;
  base["item_id"] = item["id"];
  base["output_index"] = open_;
  base["content_index"] = 0;
  json::value done = base;
  done["text"] = text;
  out += emit("response.output_text.done", std::move(done));
  json::value part = base;
  part["part"] = text_part(text);
  out += emit("response.content_part.done", std::move(part));
  json::value idone;
  idone["output_index"] = open_;
  idone["item"] = item;
  out += emit("response.output_item.done", std::move(idone));
  open_ = -1;
  text_.clear();
  return out;
}

std::string response_builder::text(const std::string& delta) {
  if (delta.empty())
    return {};
  std::string out;
  if (open_ < 0)
    out = open_message();
  text_ += delta;
  json::value d;
  d["item_id"] = output_[static_cast<size_t>(open_)]["id"];
  d["output_index"] = open_;
  d["content_index"] = 0;
  d["delta"] = delta;
  return out + emit("response.output_text.delta", std::move(d));
}

std::string response_builder::tool(const tool_event& ev) {
  const auto& call_id = ev.call_id;
  std::string out;
  if (ev.what == tool_event::phase::start) {
    // The text the model wrote before its tool calls is an item of its own.
    if (open_ >= 0)
      out += close_message(text_, "completed");
    json::value item;
    item["id"] = item_id("mtc");
    item["type"] = "mibyan_tool_call";
    item["call_id"] = call_id;
    item["name"] = ev.tool;
    item["arguments"] = ev.args_json;
    item["status"] = "in_progress";
    item["result"] = nullptr;
    item["duration_us"] = nullptr;
    tools_[call_id] = output_.size();
    json::value added;
    added["output_index"] = static_cast<int64_t>(output_.size());
    added["item"] = item;
    output_.push_back(std::move(item));
    return out + emit("response.output_item.added", std::move(added));
  }
  auto it = tools_.find(call_id);
  if (it == tools_.end()) { // an end without a start: report it whole
    auto start = ev;
    start.what = tool_event::phase::start;
    out += tool(start);
    it = tools_.find(call_id);
  }
  auto idx = it->second;
  tools_.erase(it);
  auto& item = output_[idx];
  item["status"] = "completed";
  item["result"] = ev.result_json;
  item["duration_us"] = ev.duration_us;
  json::value done;
  done["output_index"] = static_cast<int64_t>(idx);
  done["item"] = item;
  return out + emit("response.output_item.done", std::move(done));
}

std::string response_builder::restart() {
  return open_ >= 0 ? close_message(text_, "incomplete") : std::string{};
}

std::string response_builder::finish(const response_end& end) {
  std::string out;
  // Tools still running (an interrupted turn) end incomplete.
  for (auto& [call, idx] : tools_) {
    auto& item = output_[idx];
    item["status"] = "incomplete";
    json::value done;
    done["output_index"] = static_cast<int64_t>(idx);
    done["item"] = item;
    out += emit("response.output_item.done", std::move(done));
  }
  tools_.clear();
  bool ok = end.status == "completed";
  if (ok) {
    if (open_ < 0 && !end.answer.empty()) {
      // The provider did not stream the answer: one delta with all of it.
      out += text(end.answer);
    }
    if (open_ >= 0)
      out += close_message(end.answer.empty() ? text_ : end.answer,
                           "completed");
  } else if (open_ >= 0) {
    out += close_message(text_, "incomplete");
  }
  status_ = end.status;
  usage_ = usage_object(end.usage);
  ext_ = end.ext;
  if (end.status == "failed") {
    error_ = json::value::make_object();
    error_["code"] = "server_error";
    error_["message"] = end.error;
  } else if (end.status == "incomplete") {
    incomplete_ = json::value::make_object();
    incomplete_["reason"] = "interrupted";
    if (!end.error.empty())
      ext_["message"] = end.error;
  }
  json::value d;
  d["response"] = object();
  return out + emit("response." + end.status, std::move(d));
}

} // namespace mibyan
