#include "tools/agent/delegate_task.hpp"

#include <string>
#include <utility>

#include "config/options.hpp"

namespace mibyan {

namespace {

class delegate_task_tool final : public tool {
public:
  delegate_task_tool(int64_t concurrent, int64_t iterations,
                     int64_t background, std::string default_sets)
    : concurrent_(concurrent), iterations_(iterations),
      background_(background), default_sets_(std::move(default_sets)) {}

  const char* name() const override { return "delegate_task"; }
  const char* toolset() const override { return "delegation"; }

  std::string description() const override {
    return "Delegate work to subagents. Each task runs in a fresh child "
           "agent that sees only its goal and context (not this "
           "conversation), with its own tools, terminal and Python kernel "
           "but no delegation, clarify or memory. Give either `goal` (one "
           "task) or `tasks` (several, run in parallel, at most "
           + std::to_string(concurrent_)
           + " at once). Each child has a budget of "
           + std::to_string(iterations_)
           + " model calls and the toolsets named in `toolsets` (default: "
           + default_sets_
           + "). Returns {\"results\": [{\"task_index\", "
             "\"status\", \"summary\", \"api_calls\", \"duration_seconds\", "
             "\"exit_reason\", ...}], \"total_duration_seconds\"}. With "
             "`background: true` it returns at once with task ids (at most "
           + std::to_string(background_)
           + " running per session) and each child's summary is delivered "
             "at the start of a later turn; action=\"status\" or "
             "\"cancel\" with `id` checks or stops one. Put everything the "
             "child needs (paths, constraints, what to report) in goal and "
             "context.";
  }

  json::value schema() const override {
    json::value task;
    task["type"] = "object";
    task["properties"]["goal"]
      = schema_property("string", "What the subagent must achieve.");
    task["properties"]["context"]
      = schema_property("string", "Background the subagent needs.");
    task["properties"]["role"]
      = schema_property("string", "leaf (default) or orchestrator.");
    task["required"] = json::value::make_array();
    task["required"].push_back("goal");
    json::value props;
    props["goal"] = schema_property("string",
                                    "The goal of a single task (ignored "
                                    "when `tasks` is given).");
    props["context"] = schema_property("string",
                                       "Background for the single task.");
    props["tasks"] = schema_property("array",
                                     "Several tasks to run in parallel.");
    props["tasks"]["items"] = std::move(task);
    props["role"] = schema_property("string", "leaf (default).");
    props["toolsets"] = schema_property(
      "array", "Toolsets the subagents get (default " + default_sets_
                 + "); never more than this conversation has.");
    props["toolsets"]["items"] = schema_property("string", "A toolset name.");
    props["background"] = schema_property(
      "boolean", "Return at once with task ids; each summary arrives at "
                 "the start of a later turn.");
    props["action"] = schema_property(
      "string", "start (default), status (of `id`, or every running task "
                "without it) or cancel (`id`).");
    props["action"]["enum"] = json::value::make_array();
    for (auto* a : {"start", "status", "cancel"})
      props["action"]["enum"].push_back(json::value{a});
    props["id"] = schema_property("string",
                                  "A background task id (status, cancel).");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    return s;
  }

  json::value run(const json::value&, const tool_context&) const override {
    return error_result("delegate_task runs only inside an agent turn (the "
                        "conversation starts the subagents); it cannot be "
                        "called directly or from a script");
  }

private:
  int64_t concurrent_;
  int64_t iterations_;
  int64_t background_;
  std::string default_sets_;
};

} // namespace

std::unique_ptr<tool> make_delegate_task_tool(const options& cfg) {
  std::string sets;
  for (auto& s : cfg.delegation.default_toolsets)
    sets += (sets.empty() ? "" : ", ") + s;
  if (sets.empty())
    sets = "the parent's toolsets";
  return std::make_unique<delegate_task_tool>(
    cfg.delegation.max_concurrent_children, cfg.delegation.max_iterations,
    cfg.delegation.max_background_children, sets);
}

} // namespace mibyan
