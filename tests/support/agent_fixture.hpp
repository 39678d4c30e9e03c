// File: tests/support/agent_fixture.hpp
//
// A runtime against the scripted provider server (tests/support/
// http_server.*), for tests of the agent loop through the real runtime:
// scripted chat completions (tests/support/scripted_replies.hpp), the
// provider's request log, turns, and the stored sessions. Header-only; one fixture per test case.
#pragma once

#include <chrono>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "agent/turn_result.hpp"
#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "storage/session_store.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

struct agent_fixture {
  http_server server;
  temp_dir home;
  std::unique_ptr<runtime> rt;
  std::map<std::string, std::optional<std::string>> saved_env;

  agent_fixture() {
    for (auto name : {"OPENAI_API_KEY", "OPENROUTER_API_KEY",
                      "ANTHROPIC_API_KEY", "CUSTOM_API_KEY"}) {
      auto v = std::getenv(name);
      saved_env[name] = v ? std::optional<std::string>{v} : std::nullopt;
      ::unsetenv(name);
    }
  }

  ~agent_fixture() {
    rt.reset();
    for (auto& [name, v] : saved_env)
      if (v)
        ::setenv(name.c_str(), v->c_str(), 1);
      else
        ::unsetenv(name.c_str());
  }

  /// The options every test starts from (tweak, then start(opts)).
  options base_options() {
    options opts;
    opts.home = home.path();
    opts.agent.api_max_retries = 1;
    opts.approvals.unattended_mode = "approve";
    opts.code_execution.sandbox = "off";
    opts.code_execution.prestart_kernels = 0;
    return opts;
  }

  void start(options opts) {
    std::string err;
    auto made = create_runtime(std::move(opts));
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  void script(const std::string& body, int times = 1, int delay_ms = 0) {
    server.script_chat(body, times, delay_ms);
  }

  /// The bodies of the chat requests received, parsed, in arrival order.
  std::vector<json::value> requests() {
    auto parsed = json::parse(server.requests());
    BOOST_REQUIRE(parsed);
    std::vector<json::value> out;
    for (auto& r : parsed.v->as_array()) {
      if (!contains(r["path"].as_string(), "/chat/completions"))
        continue;
      auto body = json::parse(r["body"].as_string());
      BOOST_REQUIRE(body);
      out.push_back(*body.v);
    }
    return out;
  }

  turn_call call(const std::string& prompt, const std::string& sid = {}) {
    turn_call c;
    c.session_id = sid;
    c.prompt = prompt;
    c.provider.provider = "custom";
    c.provider.base_url = server.url("/v1");
    c.provider.model = "m";
    c.provider.api_key = "sk-test-0123456789";
    c.stream = false;
    return c;
  }

  json::value run(const turn_call& c, std::string* sid = nullptr) {
    auto out = rt->run_turn(c);
    BOOST_REQUIRE_MESSAGE(out.started, out.error);
    // The JSON form the edges render (docs/embedding.md, "Turn results").
    auto rendered = turn_result_json(out);
    if (sid != nullptr)
      *sid = out.session_id;
    BOOST_CHECK_EQUAL(rendered["session_id"].as_string(), out.session_id);
    return rendered;
  }

  /// Opens the store read-only (the runtime must be gone: one LMDB
  /// environment per process).
  std::unique_ptr<session_store> open_store() {
    rt.reset();
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    so.read_only = true;
    auto st = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(st, st.error);
    return std::move(*st);
  }

  /// Polls `cond` every 20 ms for at most `seconds`.
  static bool wait_for(const std::function<bool()>& cond, double seconds) {
    auto until = std::chrono::steady_clock::now()
                 + std::chrono::milliseconds(
                   static_cast<int64_t>(seconds * 1000));
    while (std::chrono::steady_clock::now() < until) {
      if (cond())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return cond();
  }
};

} // namespace mibyan::test
