// File: tests/support/mcp_serve_fixture.hpp
//
// `mibyan mcp serve` for mcp_serve_test: the peers it needs (node, the MCP
// TypeScript SDK and the Inspector in tests/node), a stdio server on pipes
// the test holds, and a fixture that starts the HTTP server and drives the
// SDK client (tests/node/mcp_serve_client.mjs), the Inspector CLI and raw
// HTTP. Header-only; include once, after <boost/test/unit_test.hpp>. Waits
// are bounded polls.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/subprocess.hpp"
#include "tests/support/missing_peer.hpp"
#include "tests/support/serve_fixture.hpp"
#include "tests/support/wait_until.hpp"

namespace mibyan::test::mcp_serving {

using namespace std::chrono;
using namespace mibyan::test::serving;
using mibyan::test::wait_until; // for the suites that use this namespace

inline std::string node_dir() {
  return test::test_source_dir() + "/node";
}

inline std::string inspector_entry() {
  return node_dir()
         + "/node_modules/@modelcontextprotocol/inspector/clients/launcher/"
           "build/index.js";
}

// Exits 77 (skipped) or fails when node or the npm packages are missing
// (test::exit_missing_peer): the suite's global fixture.
struct npm_presence {
  npm_presence() {
    std::string missing;
    if (find_executable("node").empty())
      missing = "node is not on PATH";
    else if (!std::filesystem::exists(
               node_dir() + "/node_modules/@modelcontextprotocol/sdk/"
                            "package.json"))
      missing = "@modelcontextprotocol/sdk is not installed in tests/node";
    else if (!std::filesystem::exists(inspector_entry()))
      missing = "@modelcontextprotocol/inspector is not installed in "
                "tests/node";
    if (missing.empty())
      return;
    test::exit_missing_peer(
      missing + "; run scripts/install-test-deps.sh (docs/testing.md)");
  }
};

inline const std::string json_headers
  = "Content-Type: application/json\r\n"
    "Accept: application/json, text/event-stream\r\n";

inline const std::string init_body
  = R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}})";

// Whether a process whose command line matches `pattern` runs (pgrep -f).
inline bool running(const std::string& pattern) {
  test::process_options o;
  o.timeout_seconds = 30;
  return test::run_process({"pgrep", "-f", pattern}, o).exit_code == 0;
}

