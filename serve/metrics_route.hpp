// File: serve/metrics_route.hpp
//
// `GET /metrics` of `mibyan serve` (docs/metrics.md): who may scrape, the
// exposition, and the per-request HTTP series. Beast-free; used by
// serve/connection.cpp.
#pragma once

#include <string>
#include <string_view>

namespace mibyan::serve {

/// The answer to a scrape.
struct metrics_reply {
  /// 200, or 401/403 with `message` and `code` for the error shape.
  int status = 200;
  std::string body;
  std::string message, code;
};

/// Whether `host` (the bind address) is a loopback address or
/// "localhost".
bool loopback_bind(const std::string& host);

/// Answers GET /metrics. With a server key the request needs
/// `Authorization: Bearer KEY` (`authorization` is the header's value);
/// without one it is open on a loopback bind and refused (403) on any
/// other, since nothing could authorise it there.
metrics_reply metrics_response(const std::string& bind_host,
                               const std::string& key,
                               std::string_view authorization);

/// Counts one answered request (route class of `target`, status, time).
void note_request(std::string_view target, int status, double seconds);

} // namespace mibyan::serve
