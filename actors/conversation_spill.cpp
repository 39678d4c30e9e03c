// Conversation actor, part: where oversized tool results are saved (how the
// actor is split: actors/conversation_internal.hpp). The files live under
// $MIBYAN_HOME/cache/results/<session>/ (storage/result_spill.hpp) and are
// removed when the session is deleted.
#include "actors/conversation_internal.hpp"

#include "base/log.hpp"
#include "storage/result_spill.hpp"

namespace mibyan::conversation_detail {

result_writer result_saver(conv_pointer self) {
  auto home = self->state.deps.svc->cfg.home;
  auto session = self->state.deps.session_id;
  return [home, session](const std::string& call_id,
                         std::string_view text) -> std::string {
    auto saved = spill_result(home, session, call_id, text);
    if (saved)
      return *saved;
    MIBYAN_LOG(warning, "conversation",
               "cannot save an oversized tool result (it is truncated "
               "instead): "
                 << saved.error);
    return {};
  };
}

} // namespace mibyan::conversation_detail
