// File: providers/codec_support.cpp
#include "providers/codec_support.hpp"

#include <cctype>
#include <utility>

#include "base/utf8.hpp"
#include "providers/provider_error.hpp"

namespace mibyan::codec {

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
  auto parsed = parse_provider_json(body);
  if (!parsed) {
    // The body arrived complete (a cut transfer is a transport error), so
    // the same bytes would fail again: not retryable.
    r.error = "invalid JSON in response body (" + parsed.error
              + "); body starts: " + error_snippet(body, 200);
    r.retryable = false;
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

namespace {

// The code unit of the `\uXXXX` escape at `s[i]` (s[i] == '\\'), or -1.
int escape_unit(std::string_view s, size_t i) {
  if (i + 6 > s.size() || s[i] != '\\' || s[i + 1] != 'u')
    return -1;
  int v = 0;
  for (size_t k = i + 2; k < i + 6; ++k) {
    int h = hex_digit_value(s[k]);
    if (h < 0)
      return -1;
    v = v * 16 + h;
  }
  return v;
}

} // namespace

std::string repair_json_text(std::string_view text) {
  auto clean = json::sanitize_utf8(text);
  std::string_view s = clean;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out += s[i++];
      continue;
    }
    if (s[i + 1] != 'u') { // any other escape: copy both bytes
      out.append(s.data() + i, 2);
      i += 2;
      continue;
    }
    int u = escape_unit(s, i);
    if (u >= 0xD800 && u <= 0xDBFF) {
      int low = escape_unit(s, i + 6);
      if (low >= 0xDC00 && low <= 0xDFFF) {
        out.append(s.data() + i, 12);
        i += 12;
      } else {
        out += "\\uFFFD";
        i += 6;
      }
    } else if (u >= 0xDC00 && u <= 0xDFFF) {
      out += "\\uFFFD"; // a low surrogate without its high half
      i += 6;
    } else {
      out.append(s.data() + i, 2);
      i += 2;
    }
  }
  return out;
}

json::parse_result parse_provider_json(std::string_view text) {
  auto parsed = json::parse(text);
  if (parsed)
    return parsed;
  auto repaired = repair_json_text(text);
  if (repaired == text)
    return parsed;
  auto again = json::parse(repaired);
  return again ? std::move(again) : std::move(parsed);
}

} // namespace mibyan::codec