inline std::string header_value(const std::string& response,
                         const std::string& name) {
  auto lower = [](std::string s) {
    for (auto& c : s)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  auto l = lower(response);
  auto i = l.find("\r\n" + lower(name) + ":");
  if (i == std::string::npos)
    return {};
  auto b = response.find_first_not_of(' ', i + name.size() + 3);
  return response.substr(b, response.find("\r\n", b) - b);
}

// `mibyan mcp serve` on pipes we hold: stdin stays open until finish().
struct stdio_server {
  int pid = -1;
  int in = -1;
  int out_fd = -1;
  std::string out;

  stdio_server(const std::string& home, const std::string& cwd,
               std::vector<std::string> extra = {}) {
    std::vector<std::string> argv{"mibyan", "mcp", "serve"};
    for (auto& a : extra)
      argv.push_back(a);
    std::vector<char*> args;
    for (auto& a : argv)
      args.push_back(a.data());
    args.push_back(nullptr);
    int a[2], b[2];
    BOOST_REQUIRE(::pipe(a) == 0 && ::pipe(b) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::setenv("MIBYAN_HOME", home.c_str(), 1);
      if (::chdir(cwd.c_str()) != 0)
        ::_exit(126);
      ::dup2(a[0], 0);
      ::dup2(b[1], 1);
      ::close(a[1]);
      ::close(b[0]);
      ::execv(test::mibyan_binary().c_str(), args.data());
      ::_exit(127);
    }
    ::close(a[0]);
    ::close(b[1]);
    in = a[1];
    out_fd = b[0];
  }

  ~stdio_server() {
    if (in >= 0)
      ::close(in);
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out_fd >= 0)
      ::close(out_fd);
  }

  void send(const std::string& text) {
    BOOST_REQUIRE(::write(in, text.data(), text.size())
                  == static_cast<ssize_t>(text.size()));
  }

  // Reads stdout until `needle` shows (true) or 60 s pass or it closes.
  bool wait_for(const std::string& needle) {
    auto end = steady_clock::now() + seconds(60);
    while (!contains(out, needle) && steady_clock::now() < end) {
      pollfd p{out_fd, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char buf[65536];
      auto n = ::read(out_fd, buf, sizeof buf);
      if (n <= 0)
        return contains(out, needle);
      out.append(buf, static_cast<size_t>(n));
    }
    return contains(out, needle);
  }

  // Closes stdin and waits for the exit (60 s); the exit code, or -1.
  int finish() {
    ::close(in);
    in = -1;
    int status = 0;
    bool exited = wait_until([&] {
      return ::waitpid(pid, &status, WNOHANG) == pid;
    });
    if (!exited)
      return -1;
    pid = -1;
    char buf[65536];
    for (;;) { // the rest of stdout (its writer end is closed now)
      auto n = ::read(out_fd, buf, sizeof buf);
      if (n <= 0)
        break;
      out.append(buf, static_cast<size_t>(n));
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

struct mcp_fixture {
  test::temp_dir home;
  test::temp_dir work;
  test::temp_dir inspector_home;
  std::string tool_file;
  std::string key;

  mcp_fixture() {
    tool_file = work.write("tool.txt", "line MCP-SERVE-MARKER\n");
    // The kernel's working directory is the test's scratch directory.
    home.write("config.yaml", "approvals:\n  timeout: 60\n");
  }

  std::unique_ptr<serve_process> start_http(std::vector<std::string> extra
                                            = {}) {
    std::vector<std::string> args{test::mibyan_binary(), "mcp",   "serve",
                                  "--listen", "127.0.0.1:0", "--page-size",
                                  "4"};
    args.insert(args.end(), extra.begin(), extra.end());
    return start_child(std::move(args), home.path(), key, work.path(),
                       home / "mcp-serve.err",
                       "mibyan mcp serve listening on http://127.0.0.1:");
  }

  std::string url(const serve_process& sp) {
    return "http://127.0.0.1:" + std::to_string(sp.port) + "/mcp";
  }

  // One scenario of tests/node/mcp_serve_client.mjs.
  void sdk(const std::string& scenario, const std::string& transport,
           const serve_process* sp = nullptr) {
    test::process_options o;
    o.env["MIBYAN_HOME"] = home.path();
    o.env["WORK_DIR"] = work.path();
    o.env["TOOL_FILE"] = tool_file;
    o.env["MIBYAN_BIN"] = test::mibyan_binary();
    o.env["SERVE_ARGS"] = "--page-size 4";
    if (sp != nullptr)
      o.env["MCP_URL"] = url(*sp);
    if (!key.empty())
      o.env["MCP_KEY"] = key;
    o.unset = {"MIBYAN_SERVER_KEY", "MIBYAN_MCP_SERVE_KEY", "MIBYAN_LOG_LEVEL"};
    o.cwd = work.path();
    o.timeout_seconds = 240;
    auto r = test::run_process(
      {"node", node_dir() + "/mcp_serve_client.mjs", scenario, transport}, o);
    BOOST_CHECK_MESSAGE(r.exit_code == 0 && contains(r.out, "OK " + scenario),
                        "node " << scenario << " over " << transport
                                << " failed (" << r.exit_code << "): "
                                << r.out << r.err << "\nserver log:\n"
                                << test::slurp(home / "logs/mcp-serve.log")
                                << (sp ? test::slurp(sp->err_path) : ""));
  }

  // The Inspector CLI with `target` (a command or URL) and `args`; the
  // parsed JSON it prints.
  json::value inspector(const std::vector<std::string>& target,
                        const std::vector<std::string>& args) {
    test::process_options o;
    // The Inspector's own home (it keeps a catalog there); the server it
    // starts inherits it, so it must not contain the working directory.
    o.env["HOME"] = inspector_home.path();
    o.env["MCP_CATALOG_PATH"] = inspector_home / "catalog.json";
    o.env["MIBYAN_HOME"] = home.path();
    o.unset = {"MIBYAN_SERVER_KEY", "MIBYAN_MCP_SERVE_KEY", "MIBYAN_LOG_LEVEL"};
    o.cwd = work.path();
    o.timeout_seconds = 180;
    std::vector<std::string> argv{"node", inspector_entry(), "--cli"};
    argv.insert(argv.end(), target.begin(), target.end());
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = test::run_process(argv, o);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "inspector failed ("
                                              << r.exit_code << "): " << r.out
                                              << r.err);
    auto parsed = json::parse(r.out);
    BOOST_REQUIRE_MESSAGE(parsed, "inspector printed no JSON: " << r.out);
    return *parsed.v;
  }

  void inspector_checks(const std::vector<std::string>& target) {
    auto list = inspector(target, {"--method", "tools/list"});
    std::vector<std::string> names;
    for (auto& t : list.find("tools")->as_array())
      names.push_back(t.get_string("name"));
    // The CLI follows nextCursor: every page (4 tools each) is there.
    for (auto n : {"read_file", "execute_code", "terminal", "write_file"})
      BOOST_CHECK_MESSAGE(std::find(names.begin(), names.end(), n)
                            != names.end(),
                          n << " listed");
    BOOST_CHECK_GT(names.size(), 8u);
    auto rf = inspector(target, {"--method", "tools/call", "--tool-name",
                                 "read_file", "--tool-arg",
                                 "path=" + tool_file});
    BOOST_CHECK(!rf.get_bool("isError", true));
    BOOST_CHECK(contains(rf.find("structuredContent")->get_string("content"),
                         "MCP-SERVE-MARKER"));
    auto ec = inspector(target, {"--method", "tools/call", "--tool-name",
                                 "execute_code", "--tool-arg",
                                 "code=print(6*7)"});
    BOOST_CHECK(!ec.get_bool("isError", true));
    BOOST_CHECK(contains(ec.find("structuredContent")->get_string("output"),
                         "42"));
  }

  // initialize over raw HTTP; the session id.
  std::string raw_session(uint16_t port, const std::string& extra = {}) {
    auto r = http(port, "POST", "/mcp", init_body, json_headers + extra);
    BOOST_REQUIRE_EQUAL(status_of(r), 200);
    auto sid = header_value(r, "Mcp-Session-Id");
    BOOST_REQUIRE_EQUAL(sid.size(), 32u);
    auto n = http(port, "POST", "/mcp",
                  R"({"jsonrpc":"2.0","method":"notifications/initialized"})",
                  json_headers + extra + "Mcp-Session-Id: " + sid + "\r\n");
    BOOST_CHECK_EQUAL(status_of(n), 202);
    return sid;
  }
};

} // namespace mibyan::test::mcp_serving
