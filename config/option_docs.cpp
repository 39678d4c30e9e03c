#include "config/option_docs.hpp"

#include "config/option_table.hpp"

namespace mibyan {

const char* const config_reference_begin =
  "<!-- BEGIN config keys: generated from config/option_table.def; "
  "MIBYAN_UPDATE_DOCS=1 tests/config_docs_test rewrites it -->";
const char* const config_reference_end = "<!-- END config keys -->";

namespace {

// The "values" cell of a row.
std::string values_cell(const option_row& row) {
  switch (row.kind) {
  case option_kind::integer:
    return std::to_string(row.min) + " .. " + std::to_string(row.max);
  case option_kind::boolean:
    return "true, false";
  case option_kind::string:
    return "string";
  case option_kind::secret:
    return "string, shown masked";
  case option_kind::checked:
    return "string, checked";
  case option_kind::list:
    return "list of strings";
  case option_kind::fraction:
    return "number in (0, 1]";
  case option_kind::mapping:
    return "mapping";
  case option_kind::choice: {
    std::string out;
    std::string v = row.values;
    for (size_t start = 0;;) {
      auto bar = v.find('|', start);
      auto item = v.substr(start, bar - start);
      out += (out.empty() ? "" : ", ")
             + (item.empty() ? std::string{"`\"\"`"} : item);
      if (bar == std::string::npos)
        break;
      start = bar + 1;
    }
    return out;
  }
  case option_kind::custom:
    return row.values;
  }
  return {};
}

} // namespace

std::string config_reference_markdown() {
  const options defaults{};
  std::string out;
  std::string section = "\x01";
  for (auto& row : option_table()) {
    if (section != row.section) {
      section = row.section;
      out += "\n#### ";
      if (section.empty())
        out += "Top-level keys";
      for (auto& s : option_sections())
        if (section == s.name)
          out += "`" + section + "`: " + s.doc;
      out += "\n\n| key | default | values | meaning |\n|---|---|---|---|\n";
    }
    out += "| `" + row.name() + "` | `" + row.show(defaults) + "` | "
           + values_cell(row) + " | " + row.doc + " |\n";
  }
  return out.substr(1);
}

} // namespace mibyan
