#include "base/http_client.hpp"

#include <algorithm>
#include <cctype>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "base/curl_library.hpp"

#include "base/log.hpp"
#include "base/strings.hpp"

namespace mibyan {

namespace {

using clock_type = std::chrono::steady_clock;

// Header text without leading blanks and trailing blanks or line ends.
std::string_view header_trim(std::string_view s) {
  return strings::trim_right_view(strings::trim_left_view(s, " \t"),
                                  " \t\r\n");
}

// One request from submit() to on_done. Owned by the client thread once it
// has left the pending queue.
struct transfer {
  http_request_id id = 0;
  http_request req;
  http_callbacks cb;
  CURL* easy = nullptr;
  curl_slist* header_list = nullptr;
  char error_buffer[CURL_ERROR_SIZE] = {};
  // Header block of the response currently arriving.
  long block_status = 0;
  http_headers block_headers;
  bool block_has_location = false;
  bool headers_reported = false;
  uint64_t bytes = 0;
  bool capped = false;
  bool aborted = false;
  bool blocked = false;
  std::string block_reason;
  clock_type::time_point last_activity;

  ~transfer() {
    if (easy != nullptr)
      curl_api().easy_cleanup(easy);
    if (header_list != nullptr)
      curl_api().slist_free_all(header_list);
  }

  void report_headers() {
    if (headers_reported)
      return;
    headers_reported = true;
    if (cb.on_headers)
      cb.on_headers(block_status, block_headers);
  }

  // Whether the header block just completed belongs to the response that
  // ends the transfer (not an interim 1xx nor a redirect curl follows).
  bool block_is_final() const {
    if (block_status >= 100 && block_status < 200)
      return false;
    if (req.follow_redirects && block_status >= 300 && block_status < 400
        && block_has_location) {
      long followed = 0;
      curl_api().easy_getinfo(easy, CURLINFO_REDIRECT_COUNT, &followed);
      return followed >= req.max_redirects;
    }
    return true;
  }
};

size_t on_header_line(char* buffer, size_t size, size_t count, void* ud) {
  auto* t = static_cast<transfer*>(ud);
  auto n = size * count;
  t->last_activity = clock_type::now();
  std::string_view line{buffer, n};
  if (line.size() >= 5 && line.compare(0, 5, "HTTP/") == 0) {
    t->block_headers.clear();
    t->block_has_location = false;
    t->block_status = 0;
    auto sp = line.find(' ');
    if (sp != std::string_view::npos) {
      long status = 0;
      for (size_t i = sp + 1; i < line.size() && i < sp + 4; ++i) {
        if (line[i] < '0' || line[i] > '9')
          break;
        status = status * 10 + (line[i] - '0');
      }
      t->block_status = status;
    }
    return n;
  }
  auto content = header_trim(line);
  if (content.empty()) {
    if (!t->headers_reported && t->block_status != 0 && t->block_is_final())
      t->report_headers();
    return n;
  }
  if ((line.front() == ' ' || line.front() == '\t')
      && !t->block_headers.empty()) {
    // Obsolete line folding: a continuation of the previous value.
    auto& value = t->block_headers.back().second;
    value += ' ';
    value.append(content.data(), content.size());
    return n;
  }
  auto colon = content.find(':');
  if (colon == std::string_view::npos)
    return n;
  auto name = header_trim(content.substr(0, colon));
  auto value = header_trim(content.substr(colon + 1));
  if (strings::iequals(name, "location"))
    t->block_has_location = true;
  t->block_headers.emplace_back(std::string{name}, std::string{value});
  return n;
}

size_t on_body_bytes(char* ptr, size_t size, size_t count, void* ud) {
  auto* t = static_cast<transfer*>(ud);
  auto n = size * count;
  t->last_activity = clock_type::now();
  t->report_headers();
  auto accept = n;
  if (t->req.max_body_bytes > 0 && t->bytes + n > t->req.max_body_bytes) {
    accept = static_cast<size_t>(t->req.max_body_bytes - t->bytes);
    t->capped = true;
  }
  if (accept > 0) {
    t->bytes += accept;
    if (t->cb.on_data && !t->cb.on_data(std::string_view{ptr, accept})) {
      t->aborted = true;
      return 0;
    }
  }
  // Returning less than n makes libcurl fail with CURLE_WRITE_ERROR.
  return t->capped ? 0 : n;
}

std::string format_address(const curl_sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->family == AF_INET) {
    auto* in = reinterpret_cast<const sockaddr_in*>(&addr->addr);
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text)) != nullptr)
      return text;
  } else if (addr->family == AF_INET6) {
    auto* in6 = reinterpret_cast<const sockaddr_in6*>(&addr->addr);
    if (inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text)) != nullptr)
      return text;
  }
  return {};
}

