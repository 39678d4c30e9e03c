#include "runtime/host_tool_adapter.hpp"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <set>

#include "tools/registry.hpp"

namespace mibyan {

namespace {

// Turns a handler's answer into a result object: JSON text as is, other
// text as {"result": text}.
json::value to_result(const std::string& text) {
  if (auto parsed = json::parse(text))
    return std::move(*parsed.v);
  json::value r;
  r["result"] = text;
  return r;
}

// The completion shared between an asynchronous handler and the waiting
// pool thread; outlives the call when the handler completes late.
struct async_slot {
  std::mutex mtx;
  std::condition_variable cv;
  std::optional<std::string> result;
};

class host_tool_adapter final : public tool {
public:
  host_tool_adapter(host_tool def, json::value schema)
    : def_(std::move(def)), schema_(std::move(schema)) {}

  const char* name() const override { return def_.name.c_str(); }
  const char* toolset() const override { return def_.toolset.c_str(); }
  std::string description() const override { return def_.description; }
  json::value schema() const override { return schema_; }
  bool parallel_safe() const override { return def_.parallel_safe; }
  bool non_blocking() const override {
    return def_.non_blocking && static_cast<bool>(def_.handler);
  }

  std::chrono::milliseconds deadline(const json::value&,
                                     const options&) const override {
    return def_.timeout;
  }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    host_tool_call call;
    call.session_id = ctx.session_id;
    call.call_id = ctx.call_id;
    call.cwd = ctx.cwd;
    call.from_script = ctx.from_script;
    call.deadline = ctx.deadline;
    call.cancel_flag = ctx.cancelled;
    auto args_text = args.dump();
    try {
      if (def_.handler)
        return to_result(def_.handler(args_text, call));
      return run_async(args_text, call, ctx);
    } catch (const std::exception& e) {
      return error_result("host tool '" + def_.name + "' failed: " + e.what());
    } catch (...) {
      return error_result("host tool '" + def_.name + "' failed");
    }
  }

private:
  // Waits on this pool thread for the completion, the interrupt or the
  // deadline, whichever comes first (polling the cancel flag, as the
  // built-in tools do, within about 50 ms).
  json::value run_async(const std::string& args_text,
                        const host_tool_call& call,
                        const tool_context& ctx) const {
    auto slot = std::make_shared<async_slot>();
    def_.async_handler(args_text, call, [slot](host_tool_result r) {
      std::lock_guard<std::mutex> guard{slot->mtx};
      if (slot->result)
        return; // a second completion is ignored
      slot->result = std::move(r);
      slot->cv.notify_all();
    });
    std::unique_lock<std::mutex> lock{slot->mtx};
    while (!slot->result) {
      if (ctx.is_cancelled())
        return error_result("host tool '" + def_.name + "' was cancelled");
      if (std::chrono::steady_clock::now() >= ctx.deadline)
        return error_result("host tool '" + def_.name + "' timed out");
      slot->cv.wait_for(lock, std::chrono::milliseconds(50));
    }
    return to_result(*slot->result);
  }

  host_tool def_;
  json::value schema_;
};

bool valid_tool_name(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9') || c == '_' || c == '-'))
      return false;
  return true;
}

} // namespace

status make_host_tools(const std::vector<host_tool>& host,
                       std::vector<std::unique_ptr<tool>>* tools,
                       std::vector<script_tool_spec>* scripts) {
  auto fail = [](std::string msg) {
    return status::failure(status_code::config_invalid, std::move(msg));
  };
  tool_registry core;
  register_core_tools(core);
  std::set<std::string> seen;
  for (auto& def : host) {
    if (!valid_tool_name(def.name))
      return fail("host tool name '" + def.name + "' is invalid (use 1 to 64 "
                  "letters, digits, '_' or '-')");
    if (core.find(def.name) != nullptr || def.name == "execute_code")
      return fail("host tool '" + def.name + "' has the name of a built-in "
                  "tool");
    if (!seen.insert(def.name).second)
      return fail("host tool '" + def.name + "' is registered twice");
    if (static_cast<bool>(def.handler) == static_cast<bool>(def.async_handler))
      return fail("host tool '" + def.name + "' needs exactly one of handler "
                  "and async_handler");
    if (def.timeout.count() <= 0)
      return fail("host tool '" + def.name + "' needs a positive timeout");
    if (def.toolset.empty())
      return fail("host tool '" + def.name + "' needs a toolset name");
    auto schema = json::parse(def.schema_json);
    if (!schema || !schema.v->is_object()
        || schema.v->get_string("type", "") != "object")
      return fail("host tool '" + def.name + "': schema_json must be a JSON "
                  "Schema object with \"type\": \"object\"");
    if (def.allow_in_scripts) {
      auto spec = make_script_tool_spec(def.name, def.description, *schema.v);
      if (!spec)
        return fail("host tool '" + def.name + "' cannot be offered to "
                    "scripts: " + spec.error);
      scripts->push_back(std::move(*spec));
    }
    tools->push_back(
      std::make_unique<host_tool_adapter>(def, std::move(*schema.v)));
  }
  return {};
}

} // namespace mibyan
