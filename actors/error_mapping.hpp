// File: actors/error_mapping.hpp
//
// The one place where a failed status of the lower layers (base/status.hpp)
// becomes an actor-level error (messages/error_code.hpp) and back. The map
// is one-to-one: every failed status_code has exactly one ec and every ec
// exactly one status_code, so a status that crosses a mailbox as a
// caf::error arrives with the code it left with. Actors call
// `to_actor_error` and never inspect the message's text to choose a code.
#pragma once

#include <optional>
#include <string>

#include "caf/error.hpp"
#include "caf/make_message.hpp"

#include "base/status.hpp"
#include "messages/error_code.hpp"
#include "messages/type_ids.hpp"

namespace mibyan {

/// The actor error code for a failed status code. `ok` is not an error:
/// passing it is a bug and gives ec::internal.
constexpr ec to_ec(status_code code) {
  switch (code) {
    case status_code::invalid_argument: return ec::invalid_request;
    case status_code::not_found: return ec::not_found;
    case status_code::already_exists: return ec::already_exists;
    case status_code::permission_denied: return ec::permission_denied;
    case status_code::unavailable: return ec::unavailable;
    case status_code::timeout: return ec::timeout;
    case status_code::cancelled: return ec::interrupted;
    case status_code::resource_exhausted: return ec::resource_exhausted;
    case status_code::data_corrupt: return ec::data_corrupt;
    case status_code::config_invalid: return ec::config_invalid;
    case status_code::internal: return ec::internal;
    case status_code::ok: return ec::internal;
  }
  return ec::internal;
}

/// The status code an actor error code stands for (never ok).
constexpr status_code to_status_code(ec code) {
  switch (code) {
    case ec::invalid_request: return status_code::invalid_argument;
    case ec::not_found: return status_code::not_found;
    case ec::already_exists: return status_code::already_exists;
    case ec::permission_denied: return status_code::permission_denied;
    case ec::unavailable: return status_code::unavailable;
    case ec::timeout: return status_code::timeout;
    case ec::interrupted: return status_code::cancelled;
    case ec::resource_exhausted: return status_code::resource_exhausted;
    case ec::data_corrupt: return status_code::data_corrupt;
    case ec::config_invalid: return status_code::config_invalid;
    case ec::internal: return status_code::internal;
  }
  return status_code::internal;
}

/// A caf::error carrying the status's message as context.
inline caf::error to_actor_error(const status& st) {
  return caf::make_error(to_ec(st.code), st.error);
}

/// The status a caf::error stands for: ok for no error; for an error of
/// category "mibyan" its code's twin with the context's first string as
/// the message; for any other error (CAF's own) `internal` with CAF's
/// rendering of it.
inline status to_status(const caf::error& err) {
  if (!err)
    return {};
  std::string msg;
  if (err.category() == caf::atom("mibyan")) {
    auto code = static_cast<ec>(err.code());
    auto& ctx = err.context();
    if (!ctx.empty() && ctx.match_element<std::string>(0))
      msg = ctx.get_as<std::string>(0);
    return status::failure(to_status_code(code), std::move(msg));
  }
  return status::failure(status_code::internal, caf::to_string(err));
}

} // namespace mibyan
