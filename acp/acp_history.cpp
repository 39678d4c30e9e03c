// session/load's replay (acp/acp_agent.hpp): the stored messages of a
// session as the session/update notifications a client would have seen
// (docs/acp.md, "Loading a session").
#include "acp/acp_agent.hpp"

#include "acp/acp_session.hpp"
#include "acp/acp_updates.hpp"
#include "base/log.hpp"
#include "mibyan/runtime.hpp"
#include "runtime/session_access.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

void acp_agent::replay_history(const acp_session& s) {
  auto store = runtime_session_store(rt_);
  if (!store)
    return;
  auto loaded = store->load_messages(s.id);
  if (!loaded) {
    MIBYAN_LOG(warning, "acp", "session " << s.id
                                 << ": cannot load the history: "
                                 << loaded.error);
    return;
  }
  // Arguments of the calls seen so far, for their results.
  std::map<std::string, std::pair<std::string, json::value>> calls;
  size_t sent = 0;
  for (auto& stored : *loaded) {
    auto& m = stored.message;
    if (m.role == "user") {
      if (!m.content.empty())
        update(s.id, acp_text_chunk("user_message_chunk", m.content));
    } else if (m.role == "assistant") {
      if (!m.reasoning.empty())
        update(s.id, acp_text_chunk("agent_thought_chunk", m.reasoning));
      if (!m.content.empty())
        update(s.id, acp_text_chunk("agent_message_chunk", m.content));
      for (auto& c : m.tool_calls) {
        json::value args;
        if (auto pa = json::parse(c.arguments))
          args = std::move(*pa.v);
        auto u = acp_tool_call(c.id, c.name, args);
        u["status"] = "pending";
        update(s.id, std::move(u));
        calls[c.id] = {c.name, std::move(args)};
      }
    } else if (m.role == "tool") {
      auto it = calls.find(m.tool_call_id);
      std::string name = it != calls.end() ? it->second.first : m.tool_name;
      json::value args = it != calls.end() ? it->second.second : json::value{};
      update(s.id, acp_tool_call_done(m.tool_call_id, name, args, m.content,
                                      {}));
      if (name == "todo")
        if (auto r = json::parse(m.content))
          if (auto plan = acp_plan_from_todo(*r.v); !plan.is_null())
            update(s.id, std::move(plan));
    } else {
      continue; // system messages are not part of the conversation shown
    }
    ++sent;
  }
  MIBYAN_LOG(info, "acp", "session " << s.id << ": replayed " << sent
                                     << " messages");
}

} // namespace mibyan
