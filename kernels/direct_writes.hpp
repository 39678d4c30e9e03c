// File: kernels/direct_writes.hpp
//
// Writes to a broker's stream sockets straight from the message handler:
// one send() instead of CAF 0.17's write path (the scribe registers for
// writability and sends on the next epoll round: epoll_ctl, epoll_wait,
// send, epoll_ctl), which puts three extra system calls and a loop
// iteration on the critical path of every script tool reply
// (docs/benchmarks-history.md, "Bridge, warm cell and CLI start-up").
//
// The writer keeps its own duplicate of each connection's socket, so the
// descriptor it writes to is never closed under it by CAF; the owner
// closes the duplicate together with the connection (`close`). At most
// `max_direct` connections get one (a script uses one connection per
// process; the rest are written through their scribes), so a flood of
// connections costs at most that many extra descriptors. What does not
// fit at once is left to the caller, which then sends it and every later
// write of that connection through its scribe (the connection becomes
// "scribe only"), so bytes stay in order.
//
// Thread safety: none; the owning broker uses it from its own thread.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace mibyan {

/// A non-inheritable duplicate of `candidate` if it is a connected Unix
/// stream socket whose local address is `local_path` (the listening
/// socket's path); else -1. Used to find the descriptor behind a CAF 0.17
/// connection handle (its id), checked rather than assumed.
int dup_unix_connection(long long candidate, const std::string& local_path);

/// The path a listening Unix socket is bound to ("" when not one).
std::string unix_socket_path(int fd);

/// Sends as much of `data` as the socket takes now, without blocking or
/// SIGPIPE; returns the bytes sent (0 on EAGAIN or an error).
size_t send_now(int fd, const char* data, size_t size);

/// close() unless negative.
void close_fd(int fd);

template <class Handle>
class direct_writes {
public:
  static constexpr size_t max_direct = 8;

  direct_writes() = default;
  direct_writes(const direct_writes&) = delete;
  direct_writes& operator=(const direct_writes&) = delete;
  ~direct_writes() { close_all(); }

  /// True while another connection may get a direct path.
  bool has_room() const { return conns_.size() < max_direct; }

  /// Starts writing `hdl` directly through `fd` (owned from now on; closed
  /// at once when there is no room).
  void add(Handle hdl, int fd) {
    if (fd < 0)
      return;
    if (!has_room() || conns_.count(hdl) > 0) {
      close_fd(fd);
      return;
    }
    conns_[hdl] = entry{fd, false};
  }

  /// Writes what the socket takes now; returns the bytes written (the
  /// caller sends the rest through its scribe). 0 for a connection
  /// without a direct path or once it went "scribe only".
  size_t write(Handle hdl, const std::string& data) {
    auto i = conns_.find(hdl);
    if (i == conns_.end() || i->second.scribe_only)
      return 0;
    auto n = send_now(i->second.fd, data.data(), data.size());
    if (n < data.size())
      i->second.scribe_only = true;
    return n;
  }

  /// Closes the duplicate of `hdl` (with the connection).
  void close(Handle hdl);

  void close_all();

private:
  struct entry {
    int fd = -1;
    bool scribe_only = false;
  };
  std::map<Handle, entry> conns_;
};

template <class Handle>
void direct_writes<Handle>::close(Handle hdl) {
  if (auto i = conns_.find(hdl); i != conns_.end()) {
    close_fd(i->second.fd);
    conns_.erase(i);
  }
}

template <class Handle>
void direct_writes<Handle>::close_all() {
  for (auto& [hdl, e] : conns_)
    close_fd(e.fd);
  conns_.clear();
}

} // namespace mibyan
