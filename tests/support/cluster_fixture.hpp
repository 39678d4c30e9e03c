// File: tests/support/cluster_fixture.hpp
//
// Clusters of real `mibyan node` processes on loopback for the cluster
// suites (cluster_test, cluster_hardening_test,
// kernel_checkpoint_cluster_test): start nodes and `serve`
// gateways with their own $MIBYAN_HOME and workdir, connect clients, poll
// the member list. Waits are bounded polls; nothing asserts a time.
// Header-only; each suite includes it once.
#pragma once

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <memory>
#include <netinet/in.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "base/json.hpp"
#include "config/options.hpp"
#include "cluster/client.hpp"
#include "tests/support/loopback.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

using namespace std::chrono;

inline const std::string cluster_key_value = "test-cluster-key-0123456789";

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// execute_code's arguments for `code`.
inline std::string code_args(const std::string& code) {
  json::value a;
  a["code"] = code;
  return a.dump();
}

struct node_process : child_process {
  std::string id;
  std::string address;
  std::string err_path;
  std::string workdir;
  int exit_code = 0; // when start failed or after stop

  int stop(int sig = SIGTERM) { return child_process::stop(sig, -1000); }

  std::string err() const { return test::slurp(err_path); }
};

struct cluster_fixture {
  test::temp_dir dir;
  int counter = 0;
  /// Lines added under `code_execution:` in each node's config (two-space
  /// indented), e.g. "  checkpoint: off\n".
  std::string code_execution_extra;

  std::string config(const std::string& extra = {}) {
    return "cluster:\n"
           "  heartbeat_ms: 200\n"
           "  failure_timeout_ms: 2000\n"
           "  drain_timeout_ms: 20000\n"
           + extra
           + "code_execution:\n"
             "  sandbox: off\n"
             "  prestart_kernels: 0\n"
           + code_execution_extra
           + "approvals:\n"
             "  unattended_mode: approve\n";
  }

