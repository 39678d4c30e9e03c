// The web_extract tool: fetches up to five pages concurrently through the
// shared HTTP client and returns their readable text.
//
// Safety: every URL passes validate_url (http/https, no credentials, no
// embedded API keys) and, unless security.allow_private_urls is set, the
// SSRF guard: internal IP literals and host names are refused up front, and
// every connection (including those opened by redirects) is checked against
// the resolved address by the HTTP client's connect hook.
//
// Pages longer than `char_limit` are cut to a head + tail window; the whole
// text goes to $MIBYAN_HOME/cache/web/<hash>.txt (0600) for read_file.
#include "tools/core_tools.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/strings.hpp"
#include "config/options.hpp"
#include "tools/html/html_text.hpp"
#include "base/private_file.hpp"
#include "base/http_client.hpp"
#include "base/url_guard.hpp"

namespace mibyan {

namespace {

constexpr size_t max_urls = 5;
constexpr int64_t min_char_limit = 2000;
constexpr int64_t max_char_limit = 500000;

// -- content types ------------------------------------------------------------

enum class body_kind { html, text, binary };

// Returns the media type ("text/html") of a Content-Type value.
std::string media_type(const std::string& content_type) {
  return strings::lower(
    strings::trim(content_type.substr(0, content_type.find(';'))));
}

// Returns the lower-case charset parameter, or "".
std::string charset_of(const std::string& content_type) {
  auto ct = strings::lower(content_type);
  auto pos = ct.find("charset=");
  if (pos == std::string::npos)
    return {};
  auto v = ct.substr(pos + 8);
  v = v.substr(0, v.find(';'));
  v = strings::trim(v);
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\''))
    v = v.substr(1, v.size() - 2);
  return v;
}

bool looks_binary(const std::string& body) {
  auto n = std::min<size_t>(body.size(), 8192);
  return std::memchr(body.data(), '\0', n) != nullptr;
}

body_kind classify(const std::string& mime, const std::string& body) {
  if (mime == "text/html" || mime == "application/xhtml+xml")
    return body_kind::html;
  auto ends_with = [&](const char* suffix) {
    auto n = std::strlen(suffix);
    return mime.size() >= n && mime.compare(mime.size() - n, n, suffix) == 0;
  };
  if (mime.empty()) {
    if (looks_binary(body))
      return body_kind::binary;
    auto head = strings::lower(body.substr(0, 1024));
    auto start = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
    if (start != std::string::npos
        && (head.compare(start, 9, "<!doctype") == 0
            || head.compare(start, 5, "<html") == 0
            || head.find("<body") != std::string::npos))
      return body_kind::html;
    return body_kind::text;
  }
  if (mime.compare(0, 5, "text/") == 0 || mime == "application/json"
      || ends_with("+json") || mime == "application/xml" || ends_with("+xml")
      || mime == "application/javascript" || mime == "application/x-ndjson"
      || mime == "application/yaml" || mime == "application/x-yaml"
      || mime == "application/toml" || mime == "application/x-sh")
    return looks_binary(body) ? body_kind::binary : body_kind::text;
  return body_kind::binary;
}

std::string latin1_to_utf8(const std::string& s) {
  std::string out;
  out.reserve(s.size() + s.size() / 8);
  for (unsigned char c : s) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

const char* reason_phrase(long status) {
  switch (status) {
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 410: return "Gone";
    case 429: return "Too Many Requests";
    case 451: return "Unavailable For Legal Reasons";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return nullptr;
  }
}

// -- truncation ---------------------------------------------------------------

uint64_t fnv1a(std::string_view data, uint64_t h = 14695981039346656037ull) {
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex64(uint64_t x) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i, x >>= 4)
    out[static_cast<size_t>(i)] = digits[x & 0xF];
  return out;
}

