#include "storage/postgres/pg_pool.hpp"

namespace mibyan::pg {

pool::pool(pool_options o) : opts_(std::move(o)) {
  if (opts_.size == 0)
    opts_.size = 1;
}

pool::~pool() = default;

pool::lease::lease(lease&& o) noexcept
  : pool_(o.pool_), conn_(std::move(o.conn_)), fresh_(o.fresh_),
    discard_(o.discard_) {
  o.pool_ = nullptr;
}

pool::lease::~lease() {
  if (pool_ != nullptr && conn_)
    pool_->give_back(std::move(conn_), discard_);
}

void pool::give_back(std::unique_ptr<connection> c, bool discard) {
  std::lock_guard<std::mutex> g{mu_};
  if (discard || c->broken()) {
    --open_;
    c.reset();
  } else {
    idle_.push_back(std::move(c));
  }
  cv_.notify_one();
}

result<pool::lease> pool::acquire() {
  lease l;
  {
    std::unique_lock<std::mutex> g{mu_};
    bool ok = cv_.wait_for(g, opts_.wait, [&] {
      return !idle_.empty() || open_ < opts_.size;
    });
    if (!ok)
      return result<lease>::failure(
        status_code::unavailable,
        "store unavailable: all " + std::to_string(opts_.size)
          + " PostgreSQL connections stayed busy for "
          + std::to_string(opts_.wait.count())
          + " ms (raise storage.postgres.pool_size)");
    if (!idle_.empty()) {
      l.conn_ = std::move(idle_.back());
      idle_.pop_back();
    } else {
      ++open_;  // reserved; opened below without the lock
      l.fresh_ = true;
    }
  }
  if (l.fresh_) {
    auto c = connection::open(opts_.connect);
    if (!c) {
      std::lock_guard<std::mutex> g{mu_};
      --open_;
      cv_.notify_one();
      return result<lease>{status::failure(
        c.code, (c.code == status_code::unavailable ? "store unavailable: "
                                                    : "")
                  + c.error)};
    }
    l.conn_ = std::move(*c);
  }
  l.pool_ = this;
  return result<lease>{std::move(l)};
}

void pool::drop_idle() {
  std::lock_guard<std::mutex> g{mu_};
  open_ -= idle_.size();
  idle_.clear();
  cv_.notify_all();
}

} // namespace mibyan::pg
