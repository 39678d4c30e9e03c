// File: storage/store_result.hpp
//
// Error values of the storage layer. Storage functions never throw; they
// return a `store_status` (success or a message) or a `store_result<T>`
// (a value or a message). Messages name the operation, the object and the
// LMDB reason ("append_message: session 'x' does not exist").
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace mibyan {

/// Success, or an error message. Default-constructed means success.
struct [[nodiscard]] store_status {
  std::string error;

  bool ok() const { return error.empty(); }
  explicit operator bool() const { return ok(); }

  static store_status failure(std::string msg) {
    return store_status{std::move(msg)};
  }
};

/// A value of type T, or an error message.
template <class T>
struct [[nodiscard]] store_result {
  std::optional<T> value;
  std::string error;

  store_result() = default;
  store_result(T x) : value(std::move(x)) {}

  static store_result failure(std::string msg) {
    store_result r;
    r.error = msg.empty() ? std::string{"unknown storage error"}
                          : std::move(msg);
    return r;
  }

  bool ok() const { return value.has_value(); }
  explicit operator bool() const { return ok(); }
  T& operator*() { return *value; }
  const T& operator*() const { return *value; }
  T* operator->() { return &*value; }
  const T* operator->() const { return &*value; }
};

} // namespace mibyan
