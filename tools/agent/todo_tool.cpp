// The todo tool (docs/tools.md, "todo"): the session's task plan. The list
// lives in agent_tool_state per session; every result carries the whole
// list, so the stored session holds it too, and a resumed session (also in
// a new process) rebuilds it from its last todo result in the store (or
// its parent session's, when it continues a compressed one).
#include <set>

#include "storage/session_store.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/agent/agent_tools.hpp"

namespace mibyan {

namespace {

const char* const statuses[] = {"pending", "in_progress", "completed",
                                "cancelled"};

bool valid_status(const std::string& s) {
  for (auto x : statuses)
    if (s == x)
      return true;
  return false;
}

// The list in the session's newest todo result (else in its parent's, for
// a session continued after compression), or an empty list.
json::value from_history(const session_store& store, std::string sid) {
  for (int depth = 0; depth < 16 && !sid.empty(); ++depth) {
    auto loaded = store.load_messages(sid);
    if (!loaded)
      break;
    for (auto i = loaded->rbegin(); i != loaded->rend(); ++i) {
      auto& m = i->message;
      if (m.role != "tool" || m.tool_name != "todo")
        continue;
      auto parsed = json::parse(m.content);
      if (!parsed || !parsed.v->is_object())
        continue;
      auto list = parsed.v->find("todos");
      if (list != nullptr && list->is_array())
        return *list;
    }
    auto info = store.get_session(sid);
    sid = info ? info->parent_session_id : std::string{};
  }
  return json::value::make_array();
}

json::value result_of(const json::value& list) {
  int64_t counts[4] = {0, 0, 0, 0};
  for (auto& item : list.as_array()) {
    auto st = item.get_string("status");
    for (int k = 0; k < 4; ++k)
      if (st == statuses[k])
        ++counts[k];
  }
  json::value summary;
  summary["total"] = static_cast<int64_t>(list.size());
  for (int k = 0; k < 4; ++k)
    summary[statuses[k]] = counts[k];
  json::value r;
  r["todos"] = list;
  r["summary"] = std::move(summary);
  return r;
}

class todo_tool final : public tool {
public:
  const char* name() const override { return "todo"; }
  const char* toolset() const override { return "todo"; }

  std::string description() const override {
    return "Keep a task plan for this session. Call with no arguments to "
           "read the list. Pass todos to write it: merge=false (default) "
           "replaces the whole list, merge=true updates items by id and "
           "appends new ones. Each item needs id, content and status "
           "(pending, in_progress, completed, cancelled). Keep one item "
           "in_progress at a time and mark items completed as you finish "
           "them. The result is always the full list.";
  }

  json::value schema() const override {
    json::value status = schema_property("string", "Item state.");
    status["enum"] = json::array{"pending", "in_progress", "completed",
                                 "cancelled"};
    json::value item_props;
    item_props["id"] = schema_property("string", "Stable item id.");
    item_props["content"] = schema_property("string", "What to do.");
    item_props["status"] = status;
    json::value item;
    item["type"] = "object";
    item["properties"] = std::move(item_props);
    item["required"] = json::array{"id", "content", "status"};
    json::value todos = schema_property("array", "The items to write.");
    todos["items"] = std::move(item);
    json::value props;
    props["todos"] = std::move(todos);
    props["merge"] = schema_property(
      "boolean", "true: upsert by id; false (default): replace the list.");
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    return s;
  }

  bool parallel_safe() const override { return false; }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    if (ctx.agent == nullptr || ctx.session_id.empty())
      return error_result("todo needs a session: it is available in agent "
                          "turns, not in stand-alone tool calls.");
    json::value list;
    if (!ctx.agent->todos(ctx.session_id, &list))
      list = ctx.agent->store ? from_history(*ctx.agent->store, ctx.session_id)
                              : json::value::make_array();
    auto todos = args.find("todos");
    if (todos == nullptr || todos->is_null()) {
      ctx.agent->set_todos(ctx.session_id, list);
      return result_of(list);
    }
    if (!todos->is_array())
      return error_result("todos must be an array of {id, content, status}");
    std::vector<json::value> items;
    for (auto& it : todos->as_array()) {
      if (!it.is_object())
        return error_result("each todo must be an object with id, content "
                            "and status");
      json::value clean;
      for (auto key : {"id", "content", "status"}) {
        auto v = it.find(key);
        if (v == nullptr)
          return error_result(std::string{"each todo needs '"} + key + "'");
        clean[key] = v->is_string() ? v->as_string() : v->dump();
      }
      if (!valid_status(clean.get_string("status")))
        return error_result("todo '" + clean.get_string("id")
                            + "': status must be pending, in_progress, "
                              "completed or cancelled");
      items.push_back(std::move(clean));
    }
    json::value next = json::value::make_array();
    if (args.get_bool("merge", false)) {
      next = list;
      for (auto& it : items) {
        bool found = false;
        for (auto& old : next.as_array())
          if (old.get_string("id") == it.get_string("id")) {
            old = it;
            found = true;
          }
        if (!found)
          next.push_back(it);
      }
    } else {
      std::set<std::string> seen;
      for (auto& it : items)
        if (seen.insert(it.get_string("id")).second)
          next.push_back(it);
    }
    ctx.agent->set_todos(ctx.session_id, next);
    return result_of(next);
  }
};

} // namespace

std::unique_ptr<tool> make_todo_tool() {
  return std::make_unique<todo_tool>();
}

} // namespace mibyan
