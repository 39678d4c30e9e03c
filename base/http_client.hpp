// File: base/http_client.hpp
//
// The process-wide HTTP client: one thread drives a libcurl multi handle
// (`curl_multi_poll` + `curl_multi_wakeup`), so any number of transfers run
// concurrently without blocking a CAF scheduler thread or a tool worker.
// Web tools use the blocking `fetch`/`fetch_all` from their worker threads;
// streaming consumers (LLM provider SSE) use `submit` with callbacks.
//
// No CAF here: the client only knows callbacks. Actors forward results into
// their mailboxes from those callbacks with `anon_send`.
//
// Example (blocking, from a tool worker thread):
//
//   http_request req;
//   req.url = "https://example.org/";
//   auto res = ctx.http->fetch(std::move(req), ctx.cancelled);
//   if (!res.summary.ok()) return error_result(res.summary.error);
#pragma once

#include "base/status.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mibyan {

/// Identifies one submitted request. Never 0.
using http_request_id = uint64_t;

/// Response header fields in arrival order, names as sent by the server.
using http_headers = std::vector<std::pair<std::string, std::string>>;

/// Returns the value of the first header called `name` (ASCII
/// case-insensitive), or nullptr.
const std::string* find_header(const http_headers& headers,
                               std::string_view name);

/// Decides whether a connection may be opened. Called on the client thread
/// for every new connection (the first one and each one a redirect opens),
/// after DNS resolution and before `connect`, with the URL being fetched and
/// the numeric address about to be dialled ("93.184.215.14", "::1").
/// Returns ok to allow, or a failure whose message is the reason for
/// refusing; the transfer then fails with `blocked` set and that reason as
/// its error.
using http_connect_check = std::function<status(
  const std::string& url, const std::string& ip)>;

/// One HTTP request. Plain data; `submit` takes it by value.
struct http_request {
  /// "GET", "POST", "HEAD", "PUT", "DELETE", ... (upper case).
  std::string method = "GET";
  /// Absolute http:// or https:// URL. Other schemes fail to fetch.
  std::string url;
  /// Request headers ("Name", "value"). A header with an empty value is sent
  /// as "Name;" (an empty header), as curl does.
  std::vector<std::pair<std::string, std::string>> headers;
  /// Request body (sent for any method when non-empty).
  std::string body;
  /// Limit for DNS + TCP + TLS setup. Zero means libcurl's default (300 s).
  std::chrono::milliseconds connect_timeout{10000};
  /// Limit for the whole transfer. Zero means none (streams).
  std::chrono::milliseconds total_timeout{30000};
  /// The transfer fails when no byte (header or body) arrives for this long.
  /// Zero means none. Used as the stale-stream timer for SSE.
  std::chrono::milliseconds idle_timeout{0};
  /// Body bytes (after decompression) accepted before the transfer is
  /// stopped with `capped` set; the first `max_body_bytes` are delivered.
  /// Zero means unlimited.
  uint64_t max_body_bytes = 0;
  /// Follow 3xx redirects, at most `max_redirects` of them.
  bool follow_redirects = true;
  int max_redirects = 5;
  /// Send Accept-Encoding for every encoding libcurl can decode (gzip,
  /// deflate, br, zstd) and decode transparently.
  bool accept_compressed = true;
  /// User-Agent header ("" sends none).
  std::string user_agent;
  /// Optional guard consulted before every connection (SSRF protection).
  /// Requests that carry a check never use a proxy from the environment, so
  /// that the check sees the real destination.
  http_connect_check connect_check;
};

/// How a transfer ended. Delivered exactly once per request.
struct http_response_summary {
  http_request_id id = 0;
  /// Final HTTP status, 0 when no response arrived.
  long status = 0;
  /// Empty on success (any HTTP status counts as success here); otherwise
  /// what went wrong, e.g. "Timeout was reached", "cancelled", "shutdown",
  /// "response body exceeds 1024 bytes" or the connect check's reason.
  std::string error;
  /// Body bytes received (after decompression).
  uint64_t bytes = 0;
  /// The URL of the last request made (after redirects).
  std::string final_url;
  /// Content-Type of the final response ("" when absent).
  std::string content_type;
  /// Redirects followed.
  long redirects = 0;
  /// Why the transfer stopped early, if it did.
  bool cancelled = false;
  bool capped = false;
  bool timed_out = false;
  bool blocked = false;

