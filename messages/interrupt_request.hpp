// File: messages/interrupt_request.hpp
#pragma once

#include <string>

#include "caf/meta/type_name.hpp"

namespace mibyan {

/// Asks that the running work of a session stop at once (a new user message,
/// Ctrl-C, an API call). Running kernels are killed, running tools get their
/// cancel flag set.
struct interrupt_request {
  std::string session_id;
  /// Shown to the model, e.g. "user sent a new message".
  std::string reason;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, interrupt_request& x) {
  return f(caf::meta::type_name("mibyan::interrupt_request"), x.session_id,
           x.reason);
}

} // namespace mibyan
