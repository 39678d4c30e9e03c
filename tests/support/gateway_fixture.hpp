// File: tests/support/gateway_fixture.hpp
//
// Several gateways over one store for the gateway suites
// (gateway_failover_test, gateway_turns_test, cron_cluster_test): real `mibyan node` and
// `mibyan serve --join` gateways on loopback sharing one $MIBYAN_HOME (one
// LMDB store, the leases in it) or, with pg_gateways, one throw-away
// PostgreSQL database (tests/support/pg_server.hpp; the password from
// MIBYAN_PG_PASSWORD), with the scripted provider behind them.
// Header-only; each suite includes it once, after
// <boost/test/unit_test.hpp>. Waits are bounded polls.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <future>
#include <iostream>

#include "agent/turn_result.hpp"
#include "storage/session_lease.hpp"
#include "storage/session_store.hpp"
#include "tests/support/cluster_fixture.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/scripted_replies.hpp"

namespace mibyan::test {

struct gateways : cluster_fixture {
  http_server provider;
  std::string home;
  // Set for the gateways' processes besides the fixture's own.
  std::map<std::string, std::string> gateway_env;
  // How the test reads the shared store.
  session_store_options store_opts;

  gateways() {
    home = dir / "shared";
    std::filesystem::create_directories(home);
    dir.write("shared/config.yaml", config());
    store_opts.dir = session_store::default_dir(home);
    store_opts.read_only = true;
  }

  // A `mibyan node` of `role` ("gateway", or "all" for a gateway with
  // its own worker) on the shared home; joins `join` unless it is "".
  std::unique_ptr<node_process> start_gateway(const std::string& join,
                                              const std::string& role
                                              = "gateway") {
    auto n = std::make_unique<node_process>();
    auto name = "gw" + std::to_string(++counter);
    n->workdir = dir / (name + "-work");
    std::filesystem::create_directories(n->workdir);
    n->err_path = dir / (name + ".err");
    std::vector<std::string> args{test::mibyan_binary(), "node", "--listen",
                                  "127.0.0.1:0", "--role", role,
                                  "--workdir", n->workdir, "--provider",
                                  "custom", "--base-url",
                                  provider.url("/v1"), "--model", "m"};
    if (!join.empty()) {
      args.push_back("--join");
      args.push_back(join);
    }
    auto env = gateway_env;
    env["CUSTOM_API_KEY"] = "sk-test-1234";
    env["MIBYAN_LOG_LEVEL"] = "info";
    auto line = launch(*n, args, home, env);
    BOOST_REQUIRE_MESSAGE(n->pid != -1 && contains(line, " listening on "),
                          role << " node did not start: " << line << " "
                                << n->err());
    auto rest = line.substr(std::string{"mibyan node "}.size());
    n->id = rest.substr(0, rest.find(' '));
    n->address = rest.substr(rest.rfind(' ') + 1);
    return n;
  }

  // `mibyan serve --join JOIN` on the shared home: an HTTP gateway whose
  // `address` is its HTTP "HOST:PORT".
  std::unique_ptr<node_process> start_http_gateway(const std::string& join) {
    auto n = std::make_unique<node_process>();
    auto name = "http" + std::to_string(++counter);
    n->workdir = dir / (name + "-work");
    std::filesystem::create_directories(n->workdir);
    n->err_path = dir / (name + ".err");
    std::vector<std::string> args{test::mibyan_binary(), "serve", "--listen",
                                  "127.0.0.1:0", "--join", join,
                                  "--cluster-listen", "127.0.0.1:0",
                                  "--provider", "custom", "--base-url",
                                  provider.url("/v1"), "--model", "m"};
    auto env = gateway_env;
    env["CUSTOM_API_KEY"] = "sk-test-1234";
    env["MIBYAN_LOG_LEVEL"] = "info";
    auto line = launch(*n, args, home, env);
    const std::string ready = "mibyan serve listening on http://";
    BOOST_REQUIRE_MESSAGE(n->pid != -1 && line.rfind(ready, 0) == 0,
                          "serve --join did not start: " << line << " "
                                                         << n->err());
    n->address = line.substr(ready.size());
    return n;
  }

  // The JSON text of a chat completion request with one user message.
  static std::string chat_body(const std::string& prompt, bool stream) {
    json::value body;
    body["model"] = "m";
    body["stream"] = stream;
    body["messages"] = json::value::make_array();
    json::value m;
    m["role"] = "user";
    m["content"] = prompt;
    body["messages"].push_back(std::move(m));
    return body.dump();
  }

  // POSTs a chat completion of session `sid` to the HTTP gateway at
  // `address` (with an Idempotency-Key when `key` is set); returns the
  // response (status line, headers, body).
  std::string http_chat(const std::string& address, const std::string& sid,
                        const std::string& prompt, const std::string& key = {},
                        bool stream = false) {
    auto text = chat_body(prompt, stream);
    std::string head = "X-Mibyan-Session: " + sid + "\r\n";
    if (!key.empty())
      head += "Idempotency-Key: " + key + "\r\n";
    return http_request(address, "POST /v1/chat/completions HTTP/1.1\r\n"
                                 "Host: 127.0.0.1\r\nContent-Type: "
                                 "application/json\r\nConnection: close\r\n"
                                 + head + "Content-Length: "
                                 + std::to_string(text.size()) + "\r\n\r\n"
                                 + text);
  }

  // Sends `req` to the HTTP "127.0.0.1:PORT" `address`; returns everything
  // read until the server closes (at most two minutes).
  static std::string http_request(const std::string& address,
                                  const std::string& req) {
    return test::exchange_http(address, req);
  }

