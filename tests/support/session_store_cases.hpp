// File: tests/support/session_store_cases.hpp
//
// What the session store suites (session_store_test, lmdb_store_test)
// share: messages of each role, and a store of the backend under test
// (tests/support/store_backends.hpp) with a fixed clock, reopened at will,
// with checked session and message helpers. Header-only; include after
// <boost/test/unit_test.hpp>.
#pragma once

#include <cstdint>
#include <string>

#include "storage/session_store.hpp"
#include "tests/support/store_backends.hpp"

namespace mibyan::test {

inline chat_message msg(std::string role, std::string content) {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

inline chat_message assistant_call(std::string content, std::string name,
                                   std::string args) {
  chat_message m = msg("assistant", std::move(content));
  m.tool_calls.push_back(tool_call{"call_" + name, name, std::move(args)});
  m.finish_reason = "tool_calls";
  m.reasoning = "thinking about " + name;
  return m;
}

inline chat_message tool_result(std::string call_id, std::string name,
                                std::string content) {
  chat_message m = msg("tool", std::move(content));
  m.tool_call_id = std::move(call_id);
  m.tool_name = std::move(name);
  return m;
}

// One store of the backend under test (tests/support/store_backends.hpp),
// with a fixed clock.
struct session_store_case : store_fixture {
  static bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  }

  /// The LMDB directory (LMDB-only cases).
  std::string dir;
  int64_t clock = 1'700'000'000'000;

  session_store_options options(bool read_only = false) {
    auto o = base;
    o.read_only = read_only;
    o.now_ms = [this] { return clock; };
    return o;
  }

  void opened() override {
    dir = base.dir;
    reopen();
  }

  void reopen(bool read_only = false) {
    store.reset();
    open_with(options(read_only));
  }

  session_info make(const std::string& id, int64_t started = 0) {
    new_session ns;
    ns.id = id;
    ns.model = "model-x";
    ns.started_at_ms = started;
    auto r = store->create_session(ns);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return *r;
  }

  uint64_t append(const std::string& sid, const chat_message& m,
                  const std::string& key = {}) {
    auto r = store->append_message(sid, m, key);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    return r->id;
  }

  std::string append_error(const std::string& sid, const chat_message& m) {
    auto r = store->append_message(sid, m);
    BOOST_TEST(!r.ok());
    return r.error;
  }
};

// The same on an LMDB store, for the cases of LMDB-only behaviour.
struct lmdb_store_case : session_store_case {
  lmdb_store_case() { BOOST_REQUIRE(start("lmdb")); }
};


} // namespace mibyan::test
