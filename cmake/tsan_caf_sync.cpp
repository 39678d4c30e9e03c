// File: cmake/tsan_caf_sync.cpp
//
// ThreadSanitizer builds only (-DMIBYAN_SANITIZE=thread; docs/testing.md,
// "Sanitizers"). Linked into every executable of such a build through the
// INTERFACE sources of mibyan_runtime; in any other build it is not compiled.
//
// Debian's CAF 0.17.6 is not compiled with -fsanitize=thread, so the
// happens-before edges that CAF creates with plain atomics inside
// libcaf_core are invisible to TSan: a mailbox push and pop (sender ->
// receiver), the hand-over of an actor between scheduler workers (one
// handler -> the next), and the actor's reference count (last handler ->
// destructor). Without them TSan reports every message payload and every
// piece of actor state as a race.
//
// This file restores exactly those edges, no others. It interposes a few
// exported CAF functions (the executable's definition wins over the shared
// library's, also for calls and vtables inside libcaf_core), tells TSan about
// the synchronisation CAF performs there, and calls the library's own
// definition (looked up with dlsym(RTLD_NEXT)):
//
//   enqueue(element)          release(element)    sender -> mailbox
//   consume(element)          acquire(element)    mailbox -> handler
//   blocking receive(element) acquire(element)    mailbox -> scoped_actor
//   launch                    release(actor)      spawner -> first activation
//   activate / consume /      acquire(actor) before, release(actor) after:
//     finalize                one activation of the actor -> the next one
//   release of a strong or    release + acquire (ctrl block), which is what
//     weak reference          the library's acq_rel decrement does
//   ref_counted::deref        release + acquire (object): the same for
//                             messages and other reference-counted objects
//   deletion of an element    acquire(element): whoever disposes of a
//                             mailbox element (also one dropped unread from
//                             a closed mailbox) has seen its enqueue
//
// Each edge mirrors an ordering CAF guarantees (and that the actor model
// relies on); none orders two accesses that CAF leaves unordered. A race
// between two actors, between an actor and a thread of ours, or between
// threads of ours is still reported. The names below are checked against
// libcaf_core.so.0.17.6; a missing one aborts at the first call.
#if defined(__SANITIZE_THREAD__)

#include <caf/actor_control_block.hpp>
#include <caf/blocking_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/memory_managed.hpp>
#include <caf/ref_counted.hpp>
#include <caf/scheduled_actor.hpp>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);

namespace {

// The library's definition of the function mangled as `name`.
template <class Fn>
Fn next_definition(const char* name) {
  void* p = ::dlsym(RTLD_NEXT, name);
  if (p == nullptr) {
    std::fprintf(stderr, "tsan_caf_sync: %s not found in CAF\n", name);
    std::abort();
  }
  return reinterpret_cast<Fn>(p);
}

// MIBYAN_TSAN_CAF_SYNC=0 turns the annotations off (the functions then only
// forward), to see what TSan reports without them.
bool annotate() {
  static const bool on = [] {
    const char* v = std::getenv("MIBYAN_TSAN_CAF_SYNC");
    return v == nullptr || std::string{v} != "0";
  }();
  return on;
}

void sync_acquire(void* addr) {
  if (annotate())
    __tsan_acquire(addr);
}

void sync_release(void* addr) {
  if (annotate())
    __tsan_release(addr);
}

// The actor's address as one sync object, whatever member we are in.
void* actor_key(caf::local_actor* self) {
  return static_cast<void*>(self);
}

} // namespace

