// File: messages/error_code.hpp
//
// Actor-level error codes (carried in caf::error, category "mibyan"). The
// code says what the caller should do. Tool failures are NOT errors at this
// level: they are result objects the model sees.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

enum class ec : uint8_t {
  /// Retry later: a transient condition (overload, shutdown in progress).
  unavailable = 1,
  /// Do not retry: the request itself is malformed.
  invalid_request,
  /// The named tool, session or kernel does not exist.
  not_found,
  /// The work was interrupted on request.
  interrupted,
  /// A deadline passed.
  timeout,
  /// Storage failed; the state before the request is intact.
  storage_failure,
  /// The configuration is invalid; fix it before retrying.
  config_invalid,
};

std::string to_string(ec x);

} // namespace mibyan
