// The I/O-thread side of `mibyan tool --stdin` (cli/tool_lines.hpp).
//
// CAF 0.17's brokers read sockets only (recv), and stdin is usually a
// pipe. The input is therefore read by an `event_handler` of our own,
// registered with the middleman's epoll loop (caf/io/network/
// event_handler.hpp, the interface CAF's own wake-up pipe reader uses).
// Everything of a session below runs on that loop's thread: the handler's
// events, the calls it starts (the facade's broker is on the same loop),
// their completions and the answers written to the output. Only an answer
// that cannot be written without blocking goes to the calling thread.
//
// The CAF rules this relies on are in docs/kernel_protocol.md §7.2:
// `add`/`del` only on the loop's thread, applied at the end of the loop
// turn; a handler must outlive its registration (epoll keeps the open file
// description, which fd 0 still holds, so closing our duplicate does not
// unregister it); `epoll_ctl` on a regular file is fatal to the loop,
// hence pipes and sockets only.
#include "cli/tool_lines.hpp"

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "caf/io/middleman.hpp"
#include "caf/io/network/default_multiplexer.hpp"
#include "caf/io/network/event_handler.hpp"

#include "base/bounded_line_reader.hpp"
#include "runtime/runtime_impl.hpp"

namespace mibyan {

namespace {

namespace net = caf::io::network;

/// Bytes read per readable event.
constexpr size_t read_chunk = 65536;

class line_session;

// Reads the input as the loop reports it readable. Owned by the loop
// while registered; `retire` frees it once the loop has let go of it.
class input_handler final : public net::event_handler {
public:
  input_handler(net::default_multiplexer& mpx, int fd, line_session* owner)
      : net::event_handler(mpx, fd), owner_(owner) {}

  void handle_event(net::operation op) override;

  void removed_from_loop(net::operation) override {}

  void graceful_shutdown() override { pause(); }

  void start() { resume(); }

  /// Stops reading (back-pressure or the end); resumable.
  void pause() {
    if (reading_) {
      reading_ = false;
      passivate();
    }
  }

  void resume() {
    if (!reading_ && owner_ != nullptr && !ended_) {
      reading_ = true;
      activate();
    }
  }

  /// Unhooks from the session and frees this once it is out of the loop
  /// (checked after the turn's registration changes are applied).
  static void retire(input_handler* self) {
    self->owner_ = nullptr;
    self->pause();
    auto& mpx = self->backend();
    mpx.post([self] { free_when_out(self); });
  }

private:
  static void free_when_out(input_handler* self) {
    if (self->eventbf() == 0) {
      delete self; // closes our duplicate of the input
      return;
    }
    self->passivate();
    self->backend().post([self] { free_when_out(self); });
  }

  line_session* owner_;
  bool reading_ = false;
  bool ended_ = false;
  char chunk_[read_chunk];
};

// One `--stdin` run. Loop thread only, except `wait` (the caller's
// thread) and the hand-over fields under `mtx_`.
class line_session : public std::enable_shared_from_this<line_session> {
public:
  line_session(runtime& rt, net::default_multiplexer& mpx, int out_fd,
               tool_line_settings s)
      : rt_(rt), mpx_(mpx), out_fd_(out_fd), settings_(std::move(s)),
        lines_(max_tool_line_bytes(settings_)),
        // Read ahead at most about one more line while a call runs.
        read_cap_(max_tool_line_bytes(settings_) + read_chunk) {}

  /// Loop thread: registers the input.
  void start(int fd) {
    in_ = new input_handler(mpx_, fd, this);
    in_->start();
  }

  /// Loop thread: input bytes.
  void on_bytes(const char* data, size_t size) {
    lines_.append(data, size);
    pump();
  }

  /// Loop thread: the input ended (or failed).
  void on_end() {
    lines_.finish();
    pump();
  }

