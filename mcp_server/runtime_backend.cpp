// The MCP server core bound to a runtime (mcp_server/runtime_backend.hpp).
#include "mcp_server/runtime_backend.hpp"

#include <ctime>

#include "base/utc_time.hpp"
#include "storage/session_json.hpp"
#include "storage/session_store.hpp"
#include "tools/registry.hpp"
#include "tools/toolsets.hpp"

namespace mibyan {

namespace {

std::string iso_utc(int64_t ms) {
  if (ms <= 0)
    return {};
  return iso_utc_from_ms(ms);
}

} // namespace

mcp_backend runtime_mcp_backend(runtime& rt, std::vector<std::string> toolsets,
                                std::string cwd) {
  mcp_backend b;
  runtime* r = &rt;
  b.list_tools = [r, toolsets]() -> result<std::vector<mcp_offered_tool>> {
    const auto& reg = tools_of(*r);
    auto names = offered_tool_names(&toolsets_of(*r), reg, config_of(*r),
                                    toolsets);
    if (!names)
      return result<std::vector<mcp_offered_tool>>::failure(names.code,
                                                            names.error);
    std::vector<mcp_offered_tool> out;
    for (auto& n : *names) {
      const tool* t = reg.find(n);
      if (t == nullptr)
        continue;
      mcp_offered_tool o;
      o.name = t->name();
      o.description = t->description();
      o.input_schema = t->schema();
      o.read_only = t->parallel_safe();
      out.push_back(std::move(o));
    }
    return out;
  };
  b.call_tool = [r, cwd](mcp_tool_call c,
                         std::function<void(mcp_tool_answer)> done) {
    tool_call_request req;
    req.session_id = std::move(c.session_id);
    req.call_id = std::move(c.call_id);
    req.tool = std::move(c.tool);
    req.args_json = std::move(c.args_json);
    req.cwd = cwd;
    r->call_tool_async(req, [done = std::move(done)](tool_outcome o) {
      done(mcp_tool_answer{std::move(o.result_json), o.timed_out});
    });
  };
  b.interrupt = [r](const std::string& sid, const std::string& why) {
    r->interrupt(sid, why);
  };
  b.cancel_call = [r](const std::string& sid, const std::string& call_id,
                      const std::string& why) {
    r->cancel_call(sid, call_id, why);
  };
  b.watch_tools = [r](std::function<void()> fn) {
    return tools_of(*r).subscribe(std::move(fn));
  };
  b.unwatch_tools = [r](uint64_t id) { tools_of(*r).unsubscribe(id); };
  b.close_session = [r](const std::string& sid) { r->close_session(sid); };
  b.set_channels = [r](const std::string& sid, approval_callback approve,
                       clarify_callback clarify) {
    session_channels ch;
    ch.approval = std::move(approve);
    ch.context = approval_context::unattended;
    ch.clarify = std::move(clarify);
    r->set_session_channels(sid, std::move(ch));
  };
  b.clear_channels = [r](const std::string& sid) {
    r->clear_session_channels(sid);
  };
  b.run_blocking = [r](std::function<void()> job) {
    return run_blocking(*r, std::move(job));
  };
  auto store = session_store_of(rt);
  if (store) {
    b.list_transcripts = [store](size_t offset, size_t limit)
      -> result<std::vector<mcp_transcript_info>> {
      auto list = store->list_sessions(limit, offset);
      if (!list)
        return result<std::vector<mcp_transcript_info>>::failure(list.code,
                                                                 list.error);
      std::vector<mcp_transcript_info> out;
      for (auto& s : *list)
        out.push_back(mcp_transcript_info{
          s.id, s.title, iso_utc(s.ended_at_ms ? s.ended_at_ms
                                               : s.started_at_ms)});
      return out;
    };
    b.read_transcript = [store](const std::string& sid) -> result<std::string> {
      auto info = store->get_session(sid);
      if (!info)
        return result<std::string>::failure(status_code::not_found,
                                            "no session '" + sid + "'");
      auto msgs = store->load_messages(sid);
      if (!msgs)
        return result<std::string>::failure(msgs.code, msgs.error);
      auto out = session_json(*info);
      json::value list = json::value::make_array();
      for (auto& m : *msgs)
        list.push_back(message_json(m));
      out["messages"] = std::move(list);
      return out.dump();
    };
  }
  return b;
}

} // namespace mibyan
