// File: messages/interrupt_request.hpp
#pragma once

#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// Asks that the running work of a session stop at once (a new user message,
/// Ctrl-C, an API call). Running kernels are killed, running tools get their
/// cancel flag set. With `call_id`, only that call of the session stops
/// (runtime::cancel_call): its invocation, or its execute_code cell (running:
/// the kernel is killed; queued: it is dropped).
struct interrupt_request {
  std::string session_id;
  /// Shown to the model, e.g. "user sent a new message".
  std::string reason;
  /// "" = every call of the session.
  std::string call_id;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, interrupt_request& x) {
  return f(caf::meta::type_name("mibyan::interrupt_request"), x.session_id,
           x.reason, x.call_id);
}

} // namespace mibyan
