// Input validation shared by the session store's backends
// (storage/store_checks.hpp).
#include "storage/store_checks.hpp"

#include "base/json.hpp"
#include "storage/session_store.hpp"

namespace mibyan::store_checks {

// Returns the byte offset of the first invalid UTF-8 sequence, or npos.
size_t invalid_utf8_at(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;
    }
    if (i + len > n)
      return i;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80)
        return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800)
                    || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

// "" if `s` is valid UTF-8, else a message naming the field and offset.
std::string check_utf8(const char* field, std::string_view s) {
  auto at = invalid_utf8_at(s);
  if (at == std::string_view::npos)
    return {};
  return std::string{field} + " is not valid UTF-8 (byte "
         + std::to_string(at) + "); convert or sanitize it before storing";
}

static bool valid_id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
         || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'
         || c == ':' || c == '@';
}

std::string check_session_id(const std::string& id) {
  if (id.empty())
    return "session id is empty";
  if (id.size() > session_store::max_id_bytes)
    return "session id is " + std::to_string(id.size())
           + " bytes; at most "
           + std::to_string(session_store::max_id_bytes) + " allowed";
  for (char c : id)
    if (!valid_id_char(c))
      return "session id '" + json::sanitize_utf8(id)
             + "' may only contain letters, digits and _-.:@";
  return {};
}

static bool known_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant"
         || role == "tool";
}

// Validates a message before any transaction starts.
std::string check_message(const chat_message& m, size_t max_bytes) {
  if (m.role.empty())
    return "message role is empty; use system, user, assistant or tool";
  if (!known_role(m.role))
    return "message role '" + json::sanitize_utf8(m.role.substr(0, 40))
           + "' is not one of system, user, assistant, tool";
  if (m.role == "tool" && m.tool_call_id.empty())
    return "a tool message needs the tool_call_id of the call it answers";
  if (!m.tool_calls.empty() && m.role != "assistant")
    return "only assistant messages carry tool_calls (role is " + m.role
           + ")";
  size_t total = m.content.size() + m.reasoning.size() + m.tool_name.size()
                 + m.tool_call_id.size() + m.finish_reason.size();
  for (auto& c : m.tool_calls)
    total += c.id.size() + c.name.size() + c.arguments.size();
  if (total > max_bytes)
    return "message is " + std::to_string(total) + " bytes; the limit is "
           + std::to_string(max_bytes)
           + " (truncate the content or store it in a file)";
  std::string err;
  if (!(err = check_utf8("content", m.content)).empty()
      || !(err = check_utf8("reasoning", m.reasoning)).empty()
      || !(err = check_utf8("tool_name", m.tool_name)).empty()
      || !(err = check_utf8("tool_call_id", m.tool_call_id)).empty()
      || !(err = check_utf8("finish_reason", m.finish_reason)).empty())
    return err;
  for (size_t i = 0; i < m.tool_calls.size(); ++i) {
    auto& c = m.tool_calls[i];
    auto which = "tool_calls[" + std::to_string(i) + "]";
    if (c.id.empty() || c.name.empty())
      return which + " needs an id and a function name";
    if (!(err = check_utf8((which + ".id").c_str(), c.id)).empty()
        || !(err = check_utf8((which + ".name").c_str(), c.name)).empty()
        || !(err = check_utf8((which + ".arguments").c_str(), c.arguments))
              .empty())
      return err;
  }
  return {};
}

std::string check_text_field(const char* field, const std::string& s,
                             size_t max) {
  if (s.size() > max)
    return std::string{field} + " is " + std::to_string(s.size())
           + " bytes; at most " + std::to_string(max) + " allowed";
  return check_utf8(field, s);
}

std::string check_usage(const token_usage& u, int64_t api_calls) {
  if (api_calls < 0 || u.input_tokens < 0 || u.output_tokens < 0
      || u.cache_read_tokens < 0 || u.cache_write_tokens < 0
      || u.reasoning_tokens < 0)
    return "counts must not be negative";
  if (u.has_cost && !(u.cost_usd >= 0 && u.cost_usd < 1e12))
    return "cost must be a non-negative number";
  return {};
}

void apply_usage(session_info& s, const token_usage& u, int64_t api_calls) {
  s.api_call_count += api_calls;
  add_token_usage(s.tokens, u);
}

void apply_end(session_info& s, const std::string& reason, int64_t at_ms) {
  if (s.ended_at_ms == 0) {
    s.ended_at_ms = at_ms;
    s.end_reason = reason;
  }
}

std::string check_approval_keys(const std::vector<std::string>& keys) {
  if (keys.size() > 256)
    return "more than 256 keys";
  for (size_t i = 0; i < keys.size(); ++i) {
    auto& k = keys[i];
    if (k.empty() || k.size() > 200 || k.find('\n') != std::string::npos)
      return "invalid key " + std::to_string(i)
             + " (empty, over 200 bytes or with a newline)";
  }
  return {};
}

} // namespace mibyan::store_checks
