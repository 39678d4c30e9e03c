#include "tools/search_backend.hpp"

#include <algorithm>

#include "config/options.hpp"
#include "tools/html/html_text.hpp"
#include "base/json.hpp"

namespace mibyan {

namespace {

std::string snippet(const std::string& body) {
  auto text = json::sanitize_utf8(body.substr(0, 200));
  for (auto& c : text)
    if (c == '\n' || c == '\r' || c == '\t')
      c = ' ';
  return text;
}

// Checks transport and HTTP status, then parses the body as a JSON object.
std::optional<json::value> parse_body(const char* name,
                                      const http_result& res,
                                      std::string& error) {
  const auto& s = res.summary;
  if (s.timed_out) {
    error = std::string{name} + " did not answer in time (" + s.error + ")";
    return std::nullopt;
  }
  if (!s.ok()) {
    error = std::string{name} + " request failed: " + s.error;
    return std::nullopt;
  }
  if (s.status >= 400 || s.status < 200) {
    error = std::string{name} + " returned HTTP " + std::to_string(s.status);
    auto body = snippet(res.body);
    if (!body.empty())
      error += ": " + body;
    if (s.status == 401 || s.status == 403)
      error += " (check the API key)";
    return std::nullopt;
  }
  auto parsed = json::parse(res.body);
  if (!parsed) {
    error = std::string{name} + " returned malformed JSON (" + parsed.error
            + ")";
    return std::nullopt;
  }
  if (!parsed.v->is_object()) {
    error = std::string{name} + " returned JSON that is not an object";
    return std::nullopt;
  }
  return std::move(parsed.v);
}

// Maps an array of result objects; `text_key` names the snippet member.
search_outcome map_results(const char* name, const json::value* results,
                           const char* text_key, int limit) {
  search_outcome out;
  if (results == nullptr || results->is_null())
    return out;  // no results at all
  if (!results->is_array()) {
    out.error = std::string{name} + " returned an unexpected JSON shape "
                "(results is not an array)";
    return out;
  }
  for (auto& item : results->as_array()) {
    if (static_cast<int>(out.hits.size()) >= limit)
      break;
    if (!item.is_object())
      continue;
    web_hit hit;
    hit.url = item.get_string("url");
    if (hit.url.empty())
      continue;
    hit.title = html_fragment_text(item.get_string("title"));
    hit.description = html_fragment_text(item.get_string(text_key));
    out.hits.push_back(std::move(hit));
  }
  return out;
}

std::string append_query(std::string base, const std::string& query) {
  base += base.find('?') == std::string::npos ? '?' : '&';
  base += query;
  return base;
}

class searxng_backend final : public search_backend {
public:
  explicit searxng_backend(std::string base) : base_(std::move(base)) {
    while (!base_.empty() && base_.back() == '/')
      base_.pop_back();
    auto q = base_.find('?');
    auto path_end = q == std::string::npos ? base_.size() : q;
    if (path_end < 7 || base_.compare(path_end - 7, 7, "/search") != 0)
      base_.insert(path_end, "/search");
  }

  const char* name() const override { return "SearXNG"; }

  http_request make_request(const std::string& query, int) const override {
    http_request req;
    req.url = append_query(base_, "q=" + url_encode(query) + "&format=json");
    req.headers.emplace_back("Accept", "application/json");
    return req;
  }

  search_outcome parse(const http_result& res, int limit) const override {
    search_outcome out;
    auto body = parse_body(name(), res, out.error);
    if (!body)
      return out;
    auto* results = body->find("results");
    if (results == nullptr) {
      out.error = "SearXNG returned an unexpected JSON shape (no results)";
      return out;
    }
    return map_results(name(), results, "content", limit);
  }

private:
  std::string base_;
};

class brave_backend final : public search_backend {
public:
  brave_backend(std::string url, std::string key)
    : url_(std::move(url)), key_(std::move(key)) {}

  const char* name() const override { return "Brave Search"; }

