// File: node/once_callback.hpp
//
// A completion callback of the embedding API that runs exactly once
// (docs/embedding.md, "Callbacks"). The runtime's actors hold it; when the
// last holder lets go without calling it (the runtime was destroyed while
// the call or turn was in flight, and its actors went with the actor
// system), the destructor calls it with the value `on_drop` makes, so a
// caller never waits forever and a blocking wrapper's promise is never
// broken.
//
// Thread: operator() runs the callback on the calling thread; the
// destructor runs it on whichever thread drops the last reference (during
// the runtime's destruction, possibly the thread destroying it).
// Exceptions from the callback are the caller's; the destructor swallows
// them, as a destructor must not throw.
#pragma once

#include <functional>
#include <memory>
#include <utility>

namespace mibyan {

template <class T>
class once_callback {
public:
  once_callback(std::function<void(T)> fn, std::function<T()> on_drop)
    : fn_(std::move(fn)), on_drop_(std::move(on_drop)) {}

  once_callback(const once_callback&) = delete;
  once_callback& operator=(const once_callback&) = delete;

  ~once_callback() {
    if (!fn_)
      return;
    auto fn = std::move(fn_);
    fn_ = nullptr;
    try {
      fn(on_drop_());
    } catch (...) {
    }
  }

  /// Runs the callback unless it already ran.
  void operator()(T value) {
    if (!fn_)
      return;
    auto fn = std::move(fn_);
    fn_ = nullptr;
    fn(std::move(value));
  }

private:
  std::function<void(T)> fn_;
  std::function<T()> on_drop_;
};

template <class T>
std::shared_ptr<once_callback<T>>
make_once_callback(std::function<void(T)> fn, std::function<T()> on_drop) {
  return std::make_shared<once_callback<T>>(std::move(fn), std::move(on_drop));
}

} // namespace mibyan
