// Conversation actor, part: idempotent turns (how the actor is split:
// actors/conversation_internal.hpp; docs/cluster.md, "Idempotent turns").
//
// A turn may carry a key (turn_request::turn_key). Its user message is
// stored under the idempotency key "turn:<key>", so the store itself never
// holds it twice. The conversation knows, per key the session holds, how
// that turn ended, from one rule applied alike to a history loaded from
// the store and to the turns it runs: a keyed turn is *answered* once an
// assistant message without tool calls follows its user message, and
// *superseded* when another user message follows first. A turn whose key
// is held:
//   answered    gets the stored answer again ("replayed": true), runs
//               nothing and stores nothing;
//   superseded  fails, replayed, saying later turns followed it;
//   otherwise   (the last turn of the history, unanswered: its gateway
//               died, or the provider failed before answering) resumes:
//               the model is called on the stored history, the user
//               message is not stored again.
// A retry that arrives while the first attempt still runs queues behind it
// (the turns of a session run in order) and then finds it answered.
#include "actors/conversation_internal.hpp"

#include <utility>

#include "base/log.hpp"

namespace mibyan::conversation_detail {

namespace {

constexpr std::string_view key_prefix = "turn:";

void supersede(conversation_state& st) {
  if (st.last_key.empty())
    return;
  auto it = st.turn_keys.find(st.last_key);
  if (it != st.turn_keys.end() && !it->second.answered)
    it->second.superseded = true;
  st.last_key.clear();
}

bool answers(const chat_message& m) {
  return m.role == "assistant" && m.tool_calls.empty();
}

} // namespace

std::string turn_store_key(const std::string& turn_key) {
  return std::string{key_prefix} + turn_key;
}

void index_turn_keys(conversation_state& st,
                     const std::vector<stored_message>& msgs) {
  st.turn_keys.clear();
  st.last_key.clear();
  for (auto& m : msgs) {
    if (m.message.role == "user") {
      supersede(st);
      if (m.key.size() > key_prefix.size()
          && m.key.compare(0, key_prefix.size(), key_prefix) == 0) {
        st.last_key = m.key.substr(key_prefix.size());
        st.turn_keys[st.last_key] = keyed_turn{};
      }
    } else if (answers(m.message) && !st.last_key.empty()) {
      auto& k = st.turn_keys[st.last_key];
      k.answered = true;
      k.answer = m.message.content;
    }
  }
}

void note_user_message(conversation_state& st, const std::string& turn_key) {
  supersede(st);
  if (turn_key.empty())
    return;
  st.last_key = turn_key;
  st.turn_keys[turn_key] = keyed_turn{};
}

void note_turn_delivered(conversation_state& st, const turn_state& t) {
  const auto& key = t.p.req.turn_key;
  if (key.empty() || key != st.last_key || t.res.messages.empty()
      || !answers(t.res.messages.back()))
    return;
  auto& k = st.turn_keys[key];
  k.answered = true;
  k.answer = t.res.messages.back().content;
}

bool take_keyed_turn(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  const auto& key = t.p.req.turn_key;
  if (key.empty())
    return false;
  auto it = st.turn_keys.find(key);
  if (it == st.turn_keys.end())
    return false;
  if (!it->second.answered && !it->second.superseded) {
    // The earlier attempt is the session's last turn and has no answer:
    // go on from what it stored.
    MIBYAN_LOG(info, "conversation",
               "turn key " << key << " of " << st.deps.session_id
                           << " is stored without an answer: resuming it");
    t.user_persisted = true;
    iterate(self);
    return true;
  }
  MIBYAN_LOG(info, "conversation",
             "turn key " << key << " of " << st.deps.session_id
                         << " was run before: answering it again");
  auto& res = t.res;
  res.replayed = true;
  res.started = true;
  res.session_id = st.deps.session_id;
  res.max_iterations = t.budget.max();
  if (it->second.answered) {
    res.final_response = it->second.answer;
  } else {
    res.failed = true;
    res.exit = turn_exit::error;
    res.error = "the turn with key " + key
                + " ran before and ended without an answer; later turns of "
                  "the session followed it, so it is not run again";
  }
  res.messages = st.history;
  res.completed = compute_completed(res);
  t.p.rp.deliver(std::move(res));
  st.cur.reset();
  start_next(self);
  return true;
}

} // namespace mibyan::conversation_detail
