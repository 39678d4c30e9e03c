// File: include/mibyan/status.hpp  (public API, vocabulary)
//
// The one error type, for the library's fallible calls and the embedding
// API's (runtime::create): a `status` (a
// code and, on failure, a message for people) and a `result<T>` (a value or
// a status). The code says what the caller should do; the message says what
// happened. Callers branch on the code, never on the message's text. The
// actors map codes to their own error codes in one place
// (actors/error_mapping.hpp). See docs/architecture.md, "Errors".
//
// Neither type throws. Both are cheap to move; copying copies the message.
// No CAF and no include of the project (base/status.hpp forwards here).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace mibyan {

enum class status_code : uint8_t {
  ok = 0,
  /// The request or input is malformed; retrying it unchanged fails again.
  invalid_argument,
  /// The named object (session, file, tool, kernel) does not exist.
  not_found,
  /// The object to create exists already.
  already_exists,
  /// Refused by policy or by the operating system's permissions.
  permission_denied,
  /// A transient condition (overload, a peer not reachable yet, shutdown in
  /// progress): the same call may succeed later.
  unavailable,
  /// A deadline passed.
  timeout,
  /// Stopped on request (interrupt, cancel).
  cancelled,
  /// A limit was reached: a full disk or map, a size cap, too many objects.
  resource_exhausted,
  /// Stored data is damaged or not what it claims to be.
  data_corrupt,
  /// The configuration is invalid; fix it before retrying.
  config_invalid,
  /// A failure of ours or of a library that fits no code above.
  internal,
};

/// The code's name ("not_found", ...).
const char* to_string(status_code code);

/// True for codes where the same call may succeed later unchanged.
bool is_retryable(status_code code);

/// Success, or a code with a message. Default-constructed means success.
///
/// `error` is the message, empty exactly when `code` is ok.
struct [[nodiscard]] status {
  status_code code = status_code::ok;
  std::string error;

  bool ok() const { return code == status_code::ok; }
  explicit operator bool() const { return ok(); }

  /// A failure with `code` (which must not be ok; ok becomes internal).
  static status failure(status_code code, std::string msg) {
    if (code == status_code::ok)
      code = status_code::internal;
    if (msg.empty())
      msg = to_string(code);
    return status{code, std::move(msg)};
  }

  /// A failure without a more specific code.
  static status failure(std::string msg) {
    return failure(status_code::internal, std::move(msg));
  }
};

/// A value of type T, or a failed status.
template <class T>
struct [[nodiscard]] result {
  std::optional<T> value;
  status_code code = status_code::internal;
  std::string error;

  /// An empty result is a failure until a value is assigned.
  result() : error("no value") {}
  result(T x) : value(std::move(x)), code(status_code::ok) {}
  result(status st) : code(st.code), error(std::move(st.error)) {
    if (code == status_code::ok) {
      code = status_code::internal;
      error = "no value";
    }
  }

  static result failure(status_code code, std::string msg) {
    return result{status::failure(code, std::move(msg))};
  }
  static result failure(std::string msg) {
    return failure(status_code::internal, std::move(msg));
  }

  bool ok() const { return value.has_value(); }
  explicit operator bool() const { return ok(); }
  /// The failure (or ok) as a status.
  status get_status() const {
    return ok() ? status{} : status{code, error};
  }
  T& operator*() { return *value; }
  const T& operator*() const { return *value; }
  T* operator->() { return &*value; }
  const T* operator->() const { return &*value; }
};

} // namespace mibyan
