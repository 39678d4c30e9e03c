// File: providers/tool_schema.cpp
#include "providers/tool_schema.hpp"

#include <algorithm>

namespace mibyan {

std::vector<tool_schema> normalize_tools(const json::value& tools) {
  std::vector<tool_schema> out;
  if (!tools.is_array())
    return out;
  for (const auto& t : tools.as_array()) {
    if (!t.is_object())
      continue;
    const json::value* f = &t;
    if (auto inner = t.find("function"); inner && inner->is_object())
      f = inner;
    auto name = f->get_string("name");
    if (name.empty())
      continue;
    auto dup = std::any_of(out.begin(), out.end(),
                           [&](auto& x) { return x.name == name; });
    if (dup)
      continue;
    tool_schema s;
    s.name = std::move(name);
    s.description = f->get_string("description");
    const json::value* params = f->find("parameters");
    if (params == nullptr || !params->is_object())
      params = f->find("input_schema");
    if (params != nullptr && params->is_object() && params->size() > 0) {
      s.parameters = *params;
    } else {
      s.parameters = json::value::make_object();
      s.parameters["type"] = "object";
      s.parameters["properties"] = json::value::make_object();
    }
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](auto& x, auto& y) { return x.name < y.name; });
  return out;
}

} // namespace mibyan
