// File: tests/support/mcp_oauth_cases.hpp
//
// The end-to-end fixture of mcp_oauth_test: our authorization server and
// protected MCP server (tests/support/mcp_oauth_fixture.hpp), a home whose
// config.yaml names it, `mibyan mcp login` played as a browser would, the
// stored token, mibyan commands with that home, and a started MCP manager.
// Header-only; include once, after <boost/test/unit_test.hpp>.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "config/loader.hpp"
#include "config/options.hpp"
#include "tests/support/mcp_oauth_fixture.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/mcp/mcp_oauth_store.hpp"
#include "tools/mcp/mcp_session.hpp"
#include "tools/mcp/mcp_tools.hpp"

namespace mibyan::test {

using namespace std::chrono_literals;

struct login_outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
  std::string url;
};

// `mibyan mcp login secure` as a child; the test follows the printed URL
// like a browser (the authorization server redirects to the child's
// loopback listener).
inline login_outcome play_login(
  const std::string& home, const std::map<std::string, std::string>& env) {
  running_child child({mibyan_binary(), "--log-file",
                             home + "/logs/login.log", "mcp", "login",
                             "secure", "--no-browser", "--timeout", "60"},
                            env);
  login_outcome o;
  o.url = child.wait_for_line("http", 30s);
  if (!o.url.empty())
    browser_get(o.url);
  o.exit_code = child.wait(60s);
  o.out = child.out();
  o.err = child.err();
  return o;
}

struct oauth_fixture {
  oauth_test_server as;
  temp_dir home;
  std::map<std::string, std::string> env;

  oauth_fixture() {
    env["MIBYAN_HOME"] = home.path();
    env["MIBYAN_LOG_LEVEL"] = "debug";
    home.write("logs/.keep", "");
    write_config();
  }

  void write_config(const std::string& oauth_keys = "",
                    int request_timeout = 5) {
    home.write("config.yaml",
               "mcp_servers:\n"
               "  secure:\n"
               "    url: " + as.url("/mcp") + "\n"
               "    connect_timeout: 15\n"
               "    timeout: 15\n"
               "    oauth:\n"
               "      request_timeout: " + std::to_string(request_timeout)
                 + "\n" + oauth_keys);
  }

  std::string token_file() const {
    return mcp_token_path(home.path(), "secure");
  }

  mcp_oauth_record record() const {
    auto r = load_mcp_token(token_file());
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return *r;
  }

  login_outcome login() { return play_login(home.path(), env); }

  process_result mibyan(const std::vector<std::string>& args) {
    process_options po;
    po.env = env;
    po.timeout_seconds = 60;
    return run_mibyan(args, po);
  }

  /// Calls `tool` on session `s` with `args` (JSON text), 30 s deadline.
  json::value call(mcp_session& s, const std::string& tool,
                   const char* args) {
    return s.call_tool(tool, *json::parse(args).v, nullptr,
                       std::chrono::steady_clock::now() + 30s, home / "media");
  }

  options load() const {
    auto r = load_options(home.path());
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return *r;
  }
};

// An MCP manager for `cfg`, started (its servers connected or failed).
struct started_manager {
  options cfg;
  http_client http;
  mcp_manager mgr{cfg, &http};

  explicit started_manager(options o) : cfg(std::move(o)) { mgr.start(); }
  std::shared_ptr<mcp_session> find(const std::string& server) const {
    return mgr.find(server);
  }
  void shutdown() { mgr.shutdown(); }
};

inline json::value server_entry(const std::string& list_json) {
  auto doc = json::parse(list_json);
  BOOST_REQUIRE_MESSAGE(doc, list_json);
  auto servers = doc.v->find("servers");
  BOOST_REQUIRE(servers != nullptr && servers->size() == 1u);
  return servers->as_array()[0];
}


} // namespace mibyan::test