// Writes `text` to $home/cache/web/<hash>.txt. Returns the path, or "" and
// sets `error`.
std::string save_full_text(const std::string& home, const std::string& url,
                           const std::string& text, std::string& error) {
  if (home.empty()) {
    error = "$MIBYAN_HOME is not known";
    return {};
  }
  auto dir = home + "/cache/web";
  if (auto made = make_private_dirs(dir); !made.ok()) {
    error = made.error;
    return {};
  }
  auto hash = fnv1a(text, fnv1a(url + "\n"));
  auto path = dir + "/" + hex64(hash) + ".txt";
  if (auto written = write_private_file(path, text); !written.ok()) {
    error = written.error;
    return {};
  }
  return path;
}

bool utf8_continuation(char c) {
  return (static_cast<unsigned char>(c) & 0xC0) == 0x80;
}

// Cuts `text` to at most `limit` characters: a head and a tail window, the
// omission marker and a footer naming the saved full text.
std::string window(const std::string& text, size_t limit,
                   const std::string& home, const std::string& url) {
  std::string error;
  auto path = save_full_text(home, url, text, error);
  std::string footer = "\n\n[Page truncated: " + std::to_string(text.size())
                       + " characters in total, showing the beginning and "
                         "the end. ";
  if (!path.empty())
    footer += "Full text saved to " + path
              + "; read the rest with read_file (offset/limit).]";
  else
    footer += "The full text could not be saved (" + error + ").]";
  std::string marker_template = "\n\n[... " + std::to_string(text.size())
                                + " characters omitted ...]\n\n";
  auto overhead = footer.size() + marker_template.size();
  auto budget = limit > overhead + 200 ? limit - overhead : size_t{200};
  auto head_len = budget * 3 / 4;
  auto tail_len = budget - head_len;
  // Cut the head at a line break near its end, else at a UTF-8 boundary.
  auto head_end = head_len;
  auto nl = text.rfind('\n', head_len);
  if (nl != std::string::npos && nl >= head_len - head_len / 5)
    head_end = nl;
  while (head_end > 0 && utf8_continuation(text[head_end]))
    --head_end;
  auto tail_begin = text.size() - tail_len;
  nl = text.find('\n', tail_begin);
  if (nl != std::string::npos && nl <= tail_begin + tail_len / 5)
    tail_begin = nl + 1;
  while (tail_begin < text.size() && utf8_continuation(text[tail_begin]))
    ++tail_begin;
  auto omitted = tail_begin - head_end;
  std::string out = text.substr(0, head_end);
  out += "\n\n[... " + std::to_string(omitted) + " characters omitted ...]\n\n";
  out += text.substr(tail_begin);
  out += footer;
  return out;
}

// -- the tool -----------------------------------------------------------------

struct page {
  std::string url;
  std::string title;
  std::string content;
  std::string error;
  bool blocked = false;
};

json::value to_json(page& p) {
  json::value item;
  item["url"] = std::move(p.url);
  item["title"] = std::move(p.title);
  item["content"] = std::move(p.content);
  if (p.error.empty())
    item["error"] = nullptr;
  else
    item["error"] = std::move(p.error);
  if (p.blocked)
    item["blocked_by_policy"] = true;
  return item;
}

class web_extract_tool final : public tool {
public:
  const char* name() const override { return "web_extract"; }

  const char* toolset() const override { return "web"; }

  script_policy script() const override {
    return {true, {}, "{'results': [{'url', 'title', 'content', 'error'}, ...]}"};
  }

  std::string description() const override {
    return "Fetch up to 5 web pages and return their readable text "
           "(Markdown-like: headings, lists, links, tables, code). HTML, "
           "plain text and JSON only. Long pages are cut to `char_limit` "
           "characters (head and tail); the footer then names a file with "
           "the full text that read_file can page through.";
  }

