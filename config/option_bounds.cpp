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

status validate_options(const options& opts) {
  for (auto& row : option_table()) {
    if (!row.check)
      continue;
    if (auto st = row.check(opts); !st.ok())
      return status::failure(status_code::config_invalid,
                             row.name() + ": " + st.error);
  }
  return {};
}

} // namespace mibyan