  /// Caller's thread: writes what is handed over until the session ends.
  void wait() {
    std::unique_lock<std::mutex> guard{mtx_};
    for (;;) {
      cv_.wait(guard, [this] { return !handed_.empty() || finished_; });
      if (handed_.empty())
        return;
      auto line = std::move(handed_.front());
      handed_.pop_front();
      guard.unlock();
      write_all_to(out_fd_, line); // a closed output loses the answer only
      auto self = shared_from_this();
      mpx_.dispatch([self] {
        self->out_blocked_ = false;
        self->pump();
      });
      guard.lock();
    }
  }

private:
  void pump() {
    if (pumping_ || finished_local_)
      return;
    pumping_ = true;
    std::string line;
    uint64_t length = 0;
    while (!in_flight_ && !out_blocked_) {
      auto st = lines_.next(line, length);
      if (st == bounded_line_buffer::status::need_more)
        break;
      if (st == bounded_line_buffer::status::eof) {
        finish();
        break;
      }
      ++seq_;
      if (st == bounded_line_buffer::status::too_long) {
        answer(too_long_tool_line(seq_, length, settings_));
        continue;
      }
      auto parsed = parse_tool_line(line, seq_, settings_);
      if (!parsed.call) {
        answer(parsed.answer);
        continue;
      }
      in_flight_ = true;
      auto self = shared_from_this();
      rt_.call_tool_async(*parsed.call, [self](tool_outcome out) {
        self->on_result(std::move(out.result_json));
      });
    }
    pumping_ = false;
    if (in_ != nullptr) {
      if (lines_.held() > read_cap_)
        in_->pause();
      else
        in_->resume();
    }
  }

  // Any thread: a call's completion (the loop's thread in practice; the
  // facade answers on it).
  void on_result(std::string result) {
    if (std::this_thread::get_id() != mpx_.thread_id()) {
      auto self = shared_from_this();
      mpx_.dispatch([self, r = std::move(result)]() mutable {
        self->on_result(std::move(r));
      });
      return;
    }
    in_flight_ = false;
    answer(result);
    pump();
  }

  void answer(const std::string& result) {
    auto line = result + "\n";
    if (write_line_if_ready(out_fd_, line))
      return;
    out_blocked_ = true; // resumed by `wait` once written
    std::lock_guard<std::mutex> guard{mtx_};
    handed_.push_back(std::move(line));
    cv_.notify_one();
  }

  void finish() {
    finished_local_ = true;
    if (in_ != nullptr) {
      input_handler::retire(in_);
      in_ = nullptr;
    }
    std::lock_guard<std::mutex> guard{mtx_};
    finished_ = true;
    cv_.notify_one();
  }

  friend class input_handler;

  runtime& rt_;
  net::default_multiplexer& mpx_;
  int out_fd_;
  tool_line_settings settings_;
  bounded_line_buffer lines_;
  size_t read_cap_;
  input_handler* in_ = nullptr;
  uint64_t seq_ = 0;
  bool in_flight_ = false;
  bool out_blocked_ = false;
  bool pumping_ = false;
  bool finished_local_ = false;

  std::mutex mtx_;
  std::condition_variable cv_;
  std::deque<std::string> handed_;
  bool finished_ = false;
};

void input_handler::handle_event(net::operation op) {
  if (owner_ == nullptr || !reading_)
    return;
  if (op == net::operation::read) {
    auto n = ::read(fd(), chunk_, sizeof(chunk_));
    if (n > 0) {
      owner_->on_bytes(chunk_, static_cast<size_t>(n));
      return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
      return;
  }
  // End of input, a read error or a hang-up without data.
  ended_ = true;
  pause();
  owner_->on_end();
}

} // namespace

std::optional<int> serve_tool_lines_on_io_loop(runtime& rt, int in_fd,
                                               int out_fd,
                                               const tool_line_settings& s) {
  struct stat st {};
  if (::fstat(in_fd, &st) != 0 || !(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode)))
    return std::nullopt;
  auto& impl = runtime_access::of(rt);
  if (impl.sys == nullptr)
    return std::nullopt;
  auto* mpx = dynamic_cast<net::default_multiplexer*>(
    &impl.sys->middleman().backend());
  if (mpx == nullptr)
    return std::nullopt;
  auto flags = ::fcntl(in_fd, F_GETFL);
  auto fd = ::fcntl(in_fd, F_DUPFD_CLOEXEC, 3);
  if (flags < 0 || fd < 0) {
    if (fd >= 0)
      ::close(fd);
    return std::nullopt;
  }
  auto session = std::make_shared<line_session>(rt, *mpx, out_fd, s);
  mpx->dispatch([session, fd] { session->start(fd); });
  session->wait();
  ::fcntl(in_fd, F_SETFL, flags);
  return 0;
}

} // namespace mibyan
