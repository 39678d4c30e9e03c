// The web_search tool: one query to the configured search backend (see
// tools/search_backend.hpp). The backend URLs are configured by the user,
// so the SSRF guard does not apply to them.
#include "tools/core_tools.hpp"

#include <algorithm>
#include <memory>

#include "config/options.hpp"
#include "base/http_client.hpp"
#include "tools/search_backend.hpp"

namespace mibyan {

namespace {

constexpr size_t max_query_chars = 2000;

json::value search_error(const std::string& message) {
  return error_result("Error searching web: " + message);
}

class web_search_tool final : public tool {
public:
  const char* name() const override { return "web_search"; }

  const char* toolset() const override { return "web"; }

  script_policy script() const override {
    return {true, {}, "{'data': {'web': [{'url', 'title', 'description'}, ...]}}"};
  }

  std::string description() const override {
    return "Search the web. Returns up to `limit` results, each with title, "
           "url and a short description. Use web_extract to read a page.";
  }

  json::value schema() const override {
    json::value query;
    query["type"] = "string";
    query["description"] = "The search query.";
    json::value limit;
    limit["type"] = "integer";
    limit["description"] = "Maximum number of results (1-100, default 5).";
    limit["minimum"] = 1;
    limit["maximum"] = 100;
    limit["default"] = 5;
    json::value props;
    props["query"] = std::move(query);
    props["limit"] = std::move(limit);
    json::value s;
    s["type"] = "object";
    s["properties"] = std::move(props);
    json::value required = json::value::make_array();
    required.push_back("query");
    s["required"] = std::move(required);
    return s;
  }

  std::chrono::milliseconds deadline(const json::value&,
                                     const options& cfg) const override {
    return std::chrono::seconds(cfg.web.fetch_timeout + 10);
  }

  bool parallel_safe() const override { return true; }

  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto query = args.get_string("query");
    auto first = query.find_first_not_of(" \t\r\n");
    if (first == std::string::npos)
      return error_result("query must not be empty");
    query = query.substr(first, query.find_last_not_of(" \t\r\n") - first + 1);
    if (query.size() > max_query_chars)
      return error_result("query is too long (" + std::to_string(query.size())
                          + " characters; the maximum is "
                          + std::to_string(max_query_chars) + ")");
    auto limit = static_cast<int>(std::clamp<int64_t>(args.get_int("limit", 5),
                                                      1, 100));
    auto choice = make_search_backend(*ctx.cfg);
    if (!choice.backend) {
      json::value result;
      result["success"] = false;
      result["error"] = choice.error;
      return result;
    }
    auto& backend = *choice.backend;
    auto req = backend.make_request(query, limit);
    const auto& web = ctx.cfg->web;
    req.connect_timeout = std::chrono::seconds(web.connect_timeout);
    req.total_timeout = std::chrono::seconds(web.fetch_timeout);
    req.max_body_bytes = static_cast<uint64_t>(web.max_download_bytes);
    req.user_agent = web.user_agent;
    std::unique_ptr<http_client> own;
    auto* http = ctx.http;
    if (http == nullptr) {
      own = std::make_unique<http_client>();
      http = own.get();
    }
    std::vector<http_request> reqs;
    reqs.push_back(std::move(req));
    // A default-constructed deadline means "none".
    auto deadline = ctx.deadline == std::chrono::steady_clock::time_point{}
                      ? std::chrono::steady_clock::time_point::max()
                      : ctx.deadline;
    auto results = http->fetch_all(std::move(reqs), ctx.cancelled, deadline);
    auto& res = results.front();
    if (res.summary.cancelled)
      return error_result("web_search was interrupted before "
                          + std::string{backend.name()} + " answered");
    if (res.summary.capped)
      return search_error(std::string{backend.name()} + "'s answer is larger than "
                          + std::to_string(web.max_download_bytes)
                          + " bytes (web.max_download_bytes); raise it or ask "
                            "for fewer results");
    auto outcome = backend.parse(res, limit);
    if (!outcome.error.empty())
      return search_error(outcome.error);
    json::value web_hits = json::value::make_array();
    int position = 0;
    for (auto& hit : outcome.hits) {
      json::value item;
      item["title"] = std::move(hit.title);
      item["url"] = std::move(hit.url);
      item["description"] = std::move(hit.description);
      item["position"] = ++position;
      web_hits.push_back(std::move(item));
    }
    json::value data;
    data["web"] = std::move(web_hits);
    json::value result;
    result["success"] = true;
    result["data"] = std::move(data);
    return result;
  }
};

} // namespace

std::unique_ptr<tool> make_web_search_tool() {
  return std::make_unique<web_search_tool>();
}

} // namespace mibyan