  json::value schema() const override {
    json::value item;
    item["type"] = "string";
    json::value urls;
    urls["type"] = "array";
    urls["items"] = std::move(item);
    urls["minItems"] = 1;
    urls["maxItems"] = static_cast<int>(max_urls);
    urls["description"] = "The http:// or https:// URLs to read (1-5).";
    json::value limit;
    limit["type"] = "integer";
    limit["minimum"] = static_cast<int>(min_char_limit);
    limit["description"] = "Characters of text per page (at least 2000; "
                           "default 15000, at most 500000).";
    json::value props;
    props["urls"] = std::move(urls);
    props["char_limit"] = std::move(limit);
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    json::value required = json::value::make_array();
    required.push_back("urls");
    s["required"] = std::move(required);
    return s;
  }

  std::chrono::milliseconds deadline(const json::value&,
                                     const options& cfg) const override {
    return std::chrono::seconds(cfg.web.fetch_timeout + 15);
  }

  bool parallel_safe() const override { return true; }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    const auto& cfg = *ctx.cfg;
    auto* urls = args.find("urls");
    if (urls == nullptr || !urls->is_array())
      return error_result("urls must be an array of 1 to 5 URL strings");
    const auto& list = urls->as_array();
    if (list.empty())
      return error_result("urls is empty: give 1 to 5 http(s) URLs");
    if (list.size() > max_urls)
      return error_result("web_extract reads at most 5 URLs per call, got "
                          + std::to_string(list.size())
                          + "; split them into several calls");
    auto limit = static_cast<size_t>(std::clamp<int64_t>(
      args.get_int("char_limit", cfg.web.extract_char_limit), min_char_limit,
      max_char_limit));
    url_policy policy;
    policy.allow_private = cfg.security.allow_private_urls;
    policy.allowed_addresses = cfg.security.allowed_private_addresses;
    std::vector<page> pages(list.size());
    std::vector<http_request> reqs;
    std::vector<size_t> index;  // reqs[i] fetches pages[index[i]]
    for (size_t i = 0; i < list.size(); ++i) {
      auto& p = pages[i];
      if (!list[i].is_string()) {
        p.error = "not a string";
        continue;
      }
      p.url = strings::trim(list[i].as_string());
      if (p.url.size() > 8192) {
        p.url = p.url.substr(0, 200) + "...";
        p.error = "URL is longer than 8192 characters";
        continue;
      }
      auto valid = validate_url(p.url);
      if (!valid) {
        p.error = valid.error;
        continue;
      }
      if (auto allowed = policy.check_host(*valid); !allowed.ok()) {
        p.error = allowed.error;
        p.blocked = true;
        continue;
      }
      reqs.push_back(make_request(p.url, cfg, policy));
      index.push_back(i);
    }
    if (!reqs.empty()) {
      std::unique_ptr<http_client> own;
      auto* http = ctx.http;
      if (http == nullptr) {
        own = std::make_unique<http_client>();
        http = own.get();
      }
      auto deadline = ctx.deadline == std::chrono::steady_clock::time_point{}
                        ? std::chrono::steady_clock::time_point::max()
                        : ctx.deadline;
      auto results = http->fetch_all(std::move(reqs), ctx.cancelled,
                                     deadline);
      for (size_t k = 0; k < results.size(); ++k)
        convert(results[k], pages[index[k]], limit, ctx, cfg);
    }
    bool all_failed = true;
    json::value items = json::value::make_array();
    for (auto& p : pages) {
      all_failed = all_failed && !p.error.empty();
      items.push_back(to_json(p));
    }
    json::value result;
    if (ctx.is_cancelled())
      result["error"] = "web_extract was interrupted";
    else if (all_failed)
      result["error"] = "Content was inaccessible or not found";
    result["results"] = std::move(items);
    return result;
  }

