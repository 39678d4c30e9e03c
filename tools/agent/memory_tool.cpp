// The memory tool (docs/tools.md, "memory"): add, replace or remove entries
// of MEMORY.md / USER.md; the file work is tools/agent/memory_store.hpp.
#include "config/options.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"
#include "tools/file_io.hpp"
#include "tools/agent/memory_store.hpp"

namespace mibyan {

namespace {

class memory_tool final : public tool {
public:
  const char* name() const override { return "memory"; }
  const char* toolset() const override { return "memory"; }

  std::string description() const override {
    return "Save durable facts to your persistent memory, which is shown in "
           "your system prompt in every future session. target 'memory' is "
           "for your own notes (environment facts, project conventions, "
           "lessons learned); target 'user' is for the user's profile and "
           "preferences. Entries are short, self-contained statements. "
           "action 'add' appends content; 'replace' swaps the one entry "
           "containing old_text for content; 'remove' deletes the one entry "
           "containing old_text. 'operations' applies several changes "
           "atomically. Space is limited: when full, consolidate by "
           "replacing or removing entries. Writes made now show in the "
           "prompt from the next session on. Do not store secrets or "
           "instructions.";
  }

  json::value schema() const override {
    json::value action = schema_property("string", "add, replace or remove.");
    action["enum"] = json::array{"add", "replace", "remove"};
    json::value target = schema_property(
      "string", "memory (your notes) or user (the user's profile).");
    target["enum"] = json::array{"memory", "user"};
    json::value op;
    op["type"] = "object";
    json::value op_props;
    op_props["action"] = action;
    op_props["content"] = schema_property("string", "Entry text.");
    op_props["old_text"] = schema_property("string",
                                           "Substring of the entry to change.");
    op["properties"] = std::move(op_props);
    op["required"] = json::array{"action"};
    json::value ops = schema_property(
      "array", "Several changes applied together (all or nothing, checked "
               "against the final size).");
    ops["items"] = std::move(op);
    json::value props;
    props["action"] = action;
    props["target"] = target;
    props["content"] = schema_property(
      "string", "The entry text (add) or its new text (replace).");
    props["old_text"] = schema_property(
      "string", "A unique substring of the entry to replace or remove.");
    props["operations"] = std::move(ops);
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    s["required"] = json::array{"target"};
    return s;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    std::vector<memory_op> ops;
    if (auto list = args.find("operations"); list && list->is_array()
                                              && list->size() > 0) {
      for (auto& o : list->as_array()) {
        if (!o.is_object())
          return error_result("each operation must be an object with "
                              "action, content and old_text");
        ops.push_back(memory_op{o.get_string("action"),
                                o.get_string("content"),
                                o.get_string("old_text")});
      }
    } else if (!args.get_string("action").empty()) {
      ops.push_back(memory_op{args.get_string("action"),
                              args.get_string("content"),
                              args.get_string("old_text")});
    }
    return apply_memory_ops(mibyan_home_of(ctx), *ctx.cfg,
                            args.get_string("target"), ops,
                            ctx.agent != nullptr ? ctx.agent->user_state.get()
                                                 : nullptr);
  }
};

} // namespace

std::unique_ptr<tool> make_memory_tool() {
  return std::make_unique<memory_tool>();
}

} // namespace mibyan
