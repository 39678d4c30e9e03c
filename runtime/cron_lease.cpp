// The scheduler lease (runtime/cron_lease.hpp), on the store's leases.
#include "runtime/cron_lease.hpp"

#include <chrono>

#include "storage/session_lease.hpp"
#include "storage/session_store.hpp"

namespace mibyan {

result<std::unique_ptr<cron_lease>>
cron_lease::try_acquire(session_store& store, const std::string& holder,
                        int64_t ttl_ms) {
  auto leases = open_session_leases(store);
  if (!leases)
    return leases.get_status();
  auto got = (*leases)->acquire(name, holder, ttl_ms);
  if (!got)
    return got.get_status();
  if (!got->granted) {
    auto& who = got->current.holder;
    return status::failure(status_code::unavailable,
                           "the scheduler of this store runs elsewhere"
                             + (who.empty() ? std::string{}
                                            : " (" + who + ")"));
  }
  return std::unique_ptr<cron_lease>(
    new cron_lease(std::move(*leases), holder, got->token, ttl_ms));
}

std::string cron_lease::holder_of(session_store& store) {
  auto leases = open_session_leases(store);
  if (!leases)
    return {};
  auto row = (*leases)->get(name);
  if (!row)
    return {};
  auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
               .count();
  return row->live(now) ? row->holder : std::string{};
}

status cron_lease::renew() {
  auto got = leases_->acquire(name, holder_, ttl_ms_);
  if (!got)
    return got.get_status();
  if (!got->granted || got->token != token_)
    return status::failure(status_code::unavailable,
                           "the scheduler lease was taken over by "
                             + got->current.holder);
  return {};
}

cron_lease::~cron_lease() {
  if (leases_)
    (void) leases_->release(name, holder_, token_);
}

} // namespace mibyan
