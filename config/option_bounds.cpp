#include "config/option_bounds.hpp"

#include "config/option_table.hpp"

namespace mibyan {

const std::vector<numeric_bounds>& numeric_option_bounds() {
  static const std::vector<numeric_bounds> table = [] {
    std::vector<numeric_bounds> out;
    for (auto& row : option_table())
      if (row.kind == option_kind::integer)
        out.push_back({row.section, row.key, row.min, row.max});
    return out;
  }();
  return table;
}

std::string check_numeric_bounds(std::string_view section,
                                 std::string_view key, int64_t value) {
  for (auto& b : numeric_option_bounds())
    if (section == b.section && key == b.key) {
      if (value < b.min || value > b.max)
        return "must be between " + std::to_string(b.min) + " and "
               + std::to_string(b.max) + ", got " + std::to_string(value);
      return {};
    }
  return "is no integer option";
}

int64_t clamp_to_bounds(std::string_view section, std::string_view key,
                        int64_t value) {
  for (auto& b : numeric_option_bounds())
    if (section == b.section && key == b.key)
      return value < b.min ? b.min : value > b.max ? b.max : value;
  return value;
}

} // namespace mibyan
