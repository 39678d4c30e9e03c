// File: actors/error_mapping.hpp
//
// The one place where a failed status of the lower layers (base/status.hpp)
// becomes an actor-level error (messages/error_code.hpp). Actors call
// `to_actor_error` and never inspect the message's text to choose a code.
#pragma once

#include "caf/error.hpp"
#include "caf/make_message.hpp"

#include "base/status.hpp"
#include "messages/error_code.hpp"
#include "messages/type_ids.hpp"

namespace mibyan {

/// The actor error code for a status code (`ok` is not an error: it maps
/// to storage_failure only if misused).
constexpr ec to_ec(status_code code) {
  switch (code) {
    case status_code::invalid_argument:
    case status_code::already_exists:
    case status_code::permission_denied:
      return ec::invalid_request;
    case status_code::not_found:
      return ec::not_found;
    case status_code::unavailable:
      return ec::unavailable;
    case status_code::timeout:
      return ec::timeout;
    case status_code::cancelled:
      return ec::interrupted;
    case status_code::config_invalid:
      return ec::config_invalid;
    case status_code::ok:
    case status_code::resource_exhausted:
    case status_code::data_corrupt:
    case status_code::internal:
      return ec::storage_failure;
  }
  return ec::storage_failure;
}

/// A caf::error carrying the status's message as context.
inline caf::error to_actor_error(const status& st) {
  return caf::make_error(to_ec(st.code), st.error);
}

} // namespace mibyan
