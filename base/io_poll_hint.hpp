// File: base/io_poll_hint.hpp
//
// A hint from code running on an event loop's thread that an answer is
// expected within microseconds: a cell line was just written to a warm
// kernel, whose frame usually follows in tens of microseconds. The
// runtime's I/O loop (runtime/io_loop.cpp) then polls for a short window
// instead of sleeping, so the answer is picked up without a wake-up
// (docs/architecture.md, "Actor system settings").
//
// Thread-local: `expect_answer_soon` marks the calling thread, and only
// the loop running on that thread takes the mark; on any other thread the
// mark is never read and costs one store. No locking, no I/O, no errors.
#pragma once

namespace mibyan {

/// Marks the calling thread: an answer is expected soon.
void expect_answer_soon() noexcept;

/// Returns whether the calling thread was marked since the last call, and
/// clears the mark.
bool take_answer_soon_hint() noexcept;

} // namespace mibyan
