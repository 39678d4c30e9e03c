// The stdio transport of `mibyan mcp serve` (mcp_server/stdio_transport.hpp).
#include "mcp_server/stdio_transport.hpp"

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <poll.h>
#include <unistd.h>

#include "base/log.hpp"

namespace mibyan {

namespace {

// The writer: a queue of lines and one thread writing them in order.
class line_writer {
public:
  line_writer(int fd, size_t max_queued) : fd_(fd), max_(max_queued) {
    thread_ = std::thread([this] { run(); });
  }
  ~line_writer() { finish(); }

  // False once the output is broken or the queue is over its limit.
  bool push(std::string line) {
    std::lock_guard<std::mutex> g{mtx_};
    if (broken_ || closing_)
      return false;
    if (queued_ + line.size() > max_) {
      broken_ = true;
      cv_.notify_all();
      return false;
    }
    queued_ += line.size();
    q_.push_back(std::move(line));
    cv_.notify_all();
    return true;
  }

  bool broken() const {
    std::lock_guard<std::mutex> g{mtx_};
    return broken_;
  }

  // Writes what is queued, then stops the thread.
  void finish() {
    {
      std::lock_guard<std::mutex> g{mtx_};
      closing_ = true;
      cv_.notify_all();
    }
    if (thread_.joinable())
      thread_.join();
  }

private:
  void run() {
    for (;;) {
      std::string line;
      {
        std::unique_lock<std::mutex> lk{mtx_};
        cv_.wait(lk, [this] { return !q_.empty() || closing_ || broken_; });
        if (broken_ || q_.empty())
          return;
        line = std::move(q_.front());
        q_.pop_front();
        queued_ -= line.size();
      }
      if (!write_all(line)) {
        std::lock_guard<std::mutex> g{mtx_};
        broken_ = true;
        return;
      }
    }
  }

  bool write_all(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      auto n = ::write(fd_, s.data() + off, s.size() - off);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }

  int fd_;
  size_t max_;
  mutable std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::string> q_;
  size_t queued_ = 0;
  bool closing_ = false;
  bool broken_ = false;
  std::thread thread_;
};

} // namespace

int serve_mcp_stdio(mcp_server_core& core, int in_fd, int out_fd, int stop_fd,
                    const mcp_stdio_settings& settings) {
  auto writer = std::make_shared<line_writer>(out_fd,
                                              settings.max_queued_bytes);
  auto s = core.open_session(
    [writer](const std::string& text, const json::value&, bool) {
      std::string line;
      line.reserve(text.size() + 1);
      line = text;
      line += '\n';
      if (!writer->push(std::move(line)))
        MIBYAN_LOG(warning, "mcp-serve", "stdout is gone or not read: a "
                                         "message was dropped");
    });
  if (!s)
    return 1; // the core is shutting down
  const auto sid = mcp_server_core::id_of(*s);
  MIBYAN_LOG(info, "mcp-serve", "stdio session " << sid << " open");
  std::string line;
  bool skipping = false; // inside an oversized line
  size_t skipped = 0;
  int rc = 0;
  std::string why = "the client closed stdin";
  char buf[65536];
  for (;;) {
    if (writer->broken()) {
      why = "stdout is closed";
      rc = 1;
      break;
    }
    pollfd fds[2] = {{in_fd, POLLIN, 0}, {stop_fd, POLLIN, 0}};
    int n = ::poll(fds, stop_fd >= 0 ? 2 : 1, 500);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      why = "poll failed";
      rc = 1;
      break;
    }
    if (n == 0)
      continue;
    if (stop_fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP)) != 0) {
      why = "the server is stopping";
      break;
    }
    if ((fds[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
      continue;
    auto got = ::read(in_fd, buf, sizeof buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (got <= 0) {
      if (got < 0) {
        why = "reading stdin failed";
        rc = 1;
      }
      break;
    }
    size_t start = 0;
    for (size_t i = 0; i < static_cast<size_t>(got); ++i) {
      if (buf[i] != '\n')
        continue;
      if (skipping) {
        skipped += i - start;
        core.reject(s, mcp_errors::invalid_request,
                    "message too large: over "
                      + std::to_string(settings.max_message_bytes)
                      + " bytes (" + std::to_string(skipped) + ")");
        MIBYAN_LOG(warning, "mcp-serve", "an oversized message of "
                                           << skipped << " bytes refused");
        skipping = false;
        skipped = 0;
      } else {
        line.append(buf + start, i - start);
        if (!line.empty() && line.back() == '\r')
          line.pop_back();
        if (line.find_first_not_of(" \t") != std::string::npos)
          core.handle_text(s, line);
        line.clear();
      }
      start = i + 1;
    }
    if (skipping) {
      skipped += static_cast<size_t>(got) - start;
    } else {
      line.append(buf + start, static_cast<size_t>(got) - start);
      if (line.size() > settings.max_message_bytes) {
        skipping = true;
        skipped = line.size();
        line.clear();
        line.shrink_to_fit();
      }
    }
  }
  core.close_session(sid, why);
  writer->finish();
  MIBYAN_LOG(info, "mcp-serve", "stdio session " << sid << " ended: " << why);
  return rc;
}

}  // namespace mibyan
