// File: storage/postgres/pg_pool.hpp
//
// A fixed-size pool of PostgreSQL connections (storage.postgres.pool_size).
// Connections are opened lazily and replaced by themselves: one found
// broken when it is handed back (the server restarted, the network failed)
// is closed, and the next acquire opens a new one. So a store whose
// database went away fails its calls with `unavailable` and works again
// once the database is back, without a restart.
//
// Thread safety: acquire() may be called from any thread; a lease is used
// by one thread. acquire() blocks (it is called on the store's threads,
// never on a CAF scheduler thread or a serve I/O thread).
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

#include "storage/postgres/pg_connection.hpp"

namespace mibyan::pg {

struct pool_options {
  connect_options connect;
  /// Connections at most (1..256).
  size_t size = 4;
  /// How long acquire() waits for a free connection.
  std::chrono::milliseconds wait{30000};
};

class pool {
public:
  explicit pool(pool_options o);
  ~pool();

  class lease {
  public:
    lease() = default;
    lease(lease&& o) noexcept;
    lease& operator=(lease&& o) = delete;
    lease(const lease&) = delete;
    ~lease();
    connection& operator*() { return *conn_; }
    connection* operator->() { return conn_.get(); }
    /// Opened by this acquire (not reused from the pool).
    bool fresh() const { return fresh_; }
    /// Closes the connection instead of returning it (after an error that
    /// leaves its state unknown).
    void discard() { discard_ = true; }

  private:
    friend class pool;
    pool* pool_ = nullptr;
    std::unique_ptr<connection> conn_;
    bool fresh_ = false;
    bool discard_ = false;
  };

  /// A connection: an idle one, or a new one while fewer than `size` are
  /// open. Errors: `unavailable` when every connection stays busy for
  /// `wait` or the server cannot be reached; connection::open's errors.
  result<lease> acquire();
  /// Closes the idle connections (the next acquire opens new ones).
  void drop_idle();
  const pool_options& options() const { return opts_; }

private:
  void give_back(std::unique_ptr<connection> c, bool discard);

  pool_options opts_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<connection>> idle_;
  size_t open_ = 0;
};

} // namespace mibyan::pg
