#include "serve/openai_messages.hpp"

namespace mibyan {

namespace {

// Returns the text of an OpenAI content value, or false for a shape we do
// not take (images, audio).
bool content_text(const json::value* c, std::string& out, std::string& err) {
  out.clear();
  if (c == nullptr || c->is_null())
    return true;
  if (c->is_string()) {
    out = c->as_string();
    return true;
  }
  if (!c->is_array()) {
    err = "message content must be a string or an array of text parts";
    return false;
  }
  for (auto& part : c->as_array()) {
    auto type = part.is_object() ? part.get_string("type", "") : "";
    auto text = part.is_object() ? part.find("text") : nullptr;
    if (type != "text" || text == nullptr || !text->is_string()) {
      err = "only text content parts are supported (got a part of type '"
            + type + "')";
      return false;
    }
    out += text->as_string();
  }
  return true;
}

} // namespace

bool chat_messages_from_openai(const json::value& messages,
                               std::vector<chat_message>& out,
                               std::string& error) {
  if (!messages.is_array()) {
    error = "messages must be an array";
    return false;
  }
  size_t i = 0;
  for (auto& m : messages.as_array()) {
    auto where = "messages[" + std::to_string(i++) + "]: ";
    if (!m.is_object()) {
      error = where + "must be an object";
      return false;
    }
    chat_message cm;
    cm.role = m.get_string("role", "");
    if (cm.role != "user" && cm.role != "assistant" && cm.role != "tool"
        && cm.role != "system") {
      error = where + "unknown role '" + cm.role + "'";
      return false;
    }
    std::string err;
    if (!content_text(m.find("content"), cm.content, err)) {
      error = where + err;
      return false;
    }
    if (auto calls = m.find("tool_calls");
        calls != nullptr && !calls->is_null()) {
      if (cm.role != "assistant" || !calls->is_array()) {
        error = where + "tool_calls must be an array on an assistant message";
        return false;
      }
      for (auto& c : calls->as_array()) {
        auto fn = c.is_object() ? c.find("function") : nullptr;
        if (fn == nullptr || !fn->is_object()
            || fn->get_string("name", "").empty()) {
          error = where + "each tool call needs function.name";
          return false;
        }
        cm.tool_calls.push_back(tool_call{c.get_string("id", ""),
                                          fn->get_string("name", ""),
                                          fn->get_string("arguments", "{}")});
      }
    }
    if (cm.role == "tool") {
      cm.tool_call_id = m.get_string("tool_call_id", "");
      cm.tool_name = m.get_string("name", "");
      if (cm.tool_call_id.empty()) {
        error = where + "a tool message needs tool_call_id";
        return false;
      }
    }
    out.push_back(std::move(cm));
  }
  return true;
}

} // namespace mibyan
