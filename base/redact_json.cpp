// File: base/redact_json.cpp
#include "base/redact_json.hpp"

#include <string>

#include "base/redact.hpp"

namespace mibyan {

namespace {

bool walk(json::value& v, const redactor& r, std::string& scratch,
          int depth) {
  if (depth > 64)
    return false; // the JSON parser caps nesting far below this
  switch (v.type()) {
    case json::kind::string:
      if (r.redact_to(v.as_string(), scratch)) {
        v = json::value{std::move(scratch)};
        scratch = std::string{};
        return true;
      }
      return false;
    case json::kind::array: {
      bool changed = false;
      for (auto& x : v.as_array())
        changed = walk(x, r, scratch, depth + 1) || changed;
      return changed;
    }
    case json::kind::object: {
      bool changed = false;
      for (auto& m : v.as_object())
        changed = walk(m.second, r, scratch, depth + 1) || changed;
      return changed;
    }
    default:
      return false;
  }
}

} // namespace

bool redact_json_strings(json::value& v, const redactor& r) {
  std::string scratch;
  return walk(v, r, scratch, 0);
}

} // namespace mibyan
