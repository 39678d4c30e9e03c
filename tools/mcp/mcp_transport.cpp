#include "tools/mcp/mcp_transport.hpp"

#include "base/env_filter.hpp"
#include "config/mcp_config.hpp"
#include "config/options.hpp"
#include "tools/mcp/mcp_http.hpp"
#include "tools/mcp/mcp_oauth_client.hpp"
#include "tools/mcp/mcp_stdio.hpp"

namespace mibyan {

std::vector<std::string>
mcp_stdio_environment(const std::vector<std::string>& host,
                      const std::vector<std::pair<std::string, std::string>>&
                        extra) {
  static const char* const keep[] = {"PATH", "HOME",  "USER",  "LANG",
                                     "LC_ALL", "TERM", "SHELL", "TMPDIR"};
  std::vector<std::string> out;
  for (auto& e : host) {
    auto eq = e.find('=');
    if (eq == std::string::npos)
      continue;
    auto name = e.substr(0, eq);
    bool ok = name.rfind("XDG_", 0) == 0;
    for (auto k : keep)
      ok = ok || name == k;
    if (ok)
      out.push_back(e);
  }
  for (auto& [k, v] : extra) {
    auto prefix = k + "=";
    out.erase(std::remove_if(out.begin(), out.end(),
                             [&](const std::string& e) {
                               return e.rfind(prefix, 0) == 0;
                             }),
              out.end());
    out.push_back(prefix + v);
  }
  return out;
}

std::unique_ptr<mcp_transport> make_mcp_transport(const mcp_server_options& s,
                                                  const options& cfg,
                                                  http_client* http) {
  if (s.transport == "stdio") {
    mcp_stdio_transport::settings st;
    st.server = s.name;
    st.argv.push_back(s.command);
    for (auto& a : s.args)
      st.argv.push_back(resolve_mcp_refs(a, cfg));
    std::vector<std::pair<std::string, std::string>> env;
    for (auto& [k, v] : s.env)
      env.emplace_back(k, resolve_mcp_refs(v, cfg));
    st.env = mcp_stdio_environment(current_environment(), env);
    st.cwd = s.cwd;
    if (!cfg.home.empty())
      st.stderr_log = cfg.home + "/logs/mcp-stderr.log";
    st.max_message_bytes = static_cast<size_t>(s.max_message_bytes);
    return std::make_unique<mcp_stdio_transport>(std::move(st));
  }
  if (http == nullptr)
    return nullptr;
  mcp_http_settings hs;
  hs.server = s.name;
  hs.url = resolve_mcp_refs(s.url, cfg);
  for (auto& [k, v] : s.headers)
    hs.headers.emplace_back(k, resolve_mcp_refs(v, cfg));
  hs.sse = s.transport == "sse";
  hs.connect_timeout = std::chrono::seconds{s.connect_timeout};
  hs.max_message_bytes = static_cast<size_t>(s.max_message_bytes);
  if (mcp_oauth_applies(s)) {
    // OAuth (docs/mcp.md, "Authorization"): one client per server and
    // process, shared by its connections; it outlives them.
    auto oauth = mcp_oauth_for(s, cfg);
    hs.auth.bearer = [oauth] { return oauth->bearer(); };
    hs.auth.on_unauthorized = [oauth](int status, const std::string& h) {
      return oauth->on_unauthorized(status, h);
    };
  }
  return make_mcp_http_transport(std::move(hs), *http);
}

} // namespace mibyan