  http_request make_request(const std::string& query,
                            int limit) const override {
    http_request req;
    req.url = append_query(url_, "q=" + url_encode(query) + "&count="
                                   + std::to_string(std::clamp(limit, 1, 20)));
    req.headers.emplace_back("Accept", "application/json");
    req.headers.emplace_back("X-Subscription-Token", key_);
    // Never carry the key to another host.
    req.follow_redirects = false;
    return req;
  }

  search_outcome parse(const http_result& res, int limit) const override {
    search_outcome out;
    auto body = parse_body(name(), res, out.error);
    if (!body)
      return out;
    auto* web = body->find("web");
    if (web == nullptr)
      return out;  // Brave omits "web" when nothing was found
    if (!web->is_object()) {
      out.error = "Brave Search returned an unexpected JSON shape";
      return out;
    }
    return map_results(name(), web->find("results"), "description", limit);
  }

private:
  std::string url_;
  std::string key_;
};

class tavily_backend final : public search_backend {
public:
  tavily_backend(std::string url, std::string key)
    : url_(std::move(url)), key_(std::move(key)) {}

  const char* name() const override { return "Tavily"; }

  http_request make_request(const std::string& query,
                            int limit) const override {
    http_request req;
    req.method = "POST";
    req.url = url_;
    json::value body;
    body["api_key"] = key_;
    body["query"] = query;
    body["max_results"] = std::clamp(limit, 1, 20);
    req.body = body.dump();
    req.headers.emplace_back("Content-Type", "application/json");
    req.headers.emplace_back("Accept", "application/json");
    req.follow_redirects = false;
    return req;
  }

  search_outcome parse(const http_result& res, int limit) const override {
    search_outcome out;
    auto body = parse_body(name(), res, out.error);
    if (!body)
      return out;
    return map_results(name(), body->find("results"), "content", limit);
  }

private:
  std::string url_;
  std::string key_;
};

const char* const how_to_configure
  = "No web search provider configured. Set web.search_backend: searxng "
    "and web.searxng_url: <your SearXNG URL> in $MIBYAN_HOME/config.yaml, "
    "or put BRAVE_API_KEY=... (or TAVILY_API_KEY=...) in $MIBYAN_HOME/.env.";

} // namespace

std::string url_encode(const std::string& text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size() * 3);
  for (unsigned char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
        || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'
        || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 0xF];
    }
  }
  return out;
}

search_backend_choice make_search_backend(const options& cfg) {
  search_backend_choice choice;
  const auto& web = cfg.web;
  auto searxng = [&] {
    if (web.searxng_url.empty()) {
      choice.error = "web.search_backend is searxng but web.searxng_url is "
                     "empty: set it in $MIBYAN_HOME/config.yaml";
      return;
    }
    choice.backend = std::make_unique<searxng_backend>(web.searxng_url);
  };
  auto brave = [&] {
    auto key = cfg.secret("BRAVE_API_KEY");
    if (key.empty()) {
      choice.error = "web.search_backend is brave but BRAVE_API_KEY is not "
                     "set: put BRAVE_API_KEY=... in $MIBYAN_HOME/.env";
      return;
    }
    choice.backend = std::make_unique<brave_backend>(web.brave_url, key);
  };
  auto tavily = [&] {
    auto key = cfg.secret("TAVILY_API_KEY");
    if (key.empty()) {
      choice.error = "web.search_backend is tavily but TAVILY_API_KEY is "
                     "not set: put TAVILY_API_KEY=... in $MIBYAN_HOME/.env";
      return;
    }
    choice.backend = std::make_unique<tavily_backend>(web.tavily_url, key);
  };
  const auto& name = web.search_backend;
  if (name == "searxng") {
    searxng();
  } else if (name == "brave") {
    brave();
  } else if (name == "tavily") {
    tavily();
  } else if (!name.empty()) {
    choice.error = "Unknown web.search_backend '" + name
                   + "': use searxng, brave or tavily";
  } else if (!web.searxng_url.empty()) {
    searxng();
  } else if (!cfg.secret("BRAVE_API_KEY").empty()) {
    brave();
  } else if (!cfg.secret("TAVILY_API_KEY").empty()) {
    tavily();
  } else {
    choice.unconfigured = true;
    choice.error = how_to_configure;
  }
  return choice;
}

} // namespace mibyan
