// Conversation actor, part: context compression (how the actor is split:
// actors/conversation_internal.hpp; behaviour: docs/agent_loop.md,
// "Context compression"; the pure cut and threshold:
// agent/context_compression.hpp).
//
// Before a model call whose estimate reaches the threshold: one tool-free
// model call summarises the middle of the history; the current session is
// ended with reason "compression" and the conversation continues in a new
// session (parent_session_id = the old one) that holds the protected head
// verbatim, the summary and the protected tail verbatim. The system prompt
// is not part of the history and never changes.
#include "actors/conversation_internal.hpp"

#include <algorithm>
#include <utility>

#include "agent/context_compression.hpp"
#include "agent/tool_output_pruning.hpp"
#include "base/log.hpp"
#include "base/blocking_pool.hpp"
#include "storage/prompt_store.hpp"
#include "storage/session_store.hpp"

namespace mibyan::conversation_detail {

namespace {

constexpr int max_compressions_per_turn = 3;

int64_t threshold_of(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto& cfg = st.deps.svc->cfg;
  auto window = context_window(t.p.req.endpoint.model, cfg.model.context_length);
  return compression_threshold(window, t.recovery.max_tokens(),
                               cfg.compression.threshold);
}

int64_t estimate_of(conv_pointer self, const std::vector<chat_message>& msgs) {
  auto& st = self->state;
  return estimate_tokens(msgs, st.system_prompt.size()
                                 + st.cur->tools_json.size());
}

// The summary is in: store the compacted history in a new session and go
// on with the turn.
void rotate(conv_pointer self, compression_cut cut, std::string summary) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto compacted = compacted_history(t.msgs, cut, summary);
  auto old_id = st.deps.session_id;
  session_meta meta;
  meta.source = "cli";
  meta.model = t.p.req.endpoint.model;
  meta.provider = t.p.req.endpoint.provider;
  meta.cwd = st.cwd;
  meta.parent_session_id = old_id;
  if (st.deps.store)
    if (auto info = st.deps.store->get_session(old_id)) {
      meta.source = info->source;
      meta.title = info->title;
    }
  auto id = t.id;
  self->request(st.deps.writer, caf::infinite, create_atom_v, meta)
    .then(
      [self, id, old_id, compacted](std::string& new_id) mutable {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        auto& st2 = self->state;
        self->request(st2.deps.writer, caf::infinite, end_atom_v, old_id,
                      std::string{"compression"})
          .then([](bool) {}, [](caf::error&) {});
        MIBYAN_LOG(info, "conversation",
                   "compressed " << old_id << " (" << tp->msgs.size()
                                 << " messages) into " << new_id << " ("
                                 << compacted.size() << " messages)");
        st2.deps.session_id = new_id;
        // The continuation keeps the stored system prompt
        // (storage/prompt_store.hpp); a resume that finds no reference
        // follows the parent chain, so a failure here loses nothing.
        if (st2.deps.prompts && !st2.deps.prompt_hash.empty()
            && st2.deps.svc->pool) {
          auto prompts = st2.deps.prompts;
          auto hash = st2.deps.prompt_hash;
          // The store is held too: the prompt store lives on its
          // environment.
          st2.deps.svc->pool->submit([prompts, store = st2.deps.store, hash,
                                      new_id] {
            if (auto st = prompts->reference(new_id, hash); !st)
              MIBYAN_LOG(warning, "conversation",
                         "cannot record the system prompt of " << new_id
                           << ": " << st.error);
          });
        }
        persist(self, compacted,
                [self, id, compacted](std::vector<std::string> errors) {
                  auto tp2 = current(self, id);
                  if (tp2 == nullptr)
                    return;
                  if (persist_failed(*tp2, "compressed history", errors)) {
                    finish(self);
                    return;
                  }
                  auto& st3 = self->state;
                  tp2->msgs = compacted;
                  tp2->reported_prompt_tokens = 0; // counted the old history
                  if (estimate_of(self, tp2->msgs) >= threshold_of(self)) {
                    tp2->compress_skip = true;
                    if (++st3.ineffective_compressions >= 2)
                      MIBYAN_LOG(warning, "conversation",
                                 "compression did not bring "
                                   << st3.deps.session_id
                                   << " under the threshold twice; it is "
                                      "off for this conversation");
                  } else {
                    st3.ineffective_compressions = 0;
                  }
                  iterate(self);
                });
      },
      [self, id](caf::error& err) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        MIBYAN_LOG(warning, "conversation",
                   "cannot create the continuation session; not "
                   "compressing: "
                     << error_text(self->system(), err));
        tp->compress_skip = true;
        iterate(self);
      });
}

} // namespace