private:
  static http_request make_request(const std::string& url,
                                   const options& cfg,
                                   const url_policy& policy) {
    const auto& web = cfg.web;
    http_request req;
    req.url = url;
    req.connect_timeout = std::chrono::seconds(web.connect_timeout);
    req.total_timeout = std::chrono::seconds(web.fetch_timeout);
    req.max_body_bytes = static_cast<uint64_t>(web.max_download_bytes);
    req.follow_redirects = web.max_redirects > 0;
    req.max_redirects = static_cast<int>(web.max_redirects);
    req.accept_compressed = true;
    req.user_agent = web.user_agent;
    req.headers.emplace_back("Accept",
                             "text/html,application/xhtml+xml,text/plain;"
                             "q=0.9,application/json;q=0.9,*/*;q=0.5");
    req.headers.emplace_back("Accept-Language", "en;q=0.9,*;q=0.5");
    if (!policy.allow_private) {
      req.connect_check = [policy](const std::string& hop,
                                   const std::string& ip) -> status {
        if (auto allowed = policy.check_address(ip); !allowed.ok())
          return allowed;
        // Redirect targets get the host-name check too.
        auto valid = validate_url(hop);
        if (valid)
          return policy.check_host(*valid);
        return {};
      };
    }
    return req;
  }

  static void convert(http_result& res, page& p, size_t limit,
                      const tool_context& ctx, const options& cfg) {
    const auto& s = res.summary;
    if (s.blocked) {
      p.error = s.error;
      p.blocked = true;
      return;
    }
    if (s.cancelled) {
      p.error = "Cancelled before the page was fetched (the call was "
                "interrupted or reached its deadline)";
      return;
    }
    if (s.timed_out) {
      p.error = "Timed out after " + std::to_string(cfg.web.fetch_timeout)
                + " s fetching the page (" + s.error + ")";
      return;
    }
    if (!s.ok() && !s.capped) {
      p.error = "Could not fetch the page: " + s.error;
      return;
    }
    if (s.status >= 400) {
      p.error = "HTTP " + std::to_string(s.status);
      if (auto phrase = reason_phrase(s.status))
        p.error += std::string{" "} + phrase;
      p.error += " fetching the page";
      return;
    }
    if (s.status >= 300) {
      p.error = "HTTP " + std::to_string(s.status)
                + " redirect was not followed (more than "
                + std::to_string(cfg.web.max_redirects) + " redirects?)";
      return;
    }
    auto mime = media_type(s.content_type);
    auto kind = classify(mime, res.body);
    if (kind == body_kind::binary) {
      p.error = "Unsupported content type '"
                + (mime.empty() ? std::string{"binary data"} : mime)
                + "': web_extract reads HTML, plain-text and JSON pages "
                  "only";
      return;
    }
    auto charset = charset_of(s.content_type);
    if (charset == "iso-8859-1" || charset == "latin1"
        || charset == "windows-1252" || charset == "latin-1")
      res.body = latin1_to_utf8(res.body);
    std::string text;
    if (kind == body_kind::html) {
      auto doc = html_to_text(res.body,
                              s.final_url.empty() ? p.url : s.final_url);
      p.title = json::sanitize_utf8(doc.title);
      text = json::sanitize_utf8(doc.text);
    } else {
      text = json::sanitize_utf8(res.body);
      while (!text.empty() && (text.back() == '\n' || text.back() == '\r'
                               || text.back() == ' '))
        text.pop_back();
    }
    res.body.clear();
    res.body.shrink_to_fit();
    if (strings::trim(text).empty()) {
      p.error = "The page has no readable text content";
      return;
    }
    if (s.capped)
      text += "\n\n[Download stopped at " + std::to_string(s.bytes)
              + " bytes (web.max_download_bytes); the rest of the page was "
                "not fetched.]";
    if (text.size() > limit) {
      auto home = !ctx.home.empty() ? ctx.home : cfg.home;
      text = window(text, limit, home, p.url);
    }
    p.content = std::move(text);
  }
};

} // namespace

std::unique_ptr<tool> make_web_extract_tool() {
  return std::make_unique<web_extract_tool>();
}

} // namespace mibyan
