#include "tools/rg_output.hpp"

#include "base/base64.hpp"

#include <cstdint>

namespace mibyan {

std::string rg_string(const json::value* v) {
  if (v == nullptr || !v->is_object())
    return {};
  if (auto t = v->find("text"); t && t->is_string())
    return t->as_string();
  if (auto b = v->find("bytes"); b && b->is_string())
    return json::sanitize_utf8(base64_decode(b->as_string()));
  return {};
}

} // namespace mibyan
