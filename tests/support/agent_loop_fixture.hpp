// File: tests/support/agent_loop_fixture.hpp
//
// The runtime of the agent-loop suites (agent_loop_test,
// agent_loop_limits_test): tests/support/agent_fixture.hpp with the default
// sandbox and kernel pool, a work dir, streamed scripts and the stored
// messages of a session. Header-only; one fixture per test case.
#pragma once

#include <string>
#include <vector>

#include "base/json.hpp"
#include "storage/session_store.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test::agent_loop {

using test::contains;


// The agent fixture's scripted answers (tests/support/agent_fixture.hpp).
inline std::string completion(const std::string& content,
                       const std::vector<test::scripted_call>& calls = {},
                       std::string finish = "") {
  return test::chat_completion(content, calls, std::move(finish));
}

inline std::string args_json(const std::string& key, const std::string& value) {
  return test::one_arg(key, value);
}

// The runtime of these cases: the default sandbox and kernel pool, not
// base_options()'s; a work dir for the files the tools read.
struct fixture : test::agent_fixture {
  test::temp_dir work;

  fixture() { start(); }
  ~fixture() { rt.reset(); } // before the work dir goes

  using agent_fixture::start;
  void start() {
    options opts;
    opts.home = home.path();
    opts.agent.api_max_retries = 1;
    // Scripts run without a human here (docs/approvals.md, whole-script guard).
    opts.approvals.unattended_mode = "approve";
    start(std::move(opts));
  }

  void script_stream(const std::vector<std::string>& chunks) {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = 200;
    auto arr = json::value::make_array();
    for (auto& c : chunks)
      arr.push_back(c);
    s["chunks"] = std::move(arr);
    s["chunk_ms"] = 5;
    s["headers"]["Content-Type"] = "text/event-stream";
    server.script(s.dump());
  }

  // The stored messages of session `sid` (and its info); ends the runtime.
  std::vector<stored_message> stored(const std::string& sid,
                                     session_info* info = nullptr) {
    auto st = open_store();
    auto msgs = st->load_messages(sid);
    BOOST_REQUIRE_MESSAGE(msgs, msgs.error);
    if (info != nullptr) {
      auto got = st->get_session(sid);
      BOOST_REQUIRE_MESSAGE(got, got.error);
      *info = *got;
    }
    return *msgs;
  }
};

// Returns the messages of a request that have `role`.
inline std::vector<json::value> with_role(json::value& req, const std::string& role) {
  std::vector<json::value> out;
  auto& msgs = req["messages"];
  for (size_t i = 0; i < msgs.size(); ++i)
    if (msgs.as_array()[i]["role"].as_string() == role)
      out.push_back(msgs.as_array()[i]);
  return out;
}

inline std::string content_of(json::value& m) {
  auto& c = m["content"];
  return c.is_string() ? c.as_string() : c.dump();
}

} // namespace mibyan::test::agent_loop
