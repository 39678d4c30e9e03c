#include "base/io_poll_hint.hpp"

namespace mibyan {

namespace {

thread_local bool answer_soon = false;

} // namespace

void expect_answer_soon() noexcept {
  answer_soon = true;
}

bool take_answer_soon_hint() noexcept {
  bool was = answer_soon;
  answer_soon = false;
  return was;
}

} // namespace mibyan
