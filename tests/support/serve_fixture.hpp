// File: tests/support/serve_fixture.hpp
//
// A real `mibyan serve` child process on 127.0.0.1 with the scripted
// provider server behind it, and a raw HTTP client (bytes in, bytes out)
// for it. Shared by tests/serve_test.cpp and tests/serve_limits_test.cpp.
// Include it after <boost/test/unit_test.hpp>: its checks are Boost.Test's.
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

#include "base/json.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/loopback.hpp"
#include "tests/support/process.hpp"
#include "tests/support/socket_read.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test::serving {

using namespace std::chrono;
using test::dial_loopback;
using test::send_all;


inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

inline std::string reply(const std::string& content) {
  json::value msg;
  msg["role"] = "assistant";
  msg["content"] = content;
  json::value choice;
  choice["index"] = 0;
  choice["message"] = std::move(msg);
  choice["finish_reason"] = "stop";
  json::value body;
  body["id"] = "c1";
  body["model"] = "m";
  body["choices"] = json::value::make_array();
  body["choices"].push_back(std::move(choice));
  return body.dump();
}

// A `mibyan serve` child process.
struct serve_process : child_process {
  uint16_t port = 0;
  std::string err_path;
};

// Starts `args` (args[0] the program) with MIBYAN_HOME=`home`, the
// provider keys, MIBYAN_LOG_LEVEL and MIBYAN_SERVER_KEY unset
// (MIBYAN_SERVER_KEY=`key` when not empty), in `cwd` when not empty, stdout
// on a pipe and stderr into `err_path`; waits (at most 60 s) for a stdout
// line starting with `prefix` followed by the port. Fails the test when
// none comes.
inline std::unique_ptr<serve_process>
start_child(std::vector<std::string> args, const std::string& home,
            const std::string& key, const std::string& cwd,
            const std::string& err_path, const std::string& prefix) {
  auto sp = std::make_unique<serve_process>();
  sp->err_path = err_path;
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("MIBYAN_HOME", home.c_str(), 1);
    for (auto v : {"OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL",
                   "MIBYAN_SERVER_KEY"})
      ::unsetenv(v);
    if (!key.empty())
      ::setenv("MIBYAN_SERVER_KEY", key.c_str(), 1);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0)
      ::_exit(126);
    int err = ::open(sp->err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                     0600);
    ::dup2(fds[1], 1);
    ::dup2(err, 2);
    ::close(fds[0]);
    std::vector<char*> argv;
    for (auto& a : args)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  sp->pid = pid;
  std::string line;
  auto deadline = steady_clock::now() + seconds{60};
  while (steady_clock::now() < deadline) {
    pollfd p{fds[0], POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char c;
    if (::read(fds[0], &c, 1) != 1)
      break;
    if (c == '\n')
      break;
    line += c;
  }
  ::close(fds[0]);
  BOOST_REQUIRE_MESSAGE(line.rfind(prefix, 0) == 0,
                        "no line '" << prefix << "'; got '" << line
                          << "'; stderr: " << test::slurp(sp->err_path));
  sp->port = static_cast<uint16_t>(std::stoi(line.substr(prefix.size())));
  return sp;
}

struct fixture {
  test::http_server provider;
  test::temp_dir home;
  std::string key;
  // The server's working directory ("" = the test's).
  std::string cwd;

  // Starts serve with `config` as config.yaml; waits for the listening
  // line (at most 60 s).
  std::unique_ptr<serve_process> start(const std::string& config = {},
                                       std::vector<std::string> extra = {}) {
    if (!config.empty())
      home.write("config.yaml", config);
    std::vector<std::string> args{test::mibyan_binary(), "serve", "--listen",
                                  "127.0.0.1:0", "--provider", "custom",
                                  "--base-url", provider.url("/v1"),
                                  "--model", "m"};
    args.insert(args.end(), extra.begin(), extra.end());
    return start_child(std::move(args), home.path(), key, cwd,
                       home / "serve.err",
                       "mibyan serve listening on http://127.0.0.1:");
  }

  void script(const std::string& body, int delay_ms = 0, int times = 1) {
    provider.script_chat(body, times, delay_ms);
  }

  std::vector<json::value> provider_requests() {
    auto parsed = json::parse(provider.requests());
    BOOST_REQUIRE(parsed);
    std::vector<json::value> out;
    for (auto& r : parsed.v->as_array()) {
      if (r.get_string("path", "").rfind("/v1/chat/completions", 0) != 0)
        continue;
      auto body = json::parse(r.find("body")->as_string());
      BOOST_REQUIRE(body);
      out.push_back(*body.v);
    }
    return out;
  }

  void wait_for_provider_requests(size_t n) {
    for (int i = 0; i < 1000 && provider_requests().size() < n; ++i)
      std::this_thread::sleep_for(milliseconds{20});
    BOOST_REQUIRE_GE(provider_requests().size(), n);
  }

