// File: messages/error_code.hpp
//
// Actor-level error codes (carried in caf::error, category "mibyan"). The
// code says what the caller should do. Tool failures are NOT errors at this
// level: they are result objects the model sees.
//
// Each code is the actor-level twin of exactly one failed
// `status_code` (base/status.hpp), so no information is lost when a
// status becomes a caf::error and back (actors/error_mapping.hpp holds
// the two directions; error_mapping_test round-trips every code). The
// numbers are stable: append new codes at the end.
#pragma once

#include <cstdint>
#include <string>

namespace mibyan {

enum class ec : uint8_t {
  /// Retry later: a transient condition (overload, shutdown in progress).
  /// status_code::unavailable.
  unavailable = 1,
  /// Do not retry: the request itself is malformed.
  /// status_code::invalid_argument.
  invalid_request,
  /// The named tool, session or kernel does not exist.
  /// status_code::not_found.
  not_found,
  /// The work was interrupted on request. status_code::cancelled.
  interrupted,
  /// A deadline passed. status_code::timeout.
  timeout,
  /// A failure of ours or of a library (storage included) that fits no
  /// other code; the state before the request is intact.
  /// status_code::internal.
  internal,
  /// The configuration is invalid; fix it before retrying.
  /// status_code::config_invalid.
  config_invalid,
  /// The object to create exists already. status_code::already_exists.
  already_exists,
  /// Refused by policy or by the operating system's permissions.
  /// status_code::permission_denied.
  permission_denied,
  /// A limit was reached (a full disk or map, a size cap).
  /// status_code::resource_exhausted.
  resource_exhausted,
  /// Stored data is damaged. status_code::data_corrupt.
  data_corrupt,
};

/// The code's name ("unavailable", "invalid_request", ...).
std::string to_string(ec x);

} // namespace mibyan
