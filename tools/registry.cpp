#include "tools/registry.hpp"

#include <algorithm>
#include <chrono>
#include <exception>

#include "base/runtime_metrics.hpp"

#include "tools/args.hpp"
#include "tools/redact_result.hpp"

namespace mibyan {

void tool_registry::add_locked(std::unique_ptr<tool> t) {
  for (auto i = tools_.begin(); i != tools_.end(); ++i)
    if (std::string_view{(*i)->name()} == t->name()) {
      retired_.push_back(std::move(*i));
      tools_.erase(i);
      break;
    }
  tools_.push_back(std::move(t));
}

void tool_registry::add(std::unique_ptr<tool> t) {
  {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    add_locked(std::move(t));
  }
  changed();
}

void tool_registry::changed() {
  generation_.fetch_add(1);
  std::lock_guard<std::mutex> guard{observers_.mtx};
  for (auto& [id, fn] : observers_.list)
    if (fn)
      fn();
}

uint64_t tool_registry::generation() const { return generation_.load(); }

uint64_t tool_registry::subscribe(std::function<void()> fn) const {
  std::lock_guard<std::mutex> guard{observers_.mtx};
  auto id = observers_.next++;
  observers_.list.emplace_back(id, std::move(fn));
  return id;
}

void tool_registry::unsubscribe(uint64_t id) const {
  std::lock_guard<std::mutex> guard{observers_.mtx};
  auto& l = observers_.list;
  l.erase(std::remove_if(l.begin(), l.end(),
                         [id](const auto& e) { return e.first == id; }),
          l.end());
}

void tool_registry::replace(const std::function<bool(const tool&)>& drop,
                            std::vector<std::unique_ptr<tool>> fresh) {
  {
    std::unique_lock<std::shared_mutex> guard{mtx_};
    for (auto i = tools_.begin(); i != tools_.end();) {
      if (drop(**i)) {
        retired_.push_back(std::move(*i));
        i = tools_.erase(i);
      } else {
        ++i;
      }
    }
    for (auto& t : fresh)
      add_locked(std::move(t));
  }
  changed();
}

const tool* tool_registry::find(std::string_view name) const {
  std::shared_lock<std::shared_mutex> guard{mtx_};
  for (auto& t : tools_)
    if (name == t->name())
      return t.get();
  return nullptr;
}

std::vector<const tool*> tool_registry::all() const {
  std::vector<const tool*> result;
  {
    std::shared_lock<std::shared_mutex> guard{mtx_};
    for (auto& t : tools_)
      result.push_back(t.get());
  }
  std::sort(result.begin(), result.end(), [](const tool* x, const tool* y) {
    return std::string_view{x->name()} < y->name();
  });
  return result;
}

std::string tool_registry::names() const {
  std::string result;
  for (auto t : all()) {
    if (!result.empty())
      result += ", ";
    result += t->name();
  }
  return result;
}

json::value tool_registry::function_specs() const {
  json::value result = json::value::make_array();
  for (auto t : all()) {
    json::value fn;
    fn["name"] = t->name();
    fn["description"] = t->description();
    fn["parameters"] = t->schema();
    json::value spec;
    spec["type"] = "function";
    spec["function"] = std::move(fn);
    result.push_back(std::move(spec));
  }
  return result;
}

namespace {

json::value invalid_arguments(std::string message) {
  json::value result;
  result["error"] = "Invalid tool arguments";
  result["message"] = std::move(message);
  return result;
}

} // namespace

json::value dispatch_tool(const tool_registry& reg, std::string_view name,
                          std::string_view args_json,
                          const tool_context& ctx) {
  auto parsed = json::parse(args_json.empty() ? std::string_view{"{}"}
                                              : args_json);
  if (!parsed)
    return invalid_arguments("Tool arguments must be a valid JSON object ("
                             + parsed.error + "); tool was not executed.");
  return dispatch_tool(reg, name, std::move(*parsed.v), ctx);
}

namespace {

json::value run_tool(const tool_registry& reg, std::string_view name,
                     json::value args, const tool_context& ctx) {
  auto t = reg.find(name);
  if (t == nullptr)
    return error_result("Unknown tool: " + std::string{name}
                        + ". Available tools: " + reg.names());
  if (!args.is_object())
    return invalid_arguments("Tool arguments must be a valid JSON object; "
                             "tool was not executed.");
  if (auto valid = coerce_and_validate(t->schema(), args); !valid.ok())
    return error_result(valid.error);
  try {
    auto result = t->run(args, ctx);
    if (!result.is_object())
      return error_result(std::string{"Tool handler returned unsupported "
                                      "result type: "}
                          + json::kind_name(result.type()));
    return result;
  } catch (const std::exception& e) {
    return error_result(std::string{"[TOOL_ERROR] Tool execution failed: "}
                        + e.what());
  } catch (...) {
    return error_result("[TOOL_ERROR] Tool execution failed: unknown error");
  }
}

} // namespace

json::value dispatch_tool(const tool_registry& reg, std::string_view name,
                          json::value args, const tool_context& ctx) {
  // The one choke point: every result, error texts included, is redacted
  // before it reaches a model, a script or a stored session
  // (docs/security.md).
  auto start = std::chrono::steady_clock::now();
  auto result = run_tool(reg, name, std::move(args), ctx);
  redact_json_strings(result, context_redactor(ctx));
  // ...and every registry tool call is counted here (docs/metrics.md);
  // execute_code cells are counted by their kernel.
  auto now = std::chrono::steady_clock::now();
  std::string_view outcome = "ok";
  if (ctx.is_cancelled())
    outcome = ctx.deadline != std::chrono::steady_clock::time_point{}
                  && now >= ctx.deadline
                ? "timeout"
                : "cancelled";
  else if (auto e = result.find("error");
           e != nullptr && !e->is_null()
           && !(e->is_string() && e->as_string().empty()))
    outcome = "error"; // some tools always carry "error": null or ""
  auto t = reg.find(name);
  metrics::count_tool_call(t != nullptr ? std::string_view{t->name()}
                                        : std::string_view{"other"},
                           outcome,
                           std::chrono::duration<double>(now - start).count());
  return result;
}

} // namespace mibyan