curl_socket_t on_open_socket(void* ud, curlsocktype purpose,
                             curl_sockaddr* addr) {
  auto* t = static_cast<transfer*>(ud);
  if (t->req.connect_check && purpose == CURLSOCKTYPE_IPCXN) {
    auto ip = format_address(addr);
    char* url = nullptr;
    curl_api().easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url);
    status allowed;
    if (ip.empty()) {
      allowed = status::failure(
        status_code::permission_denied,
        "refusing to connect to an address of an unknown family");
    } else {
      try {
        allowed = t->req.connect_check(url != nullptr ? url : "", ip);
      } catch (...) {
        allowed = status::failure("connection check failed");
      }
    }
    if (!allowed.ok()) {
      t->blocked = true;
      t->block_reason = std::move(allowed.error);
      return CURL_SOCKET_BAD;
    }
  }
  auto fd = ::socket(addr->family, addr->socktype | SOCK_CLOEXEC,
                     addr->protocol);
  return fd < 0 ? CURL_SOCKET_BAD : fd;
}

} // namespace

const std::string* find_header(const http_headers& headers,
                               std::string_view name) {
  for (auto& kv : headers)
    if (strings::iequals(kv.first, name))
      return &kv.second;
  return nullptr;
}

// -- implementation -----------------------------------------------------------

struct http_client::impl {
  CURLM* multi = nullptr;
  std::mutex mtx;
  std::deque<std::unique_ptr<transfer>> pending;  // guarded by mtx
  std::vector<http_request_id> cancels;           // guarded by mtx
  bool stopping = false;                          // guarded by mtx
  // libcurl and the client thread start with the first request
  // (base/curl_library.hpp): a process that never fetches anything never
  // loads libcurl. Guarded by mtx; `multi` and `thread` are set once,
  // under it, before `started`.
  bool started = false;
  // Client thread only.
  std::unordered_map<http_request_id, std::unique_ptr<transfer>> running;
  std::atomic<size_t> outstanding{0};
  std::atomic<http_request_id> next_id{1};
  std::thread thread;

  void wakeup() {
    curl_api().multi_wakeup(multi);
  }

  // Under mtx: loads libcurl and starts the client thread, once. Empty on
  // success, else why requests cannot run.
  std::string start_locked() {
    if (started)
      return {};
    if (auto lib = curl_lib(); !lib.ok())
      return lib.error;
    multi = curl_api().multi_init();
    if (multi == nullptr)
      return "curl_multi_init failed";
    thread = std::thread{[this] { run(); }};
    started = true;
    return {};
  }

  // Ends `t` (which must not be in `running` or the multi handle any more)
  // and reports `summary` to its owner.
  void deliver(std::unique_ptr<transfer> t, http_response_summary summary) {
    auto done = std::move(t->cb.on_done);
    t.reset();
    if (done) {
      try {
        done(summary);
      } catch (...) {
        MIBYAN_LOG(error, "http", "on_done callback threw; ignored");
      }
    }
    outstanding.fetch_sub(1);
  }

  // Ends a transfer that never reached libcurl.
  void fail_unstarted(std::unique_ptr<transfer> t, std::string error) {
    http_response_summary s;
    s.id = t->id;
    s.final_url = t->req.url;
    s.error = std::move(error);
    s.cancelled = s.error == "cancelled";
    deliver(std::move(t), std::move(s));
  }

