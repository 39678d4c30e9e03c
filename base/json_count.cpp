#include "base/json_count.hpp"

#include <simdjson.h>

namespace mibyan::json {

int64_t array_member_size(std::string_view text, std::string_view key) {
  simdjson::padded_string padded{text};
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(obj))
    return -1;
  for (auto member : obj) {
    simdjson::ondemand::field field;
    std::string_view k;
    if (std::move(member).get(field) || field.unescaped_key().get(k))
      return -1;
    if (k != key)
      continue; // skipped without being built
    simdjson::ondemand::array arr;
    size_t n = 0;
    if (field.value().get_array().get(arr) || arr.count_elements().get(n))
      return -1;
    return static_cast<int64_t>(n);
  }
  return -1;
}

} // namespace mibyan::json
