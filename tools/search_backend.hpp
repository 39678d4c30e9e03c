// File: tools/search_backend.hpp
//
// The web search providers behind `web_search`. A backend only maps a query
// to an HTTP request and a response to hits; the tool does the I/O. That
// keeps backends pure and lets one HTTP client carry every provider.
//
// Backends: SearXNG (self-hosted, JSON API), Brave Search API
// (BRAVE_API_KEY), Tavily (TAVILY_API_KEY).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/http_client.hpp"

namespace mibyan {

struct options;  // config/options.hpp

/// One web search result (the session store's are search_hit).
struct web_hit {
  std::string title;
  std::string url;
  std::string description;
};

/// The hits of one search, or an error message (without the "Error
/// searching web: " prefix, which the tool adds).
struct search_outcome {
  std::vector<web_hit> hits;
  std::string error;
};

/// A search provider. Implementations are immutable after construction and
/// safe to use from several threads.
class search_backend {
public:
  virtual ~search_backend() = default;

  /// The provider's display name, e.g. "SearXNG".
  virtual const char* name() const = 0;

  /// Returns the HTTP request that searches for `query`, asking for up to
  /// `limit` results (1..100; providers with a lower maximum get theirs).
  /// Timeouts and the user agent are left for the caller to set.
  virtual http_request make_request(const std::string& query,
                                    int limit) const = 0;

  /// Maps a response to hits (at most `limit`), or to an error for HTTP
  /// errors, transport failures and malformed bodies.
  virtual search_outcome parse(const http_result& response,
                               int limit) const = 0;
};

/// The outcome of `make_search_backend`: a backend, or why there is none.
struct search_backend_choice {
  std::unique_ptr<search_backend> backend;
  /// Set when nothing is configured (the message says how to configure).
  bool unconfigured = false;
  std::string error;
};

/// Picks the backend from `cfg.web.search_backend`; when that is empty,
/// the first configured of: SearXNG (web.searxng_url set), Brave
/// (BRAVE_API_KEY), Tavily (TAVILY_API_KEY). Secrets are read with
/// `options::secret`.
search_backend_choice make_search_backend(const options& cfg);

/// Percent-encodes `text` for a URL query component (RFC 3986 unreserved
/// characters stay as they are).
std::string url_encode(const std::string& text);

} // namespace mibyan