namespace caf {

void scheduled_actor::enqueue(mailbox_element_ptr ptr, execution_unit* eu) {
  using fn = void (*)(scheduled_actor*, mailbox_element_ptr, execution_unit*);
  static const auto real = next_definition<fn>(
    "_ZN3caf15scheduled_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_"
    "6detail8disposerEEPNS_14execution_unitE");
  if (ptr)
    sync_release(ptr.get());
  real(this, std::move(ptr), eu);
}

void blocking_actor::enqueue(mailbox_element_ptr ptr, execution_unit* eu) {
  using fn = void (*)(blocking_actor*, mailbox_element_ptr, execution_unit*);
  static const auto real = next_definition<fn>(
    "_ZN3caf14blocking_actor7enqueueESt10unique_ptrINS_15mailbox_elementENS_"
    "6detail8disposerEEPNS_14execution_unitE");
  if (ptr)
    sync_release(ptr.get());
  real(this, std::move(ptr), eu);
}

void scheduled_actor::launch(execution_unit* eu, bool lazy, bool hide) {
  using fn = void (*)(scheduled_actor*, execution_unit*, bool, bool);
  static const auto real = next_definition<fn>(
    "_ZN3caf15scheduled_actor6launchEPNS_14execution_unitEbb");
  sync_release(actor_key(this));
  real(this, eu, lazy, hide);
}

bool scheduled_actor::activate(execution_unit* ctx) {
  using fn = bool (*)(scheduled_actor*, execution_unit*);
  static const auto real = next_definition<fn>(
    "_ZN3caf15scheduled_actor8activateEPNS_14execution_unitE");
  sync_acquire(actor_key(this));
  auto result = real(this, ctx);
  sync_release(actor_key(this));
  return result;
}

invoke_message_result scheduled_actor::consume(mailbox_element& x) {
  using fn = invoke_message_result (*)(scheduled_actor*, mailbox_element&);
  static const auto real = next_definition<fn>(
    "_ZN3caf15scheduled_actor7consumeERNS_15mailbox_elementE");
  sync_acquire(&x);
  sync_acquire(actor_key(this));
  auto result = real(this, x);
  sync_release(actor_key(this));
  return result;
}

bool scheduled_actor::finalize() {
  using fn = bool (*)(scheduled_actor*);
  static const auto real = next_definition<fn>(
    "_ZN3caf15scheduled_actor8finalizeEv");
  sync_acquire(actor_key(this));
  // The scheduler still holds a reference: `this` outlives the call.
  auto result = real(this);
  sync_release(actor_key(this));
  return result;
}

intrusive::task_result
blocking_actor::mailbox_visitor::operator()(mailbox_element& x) {
  using fn = intrusive::task_result (*)(mailbox_visitor*, mailbox_element&);
  static const auto real = next_definition<fn>(
    "_ZN3caf14blocking_actor15mailbox_visitorclERNS_15mailbox_elementE");
  sync_acquire(&x);
  return real(this, x);
}

void intrusive_ptr_release(actor_control_block* x) {
  using fn = void (*)(actor_control_block*);
  static const auto real = next_definition<fn>(
    "_ZN3caf21intrusive_ptr_releaseEPNS_19actor_control_blockE");
  sync_release(x);
  sync_acquire(x);
  real(x);
}

void intrusive_ptr_release_weak(actor_control_block* x) {
  using fn = void (*)(actor_control_block*);
  static const auto real = next_definition<fn>(
    "_ZN3caf26intrusive_ptr_release_weakEPNS_19actor_control_blockE");
  sync_release(x);
  sync_acquire(x);
  real(x);
}

void ref_counted::deref() const noexcept {
  using fn = void (*)(const ref_counted*);
  static const auto real = next_definition<fn>("_ZNK3caf11ref_counted5derefEv");
  auto key = const_cast<ref_counted*>(this);
  sync_release(key);
  sync_acquire(key);
  real(this);
}

void memory_managed::request_deletion(bool decremented_rc) const noexcept {
  using fn = void (*)(const memory_managed*, bool);
  static const auto real = next_definition<fn>(
    "_ZNK3caf14memory_managed16request_deletionEb");
  // enqueue released the element's own address, not its memory_managed
  // base's.
  if (auto e = dynamic_cast<const mailbox_element*>(this))
    sync_acquire(const_cast<mailbox_element*>(e));
  real(this, decremented_rc);
}

} // namespace caf

#endif // __SANITIZE_THREAD__
