// File: providers/codec_support.cpp
#include "providers/codec_support.hpp"

#include <cctype>
#include <utility>

#include "providers/provider_error.hpp"

namespace mibyan::codec {

std::string lower(std::string_view s) {
  std::string out{s};
  for (auto& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

int64_t int_member(const json::value& obj, std::string_view key,
                   int64_t fallback) {
  auto x = obj.find(key);
  if (x == nullptr || !x->is_number())
    return fallback;
  return x->as_int();
}

bool valid_json(const std::string& text) {
  return static_cast<bool>(json::parse(text));
}

bool parse_response_object(int status, std::string_view body,
                           chat_response& r, json::value& obj) {
  r.http_status = status;
  if (!success_status(status)) {
    set_http_error(r, status, body);
    return false;
  }
  auto parsed = json::parse(body);
  if (!parsed) {
    r.error = "invalid JSON in response body (" + parsed.error
              + "); body starts: " + error_snippet(body, 200);
    r.retryable = true;
    return false;
  }
  if (!parsed.v->is_object()) {
    r.error = "invalid response: expected a JSON object, got "
              + std::string{json::kind_name(parsed.v->type())};
    r.retryable = true;
    return false;
  }
  obj = std::move(*parsed.v);
  return true;
}

} // namespace mibyan::codec
