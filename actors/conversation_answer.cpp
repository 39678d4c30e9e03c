// Conversation actor, part: final-answer recovery (how the actor is split:
// actors/conversation_internal.hpp; the rules: docs/agent_loop.md, "Final
// answer recovery"; the decisions: agent/answer_recovery.hpp).
//
// Synthetic messages (nudges, prefills, cut parts) live in
// `turn_state::scaffold`: appended to the request copy only, never
// stored, dropped once a usable answer arrives.
#include "actors/conversation_internal.hpp"

#include <utility>

#include "base/log.hpp"

namespace mibyan::conversation_detail {

namespace {

chat_message synthetic(const char* role, std::string content) {
  chat_message m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

// The text of the previous assistant message of this turn when it had
// text and only housekeeping calls (its text is then the answer).
std::string previous_housekeeping_text(const turn_state& t) {
  for (auto i = t.msgs.rbegin(); i != t.msgs.rend(); ++i) {
    if (i->role == "user")
      break;
    if (i->role != "assistant")
      continue;
    if (only_housekeeping_calls(i->tool_calls)) {
      auto text = strip_reasoning_tags(i->content);
      if (!text.empty())
        return text;
    }
    break;
  }
  return {};
}

} // namespace

bool recover_answer(conv_pointer self, chat_response& r) {
  auto& t = *self->state.cur;
  auto visible = strip_reasoning_tags(r.content);
  if (r.finish_reason == "length") {
    // Cut at the output limit: continue where it stopped (the parts are
    // joined into the final answer), at most 3 times.
    if (t.recovery.continue_after_length()) {
      MIBYAN_LOG(info, "conversation",
                 "answer cut at the length limit; continuation "
                   << t.recovery.continuations());
      t.length_parts += r.content;
      t.scaffold.push_back(synthetic("assistant", r.content));
      t.scaffold.push_back(synthetic("user", length_continue_prompt));
      iterate(self);
      return true;
    }
    auto text = strip_reasoning_tags(t.length_parts + r.content);
    t.scaffold.clear();
    t.res.final_response = text;
    t.res.exit_detail = "truncated(length_continuations_exhausted)";
    if (!text.empty()) {
      chat_message am = synthetic("assistant", text);
      am.finish_reason = "length";
      am.timestamp_ms = now_ms();
      t.msgs.push_back(am);
      auto id = t.id;
      persist(self, {am}, [self, id](std::vector<std::string> errors) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        persist_failed(*tp, "truncated answer", errors);
        end_turn(self, turn_exit::truncated,
                 "Response truncated due to output length limit (after "
                   + std::to_string(answer_recovery::max_continuations)
                   + " continuations)",
                 false);
      });
      return true;
    }
    end_turn(self, turn_exit::truncated,
             "Response truncated due to output length limit (after "
               + std::to_string(answer_recovery::max_continuations)
               + " continuations)",
             false);
    return true;
  }
  if (visible.empty() && t.length_parts.empty()) {
    auto reasoning = strings::trim(r.reasoning);
    if (reasoning.empty() && !strings::trim(r.content).empty())
      reasoning = strings::trim(r.content); // reasoning inside tags only
    auto prev = previous_housekeeping_text(t);
    auto step = t.recovery.on_empty(!reasoning.empty(), !prev.empty());
    switch (step) {
      case answer_recovery::step::use_previous:
        r.content = prev;
        t.scaffold.clear();
        return false;
      case answer_recovery::step::nudge:
        t.scaffold.push_back(synthetic("assistant", ""));
        t.scaffold.push_back(synthetic("user", empty_answer_nudge));
        iterate(self);
        return true;
      case answer_recovery::step::prefill:
        t.scaffold.push_back(synthetic("assistant", reasoning));
        iterate(self);
        return true;
      case answer_recovery::step::retry:
        iterate(self);
        return true;
      case answer_recovery::step::give_up:
        break;
    }
    bool reasoning_only = t.recovery.reasoning_only() > 0;
    t.scaffold.clear();
    t.res.final_response
      = reasoning_only
          ? "The model kept answering with reasoning only and no visible "
            "text; no answer could be produced."
          : "The model returned an empty answer several times; no answer "
            "could be produced.";
    if (reasoning_only)
      t.res.exit_detail = "empty_response_exhausted(reasoning_only)";
    end_turn(self, turn_exit::empty_response_exhausted,
             reasoning_only ? "only reasoning from the model, no answer"
                            : "empty response from the model",
             false);
    return true;
  }
  // A usable answer: join the cut parts, drop the reasoning markup.
  t.scaffold.clear();
  if (!t.length_parts.empty()) {
    r.content = strip_reasoning_tags(t.length_parts + r.content);
    t.length_parts.clear();
  } else if (visible != strings::trim(r.content)) {
    r.content = std::move(visible);
  }
  return false;
}

void recover_truncated_calls(conv_pointer self) {
  auto& t = *self->state.cur;
  if (t.recovery.retry_truncated_calls()) {
    MIBYAN_LOG(info, "conversation",
               "tool call cut at the length limit; retry "
                 << t.recovery.call_retries() << " with max_tokens "
                 << t.recovery.max_tokens());
    iterate(self);
    return;
  }
  t.res.exit_detail = "truncated(tool_call)";
  end_turn(self, turn_exit::truncated,
           "Response truncated due to output length limit: the tool call "
           "was cut off "
             + std::to_string(answer_recovery::max_call_retries + 1)
             + " times and was not executed",
           false);
}

} // namespace mibyan::conversation_detail