  // Ends a running transfer. `forced` (cancelled, shutdown, idle timeout)
  // overrides libcurl's result code.
  void finish(http_request_id id, CURLcode code, std::string forced = {},
              bool forced_timeout = false) {
    auto i = running.find(id);
    if (i == running.end())
      return;
    auto t = std::move(i->second);
    running.erase(i);
    curl_api().multi_remove_handle(multi, t->easy);
    http_response_summary s;
    s.id = t->id;
    curl_api().easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &s.status);
    char* url = nullptr;
    if (curl_api().easy_getinfo(t->easy, CURLINFO_EFFECTIVE_URL, &url) == CURLE_OK
        && url != nullptr)
      s.final_url = url;
    else
      s.final_url = t->req.url;
    char* ctype = nullptr;
    if (curl_api().easy_getinfo(t->easy, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK
        && ctype != nullptr)
      s.content_type = ctype;
    curl_api().easy_getinfo(t->easy, CURLINFO_REDIRECT_COUNT, &s.redirects);
    s.bytes = t->bytes;
    if (!forced.empty()) {
      s.error = std::move(forced);
      s.cancelled = s.error == "cancelled";
      s.timed_out = forced_timeout;
    } else if (code != CURLE_OK) {
      if (t->blocked && code == CURLE_COULDNT_CONNECT) {
        s.blocked = true;
        s.error = t->block_reason;
      } else if (t->capped) {
        s.capped = true;
        s.error = "response body exceeds "
                  + std::to_string(t->req.max_body_bytes) + " bytes";
      } else if (t->aborted) {
        s.error = "aborted by receiver";
      } else {
        s.timed_out = code == CURLE_OPERATION_TIMEDOUT;
        s.error = t->error_buffer[0] != '\0'
                    ? std::string{t->error_buffer}
                    : std::string{curl_api().easy_strerror(code)};
      }
    } else if (s.status != 0) {
      // A complete response without body: report its headers now.
      t->report_headers();
    }
    deliver(std::move(t), std::move(s));
  }