  /// True when a complete response arrived (whatever its status).
  bool ok() const { return error.empty(); }

  /// The outcome as the project's error type: cancelled, timeout,
  /// resource_exhausted (capped), permission_denied (blocked by the connect
  /// check) or unavailable (a network failure, worth a retry).
  mibyan::status get_status() const {
    if (ok())
      return {};
    auto code = cancelled   ? status_code::cancelled
                : timed_out ? status_code::timeout
                : capped    ? status_code::resource_exhausted
                : blocked   ? status_code::permission_denied
                            : status_code::unavailable;
    return mibyan::status::failure(code, error);
  }
};

/// Streaming callbacks. All are optional and are invoked on the client
/// thread, one request's calls strictly in order. They must be quick (they
/// stall every other transfer while they run), must not block, and must be
/// safe to run concurrently with the submitting thread. They may call
/// `submit` and `cancel`, but must not destroy the client.
struct http_callbacks {
  /// Called once, with the final response's status and headers (those of
  /// interim 1xx responses and of followed redirects are not reported),
  /// before the first `on_data`. Not called when no response arrived.
  std::function<void(long status, const http_headers& headers)> on_headers;
  /// Called for each chunk of the body. Returning false stops the transfer
  /// (summary error "aborted by receiver").
  std::function<bool(std::string_view chunk)> on_data;
  /// Called exactly once when the transfer has ended for any reason.
  std::function<void(const http_response_summary& summary)> on_done;
};

/// The outcome of a blocking fetch: summary, headers and whole body (up to
/// `max_body_bytes`; a capped body holds the bytes received until the cap).
struct http_result {
  http_response_summary summary;
  http_headers headers;
  std::string body;
};

/// See the file comment.
///
/// Thread safety: all public member functions may be called from any thread
/// except the client thread itself (i.e. not from inside a callback), with
/// the exception of `submit` and `cancel`, which callbacks may call too.
class http_client {
public:
  // -- constructors, destructors, and assignment operators -------------------

  /// Cheap: libcurl is loaded and the client thread started by the first
  /// request (base/curl_library.hpp). When libcurl cannot be loaded, every
  /// request ends with that error in `summary.error`.
  http_client();

  /// Stops the thread. Requests still pending or in flight end with error
  /// "shutdown" (their `on_done` runs before the destructor returns).
  virtual ~http_client();

  http_client(const http_client&) = delete;
  http_client& operator=(const http_client&) = delete;

  // -- asynchronous interface -------------------------------------------------

  /// Queues `req` and returns its id at once. The transfer starts on the
  /// client thread; `cb.on_done` reports the outcome (also for requests that
  /// fail immediately, e.g. on a malformed URL). Virtual with `cancel`, so
  /// that actor tests can script a provider's transfers (a subclass then
  /// owes the same contract, callbacks included).
  virtual http_request_id submit(http_request req, http_callbacks cb);

  /// Stops request `id` if it has not ended yet; its `on_done` then reports
  /// `cancelled` with error "cancelled". Unknown or finished ids are ignored.
  virtual void cancel(http_request_id id);

  // -- blocking interface (worker threads only) -------------------------------

  /// Runs `req` and waits for the whole response. When `cancel_flag` becomes
  /// true the transfer is cancelled and the result reports `cancelled`.
  /// Must not be called from a callback (it would deadlock).
  http_result fetch(http_request req,
                    const std::atomic<bool>* cancel_flag = nullptr);

  /// Runs all `reqs` concurrently and waits for all of them. Results come in
  /// the order of `reqs`. Cancellation as for `fetch`; additionally, any
  /// request still running at `deadline` is cancelled.
  std::vector<http_result>
  fetch_all(std::vector<http_request> reqs,
            const std::atomic<bool>* cancel_flag = nullptr,
            std::chrono::steady_clock::time_point deadline
            = std::chrono::steady_clock::time_point::max());

  // -- observers --------------------------------------------------------------

  /// Number of requests queued or in flight.
  size_t active() const;

private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

} // namespace mibyan
