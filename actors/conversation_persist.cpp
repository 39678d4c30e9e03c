// Conversation actor, part: the store glue (how the actor is split:
// actors/conversation_internal.hpp). Every write goes through the single
// session writer and is acknowledged before the turn goes on.
#include "actors/conversation_internal.hpp"

#include <utility>

#include "base/log.hpp"

namespace mibyan::conversation_detail {

// Appends `msgs` through the writer in order and calls `done(errors)` once
// every append is acknowledged (errors: one text per failed append).
void persist(conv_pointer self, std::vector<chat_message> msgs,
             std::function<void(std::vector<std::string>)> done,
             std::string last_key) {
  auto& st = self->state;
  if (msgs.empty()) {
    done({});
    return;
  }
  struct progress {
    size_t left;
    std::vector<std::string> errors;
    std::function<void(std::vector<std::string>)> done;
  };
  auto pr = std::make_shared<progress>(
    progress{msgs.size(), {}, std::move(done)});
  for (size_t i = 0; i < msgs.size(); ++i) {
    message_append ma{st.deps.session_id, std::move(msgs[i]),
                      i + 1 == msgs.size() ? last_key : std::string{}};
    self->request(st.deps.writer, caf::infinite, append_atom_v, std::move(ma))
      .then(
        [pr](uint64_t) {
          if (--pr->left == 0)
            pr->done(std::move(pr->errors));
        },
        [self, pr](caf::error& err) {
          pr->errors.push_back(error_text(self->system(), err));
          if (--pr->left == 0)
            pr->done(std::move(pr->errors));
        });
  }
}

void when_stored(conv_pointer self, std::function<void()> k) {
  auto& t = *self->state.cur;
  if (t.unacked > 0) {
    t.after_stored.push_back(std::move(k));
    return;
  }
  if (t.store_failed) {
    finish(self);
    return;
  }
  k();
}

bool persist_failed(turn_state& t, const std::string& what,
                    const std::vector<std::string>& errors) {
  if (errors.empty())
    return false;
  auto text = "cannot store the " + what + ": " + errors.front();
  if (errors.size() > 1)
    text += " (and " + std::to_string(errors.size() - 1) + " more)";
  if (!t.res.failed) {
    t.res.failed = true;
    t.res.partial = false;
    t.res.exit = turn_exit::error;
    t.res.error = std::move(text);
  } else {
    t.res.error += "; " + text;
  }
  return true;
}

void record_usage(conv_pointer self, const chat_response& r) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto& u = t.res.usage;
  add_token_usage(u, r.usage);
  t.res.last_prompt_tokens = r.usage.input_tokens + r.usage.cache_read_tokens
                             + r.usage.cache_write_tokens;
  if (!r.model.empty())
    t.res.provider.model = r.model;
  usage_update up{st.deps.session_id, r.usage, 1};
  self->request(st.deps.writer, caf::infinite, usage_atom_v, std::move(up))
    .then([](bool) {},
          [](caf::error& err) {
            MIBYAN_LOG(warning, "conversation",
                       "cannot record usage: " << caf::to_string(err));
          });
}

} // namespace mibyan::conversation_detail