  // Configures the easy handle of `t`. Returns an error message on failure.
  std::string setup(transfer& t) {
    t.easy = curl_api().easy_init();
    if (t.easy == nullptr)
      return "curl_easy_init failed";
    auto& r = t.req;
    auto* e = t.easy;
    CURLcode rc = CURLE_OK;
    auto set = [&](CURLoption opt, auto value) {
      if (rc == CURLE_OK)
        rc = curl_api().easy_setopt(e, opt, value);
    };
    set(CURLOPT_URL, r.url.c_str());
    set(CURLOPT_PROTOCOLS_STR, "http,https");
    set(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    set(CURLOPT_NOSIGNAL, 1L);
    set(CURLOPT_PRIVATE, static_cast<void*>(&t));
    set(CURLOPT_ERRORBUFFER, t.error_buffer);
    set(CURLOPT_WRITEFUNCTION, &on_body_bytes);
    set(CURLOPT_WRITEDATA, static_cast<void*>(&t));
    set(CURLOPT_HEADERFUNCTION, &on_header_line);
    set(CURLOPT_HEADERDATA, static_cast<void*>(&t));
    set(CURLOPT_OPENSOCKETFUNCTION, &on_open_socket);
    set(CURLOPT_OPENSOCKETDATA, static_cast<void*>(&t));
    set(CURLOPT_SUPPRESS_CONNECT_HEADERS, 1L);
    set(CURLOPT_TCP_KEEPALIVE, 1L);
    if (r.connect_timeout.count() > 0)
      set(CURLOPT_CONNECTTIMEOUT_MS,
          static_cast<long>(r.connect_timeout.count()));
    if (r.total_timeout.count() > 0)
      set(CURLOPT_TIMEOUT_MS, static_cast<long>(r.total_timeout.count()));
    set(CURLOPT_FOLLOWLOCATION, r.follow_redirects ? 1L : 0L);
    set(CURLOPT_MAXREDIRS, static_cast<long>(std::max(0, r.max_redirects)));
    if (r.accept_compressed)
      set(CURLOPT_ACCEPT_ENCODING, "");
    if (!r.user_agent.empty())
      set(CURLOPT_USERAGENT, r.user_agent.c_str());
    if (r.connect_check)
      set(CURLOPT_NOPROXY, "*");
    bool has_expect = false;
    for (auto& [name, value] : r.headers) {
      if (strings::iequals(name, "expect"))
        has_expect = true;
      auto line = value.empty() ? name + ";" : name + ": " + value;
      auto* next = curl_api().slist_append(t.header_list, line.c_str());
      if (next == nullptr)
        return "out of memory building request headers";
      t.header_list = next;
    }
    // Python's and many proxies' servers never answer "100 Continue", which
    // would cost a one-second stall on every large POST.
    if (!has_expect && !r.body.empty()) {
      auto* next = curl_api().slist_append(t.header_list, "Expect:");
      if (next != nullptr)
        t.header_list = next;
    }
    if (t.header_list != nullptr)
      set(CURLOPT_HTTPHEADER, t.header_list);
    const auto& m = r.method;
    if (m.empty() || m == "GET") {
      if (r.body.empty())
        set(CURLOPT_HTTPGET, 1L);
    } else if (m == "HEAD") {
      set(CURLOPT_NOBODY, 1L);
    } else if (m == "POST") {
      set(CURLOPT_POST, 1L);
    } else {
      set(CURLOPT_CUSTOMREQUEST, m.c_str());
    }
    if (!r.body.empty() || m == "POST") {
      set(CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(r.body.size()));
      set(CURLOPT_POSTFIELDS, r.body.data());
      if ((m.empty() || m == "GET") && !r.body.empty())
        set(CURLOPT_CUSTOMREQUEST, "GET");
    }
    if (rc != CURLE_OK)
      return std::string{"invalid request option: "} + curl_api().easy_strerror(rc);
    return {};
  }

  void start(std::unique_ptr<transfer> t) {
    auto err = setup(*t);
    if (err.empty()) {
      t->last_activity = clock_type::now();
      auto mc = curl_api().multi_add_handle(multi, t->easy);
      if (mc != CURLM_OK)
        err = std::string{"curl_multi_add_handle: "} + curl_api().multi_strerror(mc);
    }
    if (!err.empty()) {
      fail_unstarted(std::move(t), std::move(err));
      return;
    }
    auto id = t->id;
    running.emplace(id, std::move(t));
  }

  void shutdown_all() {
    std::deque<std::unique_ptr<transfer>> todo;
    {
      std::lock_guard<std::mutex> guard{mtx};
      todo.swap(pending);
      cancels.clear();
    }
    for (auto& t : todo)
      fail_unstarted(std::move(t), "shutdown");
    std::vector<http_request_id> ids;
    for (auto& kv : running)
      ids.push_back(kv.first);
    for (auto id : ids)
      finish(id, CURLE_OK, "shutdown");
  }

  void run() {
    for (;;) {
      std::deque<std::unique_ptr<transfer>> todo;
      std::vector<http_request_id> to_cancel;
      bool stop = false;
      {
        std::lock_guard<std::mutex> guard{mtx};
        todo.swap(pending);
        to_cancel.swap(cancels);
        stop = stopping;
      }
      if (stop) {
        for (auto& t : todo)
          fail_unstarted(std::move(t), "shutdown");
        shutdown_all();
        return;
      }
      for (auto& t : todo)
        start(std::move(t));
      for (auto id : to_cancel)
        finish(id, CURLE_OK, "cancelled");
      int still_running = 0;
      auto mc = curl_api().multi_perform(multi, &still_running);
      if (mc != CURLM_OK)
        MIBYAN_LOG(error, "http", "curl_multi_perform: "
                                    << curl_api().multi_strerror(mc));
      int left = 0;
      while (CURLMsg* msg = curl_api().multi_info_read(multi, &left)) {
        if (msg->msg != CURLMSG_DONE)
          continue;
        transfer* t = nullptr;
        curl_api().easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
        if (t != nullptr)
          finish(t->id, msg->data.result);
      }
      // Idle (stale stream) timers, which libcurl has no millisecond
      // equivalent for.
      auto now = clock_type::now();
      long wait_ms = 1000;
      std::vector<std::pair<http_request_id, long>> idle;
      for (auto& kv : running) {
        auto& t = *kv.second;
        auto limit = t.req.idle_timeout;
        if (limit.count() <= 0)
          continue;
        auto due = t.last_activity + limit;
        if (due <= now) {
          idle.emplace_back(kv.first, static_cast<long>(limit.count()));
        } else {
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      due - now).count() + 1;
          wait_ms = std::min<long>(wait_ms, static_cast<long>(ms));
        }
      }
      for (auto& [id, ms] : idle)
        finish(id, CURLE_OK,
               "no data received for " + std::to_string(ms) + " ms", true);
      if (!idle.empty())
        continue;
      int numfds = 0;
      curl_api().multi_poll(multi, nullptr, 0, static_cast<int>(wait_ms), &numfds);
    }
  }
};

