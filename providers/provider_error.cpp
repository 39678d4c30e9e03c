// File: providers/provider_error.cpp
#include "providers/provider_error.hpp"

namespace mibyan {

namespace {

std::string scalar_text(const json::value& x) {
  if (x.is_string())
    return x.as_string();
  if (x.is_int())
    return std::to_string(x.as_int());
  if (x.is_number() || x.is_bool())
    return x.dump();
  return {};
}

bool retryable_code(const json::value* x) {
  if (x == nullptr)
    return false;
  int64_t code = -1;
  if (x->is_int()) {
    code = x->as_int();
  } else if (x->is_string()) {
    const auto& s = x->as_string();
    if (!s.empty() && s.size() <= 3
        && s.find_first_not_of("0123456789") == std::string::npos)
      code = std::stoll(s);
  }
  return code >= 0 && retryable_status(static_cast<int>(code));
}

} // namespace

bool retryable_status(int status) {
  return status == 408 || status == 429 || (status >= 500 && status < 600);
}

std::string describe_error(const json::value& error) {
  if (error.is_string())
    return error.as_string().empty() ? "unspecified error"
                                     : error.as_string();
  if (!error.is_object())
    return error.dump();
  std::string msg;
  if (auto m = error.find("message"); m != nullptr && m->is_string())
    msg = m->as_string();
  else if (auto e = error.find("error"); e != nullptr && e->is_object())
    return describe_error(*e);
  else if (e != nullptr && e->is_string())
    msg = e->as_string();
  if (msg.empty())
    msg = "unspecified error: " + error_snippet(error.dump());
  // Routers keep the upstream provider's text in metadata.raw.
  if (auto md = error.find("metadata"); md != nullptr && md->is_object()) {
    if (auto raw = md->find("raw"); raw != nullptr && raw->is_string()
                                    && !raw->as_string().empty())
      msg += " (upstream: " + error_snippet(raw->as_string()) + ")";
  }
  std::string tags;
  for (std::string_view key : {"type", "code", "status_code"}) {
    auto v = error.find(key);
    if (v == nullptr)
      continue;
    auto s = scalar_text(*v);
    if (s.empty() || msg.find(s) != std::string::npos
        || tags.find(s) != std::string::npos)
      continue;
    if (!tags.empty())
      tags += ", ";
    tags += s;
  }
  if (!tags.empty())
    msg += " [" + tags + "]";
  return msg;
}

bool retryable_error(const json::value& error) {
  if (!error.is_object())
    return false;
  if (retryable_code(error.find("code"))
      || retryable_code(error.find("status_code"))
      || retryable_code(error.find("status")))
    return true;
  auto type = error.get_string("type");
  return type == "server_error" || type == "overloaded_error"
         || type == "rate_limit_error" || type == "api_error"
         || type == "timeout_error" || type == "rate_limit_exceeded";
}

const json::value* find_error(const json::value& body) {
  if (!body.is_object())
    return nullptr;
  auto e = body.find("error");
  if (e == nullptr || e->is_null())
    return nullptr;
  if (e->is_string() && e->as_string().empty())
    return nullptr;
  return e;
}

void set_http_error(chat_response& resp, int status, std::string_view body) {
  resp.http_status = status;
  resp.retryable = retryable_status(status);
  std::string msg;
  if (auto parsed = json::parse(body); parsed && parsed.v->is_object()) {
    const auto& obj = *parsed.v;
    if (auto e = find_error(obj)) {
      msg = describe_error(*e);
    } else if (auto m = obj.find("message"); m && m->is_string()) {
      msg = m->as_string();
    } else if (auto d = obj.find("detail"); d && d->is_string()) {
      msg = d->as_string();
    } else if (d != nullptr) {
      msg = error_snippet(d->dump());
    }
  }
  if (msg.empty())
    msg = body.empty() ? std::string{"empty response body"}
                       : error_snippet(body);
  resp.error = "HTTP " + std::to_string(status) + ": " + msg;
}

std::string error_snippet(std::string_view text, size_t max) {
  std::string out;
  bool truncated = text.size() > max;
  auto cut = json::sanitize_utf8(text.substr(0, max));
  // sanitize_utf8 turns a code point cut in half into U+FFFD; drop it.
  if (truncated && cut.size() >= 3 && cut.compare(cut.size() - 3, 3,
                                                  "\xEF\xBF\xBD") == 0)
    cut.resize(cut.size() - 3);
  out.reserve(cut.size());
  bool space = false;
  for (char c : cut) {
    if (c == '\n' || c == '\r' || c == '\t' || c == ' ') {
      space = true;
      continue;
    }
    if (space && !out.empty())
      out += ' ';
    space = false;
    out += c;
  }
  if (truncated)
    out += "...";
  return out;
}

} // namespace mibyan
