#include "tools/script_specs.hpp"

#include <algorithm>

namespace mibyan {

result<script_tool_spec> builtin_script_spec(const tool& t) {
  auto policy = t.script();
  auto schema = t.schema();
  if (auto props = schema.find("properties");
      props != nullptr && props->is_object())
    for (auto& name : policy.stripped)
      props->erase(name);
  auto doc = first_sentence(t.description());
  if (!policy.returns.empty())
    doc += " Returns " + policy.returns + ".";
  auto spec = make_script_tool_spec(t.name(), doc, schema);
  // A built-in tool's bad name or schema is our bug, not the caller's.
  if (!spec)
    return result<script_tool_spec>::failure(status_code::internal,
                                             spec.error);
  spec->returns = policy.returns;
  return spec;
}

result<std::vector<script_tool_spec>> builtin_script_specs(
  const tool_registry& reg) {
  std::vector<script_tool_spec> out;
  for (auto t : reg.all()) { // sorted by name
    if (!t->script().allowed)
      continue;
    auto spec = builtin_script_spec(*t);
    if (!spec)
      return spec.get_status();
    out.push_back(std::move(*spec));
  }
  return out;
}

const std::vector<script_tool_spec>& core_script_specs() {
  static const std::vector<script_tool_spec> specs = [] {
    tool_registry reg;
    register_core_tools(reg);
    auto r = builtin_script_specs(reg);
    return r ? std::move(*r) : std::vector<script_tool_spec>{};
  }();
  return specs;
}

std::vector<std::string> core_script_tool_names() {
  std::vector<std::string> names;
  for (auto& s : core_script_specs())
    names.push_back(s.name);
  return names;
}

} // namespace mibyan