  // The sessions `mibyan sessions list` shows (a separate read-only
  // process on the same store).
  json::value sessions_list() {
    test::process_options o;
    o.env["MIBYAN_HOME"] = home.path();
    o.timeout_seconds = 60;
    auto r = test::run_mibyan({"sessions", "list", "--json", "--limit",
                               "1000"},
                              o);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    auto parsed = json::parse(r.out);
    BOOST_REQUIRE_MESSAGE(parsed && parsed.v->is_array(), r.out);
    return *parsed.v;
  }

  // Runs one scenario of tests/node/serve_client.mjs.
  void node(const serve_process& sp, const std::string& scenario) {
    node_script(sp, "serve_client.mjs", scenario);
  }

  // Runs `node tests/node/<script> <scenario>` against `sp` with
  // SERVE_URL, PROVIDER_URL, SERVE_KEY, TOOL_FILE and `env` set; the
  // scenario passes when it exits 0 printing "OK <scenario>".
  void node_script(const serve_process& sp, const std::string& script,
                   const std::string& scenario,
                   const std::map<std::string, std::string>& env = {}) {
    auto dir = test::test_source_dir() + "/node";
    BOOST_REQUIRE_MESSAGE(
      std::filesystem::exists(dir + "/node_modules/openai/package.json"),
      "the openai npm client is not installed: run "
      "scripts/install-test-deps.sh (needs npm registry access)");
    test::process_options o;
    o.env = env;
    o.env["SERVE_URL"] = "http://127.0.0.1:" + std::to_string(sp.port);
    o.env["PROVIDER_URL"] = provider.url("");
    o.env["SERVE_KEY"] = key;
    o.env["TOOL_FILE"] = home.write("tool.txt", "line SERVE-MARKER\n");
    o.cwd = dir;
    o.timeout_seconds = 180;
    auto r = test::run_process({"node", dir + "/" + script, scenario}, o);
    BOOST_CHECK_MESSAGE(r.exit_code == 0 && contains(r.out, "OK " + scenario),
                        "node " << scenario << " failed (" << r.exit_code
                                << "): " << r.out << r.err
                                << "\nserve stderr:\n"
                                << test::slurp(sp.err_path));
  }
};

// -- a raw HTTP client (bytes in, bytes out) ---------------------------------


// A connection from the loopback address `from` (127.0.0.0/8 all reach
// the server; the server sees them as different clients).
inline int connect_from(uint16_t port, const char* from) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in src{};
  src.sin_family = AF_INET;
  BOOST_REQUIRE(::inet_pton(AF_INET, from, &src.sin_addr) == 1);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src)
                == 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a)
                == 0);
  return fd;
}


// Reads until the server closes or `seconds` pass.
inline std::string read_all(int fd, int seconds_ = 30) {
  std::string out;
  test::read_until(fd, out, {}, seconds_);
  return out;
}

// One request on its own connection (Connection: close); returns the
// whole response.
inline std::string http(uint16_t port, const std::string& method,
                 const std::string& path, const std::string& body = {},
                 const std::string& headers
                 = "Content-Type: application/json\r\n") {
  int fd = dial_loopback(port);
  send_all(fd, method + " " + path + " HTTP/1.1\r\nHost: x\r\nConnection: "
                 "close\r\n" + headers + "Content-Length: "
                 + std::to_string(body.size()) + "\r\n\r\n" + body);
  auto out = read_all(fd);
  ::close(fd);
  return out;
}

// Reads until the server closes the connection (true) or `seconds_` pass.
inline bool closed_by_server(int fd, int seconds_) {
  auto deadline = steady_clock::now() + seconds{seconds_};
  while (steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0)
      continue;
    char buf[4096];
    if (::recv(fd, buf, sizeof buf, 0) <= 0)
      return true;
  }
  return false;
}

inline int status_of(const std::string& response) {
  if (response.size() < 12 || response.rfind("HTTP/1.1 ", 0) != 0)
    return 0;
  return std::stoi(response.substr(9, 3));
}

inline json::value body_of(const std::string& response) {
  auto p = response.find("\r\n\r\n");
  auto parsed = json::parse(p == std::string::npos ? "" : response.substr(p + 4));
  return parsed ? *parsed.v : json::value{};
}

// The response is a 4xx in OpenAI's error shape.
inline void check_error(const std::string& response, int status,
                 const std::string& code) {
  BOOST_TEST_CONTEXT(response) {
    BOOST_CHECK_EQUAL(status_of(response), status);
    auto b = body_of(response);
    BOOST_REQUIRE(b.is_object() && b.find("error") && b["error"].is_object());
    BOOST_CHECK(!b["error"].get_string("message", "").empty());
    BOOST_CHECK(!b["error"].get_string("type", "").empty());
    BOOST_CHECK_EQUAL(b["error"].get_string("code", ""), code);
  }
}

inline const std::string chat_body
  = R"({"model":"m","messages":[{"role":"user","content":"hi"}]})";

} // namespace mibyan::test::serving