// -- http_client --------------------------------------------------------------

http_client::http_client() : impl_(std::make_unique<impl>()) {}

http_client::~http_client() {
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    impl_->stopping = true;
    if (!impl_->started)
      return; // nothing was ever submitted
  }
  impl_->wakeup();
  impl_->thread.join();
  // Anything a callback submitted while the thread was shutting down.
  impl_->shutdown_all();
  curl_api().multi_cleanup(impl_->multi);
}

http_request_id http_client::submit(http_request req, http_callbacks cb) {
  auto t = std::make_unique<transfer>();
  t->id = impl_->next_id.fetch_add(1);
  t->req = std::move(req);
  t->cb = std::move(cb);
  auto id = t->id;
  impl_->outstanding.fetch_add(1);
  {
    std::unique_lock<std::mutex> guard{impl_->mtx};
    std::string error = impl_->stopping ? "shutdown"
                                        : impl_->start_locked();
    if (!error.empty()) {
      guard.unlock();
      impl_->fail_unstarted(std::move(t), std::move(error));
      return id;
    }
    impl_->pending.push_back(std::move(t));
  }
  impl_->wakeup();
  return id;
}

void http_client::cancel(http_request_id id) {
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (impl_->stopping || !impl_->started)
      return;
    impl_->cancels.push_back(id);
  }
  impl_->wakeup();
}

size_t http_client::active() const {
  return impl_->outstanding.load();
}

http_result http_client::fetch(http_request req,
                               const std::atomic<bool>* cancel_flag) {
  std::vector<http_request> reqs;
  reqs.push_back(std::move(req));
  auto results = fetch_all(std::move(reqs), cancel_flag);
  return std::move(results.front());
}

std::vector<http_result>
http_client::fetch_all(std::vector<http_request> reqs,
                       const std::atomic<bool>* cancel_flag,
                       std::chrono::steady_clock::time_point deadline) {
  struct state {
    std::mutex mtx;
    std::condition_variable cv;
    size_t remaining = 0;
    std::vector<http_result> results;
  };
  auto st = std::make_shared<state>();
  st->results.resize(reqs.size());
  st->remaining = reqs.size();
  std::vector<http_request_id> ids;
  ids.reserve(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    http_callbacks cb;
    // on_headers and on_data run on the client thread before on_done, and
    // the waiting thread reads results only after on_done (under mtx).
    cb.on_headers = [st, i](long, const http_headers& headers) {
      st->results[i].headers = headers;
    };
    cb.on_data = [st, i](std::string_view chunk) {
      st->results[i].body.append(chunk.data(), chunk.size());
      return true;
    };
    cb.on_done = [st, i](const http_response_summary& s) {
      std::lock_guard<std::mutex> guard{st->mtx};
      st->results[i].summary = s;
      if (--st->remaining == 0)
        st->cv.notify_all();
    };
    ids.push_back(submit(std::move(reqs[i]), std::move(cb)));
  }
  std::unique_lock<std::mutex> guard{st->mtx};
  bool cancel_sent = false;
  while (st->remaining > 0) {
    st->cv.wait_for(guard, std::chrono::milliseconds(20));
    if (cancel_sent || st->remaining == 0)
      continue;
    bool flagged = cancel_flag != nullptr
                   && cancel_flag->load(std::memory_order_relaxed);
    if (flagged || std::chrono::steady_clock::now() >= deadline) {
      cancel_sent = true;
      guard.unlock();
      for (auto id : ids)
        cancel(id);
      guard.lock();
    }
  }
  return std::move(st->results);
}

} // namespace mibyan