bool maybe_compress(conv_pointer self) {
  auto& st = self->state;
  auto& t = *st.cur;
  auto& cfg = st.deps.svc->cfg.compression;
  bool forced = t.force_compress;
  t.force_compress = false;
  if (!cfg.enabled
      || (!forced
          && (t.compress_skip || st.ineffective_compressions >= 2
              || t.compressions >= max_compressions_per_turn)))
    return false;
  auto threshold = threshold_of(self);
  // The provider's count of the previous prompt is a lower bound of this
  // one (the character estimate undercounts code and non-Latin text).
  auto estimate = std::max(estimate_of(self, t.msgs),
                           t.reported_prompt_tokens);
  if (estimate < threshold && !forced)
    return false;
  // The kept tail: a share of the threshold, or of the estimate when the
  // provider refused a context under the threshold (the history
  // only: the schemas and system prompt are not part of the cut).
  auto tail_tokens = static_cast<int64_t>(
    static_cast<double>(std::min(threshold, estimate_tokens(t.msgs)))
    * cfg.target_ratio);
  auto cut = choose_cut(t.msgs, static_cast<size_t>(cfg.protect_first_n),
                        static_cast<size_t>(cfg.protect_last_n), tail_tokens);
  if (!cut.worthwhile()) {
    MIBYAN_LOG(info, "conversation",
               "context estimate " << estimate << " >= " << threshold
                                   << " tokens, but nothing between the "
                                      "protected head and tail to compress");
    t.compress_skip = true;
    return false;
  }
  if (t.unacked > 0) {
    // The tool results the middle may hold are still committing: compress
    // once they are stored (the check then runs again).
    t.force_compress = forced;
    auto id = t.id;
    when_stored(self, [self, id] {
      if (current(self, id) != nullptr)
        iterate(self);
    });
    return true;
  }
  ++t.compressions;
  MIBYAN_LOG(info, "conversation",
             "context estimate " << estimate << " >= " << threshold
                                 << " tokens: summarising messages "
                                 << cut.head_end << ".." << cut.tail_begin
                                 << " of " << st.deps.session_id);
  std::vector<chat_message> middle(
    t.msgs.begin() + static_cast<std::ptrdiff_t>(cut.head_end),
    t.msgs.begin() + static_cast<std::ptrdiff_t>(cut.tail_begin));
  chat_request req;
  req.request_id = st.deps.session_id + "-" + std::to_string(
                     st.next_request++);
  req.model = t.p.req.endpoint.model;
  chat_message sys;
  sys.role = "system";
  sys.content = summarizer_system_prompt;
  chat_message user;
  user.role = "user";
  // Old tool outputs become one-line stubs (docs/agent_loop.md, "Old
  // tool outputs before compression"); `middle` is the request's copy.
  auto pruned = prune_old_tool_outputs(
    middle,
    static_cast<size_t>(cfg.keep_tool_results),
    static_cast<size_t>(cfg.prune_min_chars));
  if (pruned.pruned > 0)
    MIBYAN_LOG(info, "conversation",
               "pruned " << pruned.pruned << " old tool outputs ("
                         << pruned.bytes_before << " -> "
                         << pruned.bytes_after
                         << " bytes) before the summary call");
  user.content = summarizer_request(middle);
  req.messages = {std::move(sys), std::move(user)};
  req.stream = false;
  t.inflight = req.request_id;
  auto id = t.id;
  self->request(t.provider, caf::infinite, complete_atom_v, std::move(req))
    .then(
      [self, id, cut](chat_response& r) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        tp->inflight.clear();
        record_usage(self, r);
        if (tp->interrupted) {
          end_interrupted(self);
          return;
        }
        auto summary = strings::trim(r.content);
        if (!r.error.empty() || summary.empty()) {
          MIBYAN_LOG(warning, "conversation",
                     "the summary call gave no summary; not compressing"
                       << (r.error.empty() ? "" : ": ") << r.error);
          tp->compress_skip = true;
          iterate(self);
          return;
        }
        rotate(self, cut, std::move(summary));
      },
      [self, id](caf::error& err) {
        auto tp = current(self, id);
        if (tp == nullptr)
          return;
        tp->inflight.clear();
        if (tp->interrupted || is_ec(err, ec::interrupted)) {
          tp->interrupted = true;
          end_interrupted(self);
          return;
        }
        MIBYAN_LOG(warning, "conversation",
                   "the summary call failed; not compressing: "
                     << error_text(self->system(), err));
        tp->compress_skip = true;
        iterate(self);
      });
  return true;
}

bool compress_after_overflow(conv_pointer self, const std::string& error) {
  auto& st = self->state;
  auto& t = *st.cur;
  if (error.find("context_overflow") == std::string::npos
      || !st.deps.svc->cfg.compression.enabled
      || t.overflow_retries >= max_compressions_per_turn)
    return false;
  ++t.overflow_retries;
  MIBYAN_LOG(info, "conversation",
             "the context overflowed; compressing and retrying ("
               << t.overflow_retries << "/" << max_compressions_per_turn
               << ")");
  t.force_compress = true;
  if (!maybe_compress(self))
    return false;
  t.budget.refund(); // the refused call does not count
  return true;
}

} // namespace mibyan::conversation_detail
