// File: cmake/tsan_clocklock.cpp
//
// ThreadSanitizer builds only (-DMIBYAN_SANITIZE=thread; docs/testing.md,
// "Sanitizers"), linked like cmake/tsan_caf_sync.cpp.
//
// libstdc++ 12 implements std::timed_mutex::try_lock_for/try_lock_until on
// the steady clock with pthread_mutex_clocklock, which GCC 12's TSan runtime
// does not intercept (it does intercept pthread_mutex_timedlock). TSan then
// misses every such lock: it reports the matching unlock as "unlock of an
// unlocked mutex" and does not see the mutual exclusion, so it could not
// check the code the mutex guards (mcp_session's call_mtx_).
//
// This definition wins over libc's for the executable and waits with
// pthread_mutex_timedlock instead, for the same remaining time measured on
// the realtime clock, which TSan sees. The only difference: a jump of the
// realtime clock during the wait stretches or shortens it.
#if defined(__SANITIZE_THREAD__)

#include <cerrno>
#include <cstdint>
#include <pthread.h>
#include <time.h>

extern "C" int pthread_mutex_clocklock(pthread_mutex_t* mutex,
                                       clockid_t clock,
                                       const struct timespec* abstime) noexcept {
  if (clock == CLOCK_REALTIME)
    return pthread_mutex_timedlock(mutex, abstime);
  if (clock != CLOCK_MONOTONIC)
    return EINVAL;
  constexpr int64_t ns = 1000000000;
  timespec now{}, real_now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  clock_gettime(CLOCK_REALTIME, &real_now);
  int64_t left = (int64_t{abstime->tv_sec} - now.tv_sec) * ns
                 + (abstime->tv_nsec - now.tv_nsec);
  if (left < 0)
    left = 0;
  int64_t until = int64_t{real_now.tv_sec} * ns + real_now.tv_nsec + left;
  timespec real_abstime{};
  real_abstime.tv_sec = static_cast<time_t>(until / ns);
  real_abstime.tv_nsec = static_cast<long>(until % ns);
  return pthread_mutex_timedlock(mutex, &real_abstime);
}

#endif // __SANITIZE_THREAD__