  // The JSON body of an HTTP response ("" when it has none).
  static json::value http_body(const std::string& response) {
    auto at = response.find("\r\n\r\n");
    if (at == std::string::npos)
      return {};
    auto parsed = json::parse(response.substr(at + 4));
    return parsed ? *parsed.v : json::value{};
  }

  std::unique_ptr<node_process> start_worker(const std::string& join) {
    return start({"--role", "worker", "--join", join});
  }

  std::unique_ptr<session_store> open_store() {
    auto st = open_session_store(store_opts);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    return std::move(*st);
  }

  // Waits (bounded poll) until no gateway holds the lease of session
  // `sid`. Needs a writable store handle (PostgreSQL; LMDB opens the
  // leases read-write only).
  void wait_released(const std::string& sid) {
    auto store = open_store();
    auto leases = open_session_leases(*store);
    BOOST_REQUIRE_MESSAGE(leases, leases.error);
    auto deadline = steady_clock::now() + seconds{30};
    while (steady_clock::now() < deadline) {
      auto row = (*leases)->get(session_lease_name(sid));
      BOOST_REQUIRE_MESSAGE(row, row.error);
      auto now = duration_cast<milliseconds>(
                   system_clock::now().time_since_epoch())
                   .count();
      if (!row->live(now))
        return;
      std::this_thread::sleep_for(milliseconds{10});
    }
    BOOST_FAIL("the lease of session " << sid << " was not released");
  }

  std::vector<stored_message> history(const std::string& sid) {
    auto store = open_store();
    auto msgs = store->load_messages(sid);
    BOOST_REQUIRE_MESSAGE(msgs, msgs.error);
    return *msgs;
  }

  turn_result turn(cluster_client& c, const std::string& sid,
                   const std::string& prompt) {
    turn_call call;
    call.session_id = sid;
    call.prompt = prompt;
    return c.run_turn(call);
  }

  // Checks the last chat request the provider got: its user messages are
  // `prompts`, in order (the whole history reached the model).
  void check_last_request(const std::vector<std::string>& prompts) {
    auto reqs = chat_requests();
    BOOST_REQUIRE(!reqs.empty());
    auto seen = user_texts(reqs.back());
    BOOST_CHECK_EQUAL_COLLECTIONS(seen.begin(), seen.end(), prompts.begin(),
                                  prompts.end());
  }

  // Checks the stored history of session `sid`: the `prompts` as user
  // messages in order, each answered by an assistant message, and nothing
  // else.
  void check_history(const std::string& sid,
                     const std::vector<std::string>& prompts) {
    auto h = history(sid);
    std::vector<std::string> users;
    for (size_t i = 0; i < h.size(); ++i)
      if (h[i].message.role == "user") {
        users.push_back(h[i].message.content);
        BOOST_REQUIRE(i + 1 < h.size());
        BOOST_CHECK_EQUAL(h[i + 1].message.role, "assistant");
      }
    BOOST_CHECK_EQUAL_COLLECTIONS(users.begin(), users.end(),
                                  prompts.begin(), prompts.end());
    BOOST_CHECK_EQUAL(h.size(), 2 * prompts.size());
  }

  // The user messages of the chat request `body`, in order.
  static std::vector<std::string> user_texts(const json::value& body) {
    std::vector<std::string> out;
    auto msgs = body.find("messages");
    if (msgs == nullptr || !msgs->is_array())
      return out;
    for (auto& m : msgs->as_array())
      if (m.get_string("role", "") == "user")
        out.push_back(m.get_string("content", ""));
    return out;
  }

  std::vector<json::value> chat_requests() {
    std::vector<json::value> out;
    for (auto& b : request_bodies(provider))
      if (b.find("messages") != nullptr)
        out.push_back(b);
    return out;
  }
};

// A loopback port nothing listens on (bound, read, closed).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0);
  socklen_t len = sizeof sa;
  BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len)
                == 0);
  ::close(fd);
  return ntohs(sa.sin_port);
}

inline void check_ok(const turn_result& o) {
  BOOST_REQUIRE_MESSAGE(o.started, "turn failed: " << o.error);
  BOOST_REQUIRE_MESSAGE(o.completed, "turn not completed: "
                                       << turn_result_json(o).dump());
}

// The gateways' store on a throw-away PostgreSQL server: config.yaml
// names the database over TCP without a password, which the gateways take
// from MIBYAN_PG_PASSWORD. `pg` stays null (the case is skipped) where the
// server cannot start.
struct pg_gateways : gateways {
  std::unique_ptr<pg_server> pg;

  pg_gateways() {
    std::string why;
    pg = pg_server::start(why);
    if (!pg) {
      const char* req = std::getenv("MIBYAN_REQUIRE_TEST_DATA");
      BOOST_REQUIRE_MESSAGE(req == nullptr || std::string{req} != "1",
                            "PostgreSQL cannot start: "
                              << why << " (MIBYAN_REQUIRE_TEST_DATA=1)");
      std::cerr << "SKIPPED (postgres): " << why << "\n";
      return;
    }
    auto db = pg->fresh_database("gw");
    dir.write("shared/config.yaml",
              config("storage:\n"
                     "  backend: postgres\n"
                     "  postgres:\n"
                     "    url: \""
                     + pg->tcp_url(db)
                     + "\"\n"
                       "    pool_size: 2\n"
                       "  auto_migrate: true\n"));
    gateway_env["MIBYAN_PG_PASSWORD"] = pg_server::password();
    store_opts = session_store_options{};
    store_opts.backend = "postgres";
    store_opts.postgres_url = pg->url(db);
  }
};


} // namespace mibyan::test