  // Forks `args` with MIBYAN_HOME=`home`, the test key (unless `env` has
  // one) and stderr in n.err_path; returns its first stdout line (or "" with
  // pid == -1 and exit_code set when it exited first).
  std::string launch(node_process& n, const std::vector<std::string>& args,
                     const std::string& home,
                     std::map<std::string, std::string> env) {
    if (!env.count("MIBYAN_CLUSTER_KEY"))
      env["MIBYAN_CLUSTER_KEY"] = cluster_key_value;
    int fds[2];
    BOOST_REQUIRE(::pipe(fds) == 0);
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("MIBYAN_HOME", home.c_str(), 1);
      for (auto v : {"OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL",
                     "MIBYAN_CLUSTER_KEY", "MIBYAN_TEST_TYPE_DIGEST_SALT",
                     "MIBYAN_SERVER_KEY"})
        ::unsetenv(v);
      for (auto& [k, v] : env)
        ::setenv(k.c_str(), v.c_str(), 1);
      int err = ::open(n.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                       0600);
      ::dup2(fds[1], 1);
      ::dup2(err, 2);
      ::close(fds[0]);
      std::vector<char*> argv;
      auto copy = args;
      for (auto& a : copy)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    n.pid = pid;
    std::string line;
    auto deadline = steady_clock::now() + seconds{60};
    bool eof = false;
    while (steady_clock::now() < deadline) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0)
        continue;
      char c;
      if (::read(fds[0], &c, 1) != 1) {
        eof = true;
        break;
      }
      if (c == '\n')
        break;
      line += c;
    }
    ::close(fds[0]);
    if (eof) {
      n.exit_code = n.stop(SIGKILL);
      return {};
    }
    return line;
  }

  // Starts `mibyan node`; returns with the ready line read (or with
  // pid == -1 and exit_code set when the node exited instead).
  std::unique_ptr<node_process>
  start(std::vector<std::string> extra, const std::string& cfg_extra = {},
        std::map<std::string, std::string> env = {},
        std::string listen = "127.0.0.1:0",
        std::vector<std::string> prefix = {}) {
    auto n = std::make_unique<node_process>();
    auto name = "node" + std::to_string(++counter);
    auto home = dir / name;
    std::filesystem::create_directories(home);
    dir.write(name + "/config.yaml", config(cfg_extra));
    n->workdir = dir / (name + "-work");
    std::filesystem::create_directories(n->workdir);
    n->err_path = home + "/node.err";
    std::vector<std::string> args = prefix;
    for (auto a : {test::mibyan_binary(), std::string{"node"},
                   std::string{"--listen"}, listen, std::string{"--workdir"},
                   n->workdir})
      args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    auto line = launch(*n, args, home, std::move(env));
    if (n->pid == -1)
      return n;
    // "mibyan node NODE_ID listening on HOST:PORT"
    const std::string ready = "mibyan node ";
    BOOST_REQUIRE_MESSAGE(line.rfind(ready, 0) == 0
                            && contains(line, " listening on "),
                          "no ready line; got '" << line << "'; stderr: "
                                                 << n->err());
    auto rest = line.substr(ready.size());
    n->id = rest.substr(0, rest.find(' '));
    n->address = rest.substr(rest.rfind(' ') + 1);
    return n;
  }

  // Starts `mibyan serve --listen 127.0.0.1:0 EXTRA...`; `address` is then
  // the HTTP "HOST:PORT" (or pid == -1 and exit_code set on exit).
  std::unique_ptr<node_process>
  start_serve(std::vector<std::string> extra,
              std::map<std::string, std::string> env = {}) {
    auto n = std::make_unique<node_process>();
    auto name = "serve" + std::to_string(++counter);
    auto home = dir / name;
    std::filesystem::create_directories(home);
    dir.write(name + "/config.yaml", config());
    n->err_path = home + "/serve.err";
    std::vector<std::string> args{test::mibyan_binary(), "serve", "--listen",
                                  "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto line = launch(*n, args, home, std::move(env));
    if (n->pid == -1)
      return n;
    const std::string ready = "mibyan serve listening on http://";
    BOOST_REQUIRE_MESSAGE(line.rfind(ready, 0) == 0,
                          "no ready line; got '" << line << "'; stderr: "
                                                 << n->err());
    n->address = line.substr(ready.size());
    return n;
  }

  // POSTs `body` to `path` at the HTTP "127.0.0.1:PORT" `address` and
  // returns the whole response (status line, headers, body).
  std::string http_post(const std::string& address, const std::string& path,
                        const std::string& body) {
    return test::exchange_http(
      address, "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "Content-Type: application/json\r\nConnection: close"
               "\r\nContent-Length: " + std::to_string(body.size())
               + "\r\n\r\n" + body);
  }

  options client_options() {
    options o;
    o.cluster.key = cluster_key_value;
    o.cluster.heartbeat_ms = 200;
    o.cluster.failure_timeout_ms = 2000;
    return o;
  }

  std::unique_ptr<cluster_client> connect(const std::string& address) {
    auto c = cluster_client::connect(address, client_options());
    BOOST_REQUIRE_MESSAGE(c, "connect failed: " << c.error);
    return std::move(*c);
  }

  // The member list as `via` sees it.
  json::value members(cluster_client& c) {
    auto text = c.members_json();
    BOOST_REQUIRE_MESSAGE(text, "members: " << text.error);
    auto parsed = json::parse(*text);
    BOOST_REQUIRE_MESSAGE(parsed, "members: " << parsed.error);
    return *parsed.v;
  }

  // Polls until `via` sees `n` members in state `state` (at most 30 s).
  void wait_members(cluster_client& c, size_t n,
                    const std::string& state = "up") {
    size_t seen = 0;
    for (int i = 0; i < 300; ++i) {
      seen = 0;
      auto m = members(c);
      for (auto& e : m.as_array())
        seen += e.get_string("state", "") == state ? 1 : 0;
      if (seen >= n)
        return;
      std::this_thread::sleep_for(milliseconds{100});
    }
    BOOST_FAIL("only " << seen << " member(s) " << state << ": "
                       << members(c).dump());
  }

  std::string state_of(cluster_client& c, const std::string& id) {
    auto m = members(c);
    for (auto& e : m.as_array())
      if (e.get_string("id", "") == id)
        return e.get_string("state", "");
    return "";
  }

  json::value call(cluster_client& c, const std::string& session,
                   const std::string& tool, const std::string& args) {
    auto out = c.call_tool(tool_call_request{session, "t", tool, args, ""});
    auto parsed = json::parse(out.result_json);
    BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_object(),
                          "bad result: " << out.result_json);
    return *parsed.v;
  }

  /// What start_gateway_and_two_workers starts (members destroyed in
  /// reverse order: the client first, the gateway last).
  struct gateway_and_workers {
    std::unique_ptr<node_process> gw;
    std::unique_ptr<node_process> w1;
    std::unique_ptr<node_process> w2;
    std::unique_ptr<cluster_client> c;
  };

  // A gateway, two workers joined to it, and a client of the gateway that
  // has seen all three up.
  gateway_and_workers start_gateway_and_two_workers() {
    gateway_and_workers g;
    g.gw = start({"--role", "gateway"});
    g.w1 = start({"--role", "worker", "--join", g.gw->address});
    g.w2 = start({"--role", "worker", "--join", g.gw->address});
    g.c = connect(g.gw->address);
    wait_members(*g.c, 3);
    return g;
  }

  test::process_options cli_env() {
    test::process_options o;
    o.env["MIBYAN_HOME"] = dir / "client";
    o.env["MIBYAN_CLUSTER_KEY"] = cluster_key_value;
    o.unset = {"OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL",
               "MIBYAN_TEST_TYPE_DIGEST_SALT"};
    o.timeout_seconds = 120;
    return o;
  }
};

} // namespace mibyan::test
