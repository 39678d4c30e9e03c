// The runtime's pending approvals and questions (docs/embedding.md,
// "Pending approvals and questions"): the opt-in that makes the registry of
// runtime/pending_approvals.hpp the approval and / or clarify channel, and
// the functions that list, answer and watch what waits there.
#include "runtime/runtime_impl.hpp"

namespace mibyan {

void runtime::use_pending_channels(pending_channels which) {
  // The channels hold the registry weakly: services outlive the runtime's
  // impl in actors still stopping, and a stopped registry answers deny.
  std::weak_ptr<pending_approvals> weak = impl_->pending;
  if (which.approvals)
    impl_->svc->approvals->set_callback([weak](const approval_prompt& p) {
      auto reg = weak.lock();
      return reg ? reg->ask(p) : approval_choice::deny;
    });
  if (which.clarify)
    impl_->svc->agent_tools->set_clarify(
      [weak](const clarify_prompt& p) {
        auto reg = weak.lock();
        return reg ? reg->ask(p) : std::string{};
      },
      /*serialised=*/false);
}

std::vector<pending_request>
runtime::pending_requests(pending_kind kind) const {
  return impl_->pending->list(kind);
}

pending_answer runtime::answer_approval(const std::string& id,
                                        approval_choice choice) {
  return impl_->pending->answer(id, choice);
}

pending_answer runtime::answer_clarification(const std::string& id,
                                             const std::string& text) {
  return impl_->pending->answer(id, text);
}

uint64_t runtime::watch_pending(std::function<void(const pending_event&)> fn) {
  return impl_->pending->watch(std::move(fn));
}

void runtime::unwatch_pending(uint64_t token) {
  impl_->pending->unwatch(token);
}

pending_approvals& pending_of(runtime& rt) {
  return *runtime_access::of(rt).pending;
}

} // namespace mibyan
