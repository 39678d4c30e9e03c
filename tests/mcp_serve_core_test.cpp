#define BOOST_TEST_MODULE mcp_serve_core
#include <boost/test/unit_test.hpp>

// The transport-free MCP server core (mcp_server/server_core.hpp) against
// a fake backend: the JSON-RPC dispatch and its errors, version
// negotiation, paging, tool results, progress, cancellation, logging,
// list_changed and approvals through elicitation. The real transports and
// real clients are in tests/mcp_serve_test.cpp.

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "mcp_server/elicitation.hpp"
#include "mcp_server/server_core.hpp"
#include "tests/support/wait_until.hpp"

using namespace mibyan;
using mibyan::test::wait_until;
using namespace std::chrono;

namespace {

// What the core sent on one session.
struct inbox {
  std::mutex m;
  std::condition_variable cv;
  std::vector<json::value> msgs;

  mcp_outbound sink() {
    return [this](const std::string& text, const json::value&, bool) {
      auto p = json::parse(text);
      BOOST_REQUIRE_MESSAGE(p, "the core sent no JSON: " << text);
      std::lock_guard<std::mutex> g{m};
      msgs.push_back(*p.v);
      cv.notify_all();
    };
  }

  // The first message (from index 0) that `pred` accepts, waiting up to
  // 10 s; null when none came.
  template <class Pred>
  json::value wait_for(Pred pred, int seconds_ = 10) {
    std::unique_lock<std::mutex> lk{m};
    json::value found;
    cv.wait_for(lk, seconds(seconds_), [&] {
      for (auto& x : msgs)
        if (pred(x)) {
          found = x;
          return true;
        }
      return false;
    });
    return found;
  }

  json::value response(int64_t id) {
    return wait_for([id](const json::value& x) {
      const auto* i = x.find("id");
      return i && i->is_int() && i->as_int() == id && !x.find("method");
    });
  }

  size_t count(const std::string& method) {
    std::lock_guard<std::mutex> g{m};
    size_t n = 0;
    for (auto& x : msgs)
      if (x.get_string("method") == method)
        ++n;
    return n;
  }

  bool has_response(int64_t id) {
    std::lock_guard<std::mutex> g{m};
    for (auto& x : msgs) {
      const auto* i = x.find("id");
      if (i && i->is_int() && i->as_int() == id && !x.find("method"))
        return true;
    }
    return false;
  }
};

// The backend: tools "echo", "fail", "slow" (answers when released or
// interrupted).
struct fake {
  std::mutex m;
  std::vector<std::string> names{"echo", "fail", "slow", "t3", "t4"};
  std::vector<std::function<void(mcp_tool_answer)>> slow_calls;
  std::vector<std::string> interrupts;
  std::vector<std::string> closed;
  approval_callback approve;
  clarify_callback clarify;
  bool channels_set = false;
  // Opt-in hooks: per-call cancel and registry watching.
  bool per_call = false;
  bool watchable = false;
  std::vector<std::string> cancelled_calls; // "session/call_id"
  std::vector<std::string> call_ids;        // of the slow calls, in order
  std::function<void()> on_tools_changed;
  int unwatched = 0;

  mcp_backend backend() {
    mcp_backend b;
    b.list_tools = [this]() -> result<std::vector<mcp_offered_tool>> {
      std::lock_guard<std::mutex> g{m};
      std::vector<mcp_offered_tool> out;
      for (auto& n : names) {
        mcp_offered_tool t;
        t.name = n;
        t.description = "the " + n + " tool";
        t.input_schema = json::parse(R"({"type":"object","properties":{}})")
                           .v.value();
        out.push_back(std::move(t));
      }
      return out;
    };
    b.call_tool = [this](mcp_tool_call c,
                         std::function<void(mcp_tool_answer)> done) {
      if (c.tool == "echo") {
        done({R"({"echo":)" + c.args_json + R"(,"session":")" + c.session_id
                + "\"}",
              false});
      } else if (c.tool == "fail") {
        done({R"({"error":"it failed"})", false});
      } else {
        std::lock_guard<std::mutex> g{m};
        call_ids.push_back(c.call_id);
        slow_calls.push_back(std::move(done));
      }
    };
    if (per_call)
      b.cancel_call = [this](const std::string& sid, const std::string& call,
                             const std::string&) {
        std::lock_guard<std::mutex> g{m};
        cancelled_calls.push_back(sid + "/" + call);
      };
    if (watchable) {
      b.watch_tools = [this](std::function<void()> fn) -> uint64_t {
        std::lock_guard<std::mutex> g{m};
        on_tools_changed = std::move(fn);
        return 7;
      };
      b.unwatch_tools = [this](uint64_t id) {
        std::lock_guard<std::mutex> g{m};
        if (id == 7)
          ++unwatched;
        on_tools_changed = nullptr;
      };
    }
    b.interrupt = [this](const std::string& sid, const std::string&) {
      std::vector<std::function<void(mcp_tool_answer)>> calls;
      {
        std::lock_guard<std::mutex> g{m};
        interrupts.push_back(sid);
        calls.swap(slow_calls);
      }
      for (auto& d : calls)
        d({R"({"error":"interrupted"})", false});
    };
    b.close_session = [this](const std::string& sid) {
      std::lock_guard<std::mutex> g{m};
      closed.push_back(sid);
    };
    b.set_channels = [this](const std::string&, approval_callback a,
                            clarify_callback c) {
      std::lock_guard<std::mutex> g{m};
      approve = std::move(a);
      clarify = std::move(c);
      channels_set = true;
    };
    b.clear_channels = [](const std::string&) {};
    return b;
  }

  void release_slow() {
    std::vector<std::function<void(mcp_tool_answer)>> calls;
    {
      std::lock_guard<std::mutex> g{m};
      calls.swap(slow_calls);
    }
    for (auto& d : calls)
      d({R"({"done":true})", false});
  }

  size_t slow_waiting() {
    std::lock_guard<std::mutex> g{m};
    return slow_calls.size();
  }
};

struct fixture {
  fake be;
  inbox box;
  std::shared_ptr<mcp_server_core> core;
  std::shared_ptr<mcp_server_core::session> s;

  explicit fixture(size_t page = 2, bool per_call = false,
                   bool watchable = false,
                   milliseconds list_check = milliseconds(20)) {
    mcp_core_settings cs;
    cs.page_size = page;
    cs.version = "test";
    cs.max_message_bytes = 4096;
    cs.progress_interval = milliseconds(20);
    cs.list_check_interval = list_check;
    be.per_call = per_call;
    be.watchable = watchable;
    core = mcp_server_core::create(be.backend(), cs);
    s = core->open_session(box.sink());
  }
  ~fixture() { core->shutdown(); }

  void send(const std::string& text) { core->handle_text(s, text); }

  json::value request(int64_t id, const std::string& method,
                      const std::string& params = "{}") {
    send(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) + R"(,"method":")"
         + method + R"(","params":)" + params + "}");
    return box.response(id);
  }

  json::value init(const std::string& caps = "{}",
                   const std::string& version = "2025-11-25") {
    auto r = request(1, "initialize",
                     R"({"protocolVersion":")" + version
                       + R"(","capabilities":)" + caps
                       + R"(,"clientInfo":{"name":"t","version":"1"}})");
    send(R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
    return r;
  }
};

int error_code(const json::value& r) {
  const auto* e = r.find("error");
  return e ? static_cast<int>(e->get_int("code", 0)) : 0;
}

} // namespace

BOOST_AUTO_TEST_CASE(initialize_negotiates_and_requests_before_it_fail) {
  fixture f;
  // Before initialize: ping works, anything else is refused.
  BOOST_CHECK(f.request(7, "ping").find("result"));
  BOOST_CHECK_EQUAL(error_code(f.request(8, "tools/list")),
                    mcp_errors::invalid_request);
  auto r = f.init("{}", "2025-06-18");
  BOOST_REQUIRE(r.find("result"));
  const auto& res = *r.find("result");
  BOOST_CHECK_EQUAL(res.get_string("protocolVersion"), "2025-06-18");
  BOOST_CHECK(res.find("capabilities")->find("tools")->get_bool("listChanged",
                                                                 false));
  BOOST_CHECK(res.find("capabilities")->find("logging"));
  BOOST_CHECK_EQUAL(res.find("serverInfo")->get_string("name"), "mibyan");
  // A second initialize is refused; an unknown version gets our newest.
  BOOST_CHECK_EQUAL(error_code(f.request(2, "initialize", "{}")),
                    mcp_errors::invalid_request);
  fixture g;
  auto r2 = g.init("{}", "1999-01-01");
  BOOST_CHECK_EQUAL(r2.find("result")->get_string("protocolVersion"),
                    "2025-11-25");
}

BOOST_AUTO_TEST_CASE(bad_messages_get_json_rpc_errors) {
  fixture f;
  f.init();
  auto null_error = [&](int code) {
    return f.box.wait_for([code](const json::value& x) {
      return x.find("id") && x.find("id")->is_null() && error_code(x) == code;
    });
  };
  f.send("{not json");
  BOOST_CHECK(!null_error(mcp_errors::parse_error).is_null());
  f.send(R"([{"jsonrpc":"2.0","id":5,"method":"ping"}])");
  BOOST_CHECK(!null_error(mcp_errors::invalid_request).is_null());
  f.send(std::string(5000, ' ')); // over max_message_bytes
  BOOST_CHECK(f.box.wait_for([](const json::value& x) {
                     const auto* e = x.find("error");
                     return e && e->get_string("message").find("too large")
                                   != std::string::npos;
                   })
                .is_object());
  f.send(R"({"jsonrpc":"2.0","id":{"x":1},"method":"ping"})");
  f.send(R"({"jsonrpc":"2.0","id":3,"method":"ping","params":[1]})");
  BOOST_CHECK_EQUAL(error_code(f.box.response(3)), mcp_errors::invalid_params);
  BOOST_CHECK_EQUAL(error_code(f.request(4, "no/such/method")),
                    mcp_errors::method_not_found);
  // A response to a request we never sent is ignored; the session serves on.
  f.send(R"({"jsonrpc":"2.0","id":999,"result":{}})");
  BOOST_CHECK(f.request(6, "ping").find("result"));
}

BOOST_AUTO_TEST_CASE(tools_list_pages_with_cursors) {
  fixture f{2};
  f.init();
  std::vector<std::string> names;
  std::string cursor;
  int pages = 0;
  int64_t id = 10;
  do {
    auto r = f.request(id++, "tools/list",
                       cursor.empty() ? "{}"
                                      : R"({"cursor":")" + cursor + "\"}");
    BOOST_REQUIRE(r.find("result"));
    for (auto& t : r.find("result")->find("tools")->as_array()) {
      names.push_back(t.get_string("name"));
      BOOST_CHECK(t.find("inputSchema")->is_object());
    }
    cursor = r.find("result")->get_string("nextCursor");
    ++pages;
  } while (!cursor.empty() && pages < 10);
  BOOST_CHECK_EQUAL(pages, 3);
  BOOST_CHECK_EQUAL(names.size(), 5u);
  BOOST_CHECK_EQUAL(error_code(f.request(50, "tools/list",
                                         R"({"cursor":"garbage"})")),
                    mcp_errors::invalid_params);
}

BOOST_AUTO_TEST_CASE(tools_call_results_errors_and_unknown_tools) {
  fixture f;
  f.init();
  auto r = f.request(10, "tools/call",
                     R"({"name":"echo","arguments":{"a":1}})");
  BOOST_REQUIRE(r.find("result"));
  const auto& res = *r.find("result");
  BOOST_CHECK(!res.get_bool("isError", true));
  BOOST_CHECK_EQUAL(res.find("structuredContent")->find("echo")->get_int("a",
                                                                         0),
                    1);
  // The Mibyan session id is the MCP session's.
  BOOST_CHECK_EQUAL(res.find("structuredContent")->get_string("session"),
                    mcp_server_core::mibyan_id_of(*f.s));
  BOOST_CHECK_EQUAL(res.find("content")->as_array()[0].get_string("type"),
                    "text");
  auto e = f.request(11, "tools/call", R"({"name":"fail"})");
  BOOST_CHECK(e.find("result")->get_bool("isError", false));
  BOOST_CHECK_EQUAL(error_code(f.request(12, "tools/call",
                                         R"({"name":"nope"})")),
                    mcp_errors::invalid_params);
  BOOST_CHECK_EQUAL(error_code(f.request(13, "tools/call",
                                         R"({"name":"echo","arguments":3})")),
                    mcp_errors::invalid_params);
  // A request id still running cannot be reused.
  f.send(R"({"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"slow"}})");
  BOOST_REQUIRE(wait_until([&] { return f.be.slow_waiting() == 1; }));
  f.send(R"({"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"echo"}})");
  BOOST_CHECK(f.box.wait_for([](const json::value& x) {
                     return error_code(x) == mcp_errors::invalid_request;
                   })
                .is_object());
  f.be.release_slow();
  BOOST_CHECK(f.box
                .wait_for([](const json::value& x) {
                  auto* i = x.find("id");
                  auto* r = x.find("result");
                  return i && i->is_string() && r
                         && r->find("structuredContent");
                })
                .is_object());
}

BOOST_AUTO_TEST_CASE(progress_heartbeats_and_cancellation) {
  fixture f;
  f.init();
  f.send(R"({"jsonrpc":"2.0","id":20,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"tok"}}})");
  auto p1 = f.box.wait_for([](const json::value& x) {
    return x.get_string("method") == "notifications/progress"
           && x.find("params")->get_int("progress", 0) >= 2;
  });
  BOOST_REQUIRE(p1.is_object());
  BOOST_CHECK_EQUAL(p1.find("params")->get_string("progressToken"), "tok");
  f.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":20,"reason":"user"}})");
  BOOST_REQUIRE(wait_until([&] {
    std::lock_guard<std::mutex> g{f.be.m};
    return !f.be.interrupts.empty();
  }));
  // The interrupted call answered the core; no response goes out, and
  // the session serves on.
  BOOST_CHECK(f.request(21, "ping").find("result"));
  BOOST_CHECK(!f.box.has_response(20));
  BOOST_CHECK_EQUAL(f.core->running_calls(), 0u);
}

BOOST_AUTO_TEST_CASE(list_changed_when_the_offered_tools_change) {
  fixture f;
  f.init();
  {
    std::lock_guard<std::mutex> g{f.be.m};
    f.be.names.push_back("new_tool");
  }
  BOOST_CHECK(f.box
                .wait_for([](const json::value& x) {
                  return x.get_string("method")
                         == "notifications/tools/list_changed";
                })
                .is_object());
  // And the new tool is callable... by a name the list now has.
  auto r = f.request(30, "tools/list", R"({"cursor":"o4"})");
  BOOST_CHECK_EQUAL(r.find("result")->find("tools")->as_array()[1].get_string(
                      "name"),
                    "new_tool");
}

// Event-driven: with the interval check out of reach (an hour), a
// registry change (watch_tools) alone brings the list_changed.
BOOST_AUTO_TEST_CASE(list_changed_follows_a_registry_change_at_once) {
  {
    fixture f{2, false, true, milliseconds(3600 * 1000)};
    f.init();
    std::function<void()> changed;
    {
      std::lock_guard<std::mutex> g{f.be.m};
      f.be.names.push_back("new_tool");
      changed = f.be.on_tools_changed;
    }
    BOOST_REQUIRE(changed);
    changed();
    BOOST_CHECK(f.box
                  .wait_for([](const json::value& x) {
                    return x.get_string("method")
                           == "notifications/tools/list_changed";
                  })
                  .is_object());
    f.core->shutdown();
    std::lock_guard<std::mutex> g{f.be.m};
    BOOST_CHECK_EQUAL(f.be.unwatched, 1); // no callback after shutdown
  }
}

// notifications/cancelled cancels that call only (backend.cancel_call with
// its call id); the session's other call answers normally.
BOOST_AUTO_TEST_CASE(cancelled_stops_only_that_call) {
  fixture f{2, true};
  f.init();
  f.send(R"({"jsonrpc":"2.0","id":40,"method":"tools/call","params":{"name":"slow","arguments":{}}})");
  f.send(R"({"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"slow","arguments":{}}})");
  BOOST_REQUIRE(wait_until([&] { return f.be.slow_waiting() == 2u; }));
  std::string first;
  {
    std::lock_guard<std::mutex> g{f.be.m};
    first = f.be.call_ids.at(0);
  }
  f.send(R"({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":40,"reason":"no"}})");
  BOOST_REQUIRE(wait_until([&] {
    std::lock_guard<std::mutex> g{f.be.m};
    return !f.be.cancelled_calls.empty();
  }));
  {
    std::lock_guard<std::mutex> g{f.be.m};
    BOOST_CHECK_EQUAL(f.be.cancelled_calls.size(), 1u);
    BOOST_CHECK(f.be.cancelled_calls.front().find("/" + first)
                != std::string::npos);
    BOOST_CHECK(f.be.interrupts.empty()); // not the whole session
  }
  f.be.release_slow();
  auto r = f.box.response(41);
  BOOST_CHECK(r.find("result"));
  BOOST_CHECK(!f.box.has_response(40)); // the cancelled one stays silent
}

BOOST_AUTO_TEST_CASE(logging_set_level_filters_messages) {
  fixture f;
  f.init();
  // The default (warning) shows failed calls only.
  f.request(39, "tools/call", R"({"name":"echo"})");
  BOOST_CHECK_EQUAL(f.box.count("notifications/message"), 0u);
  f.request(38, "tools/call", R"({"name":"fail"})");
  BOOST_CHECK_EQUAL(f.box.count("notifications/message"), 1u);
  {
    std::lock_guard<std::mutex> g{f.box.m};
    f.box.msgs.clear();
  }
  BOOST_CHECK_EQUAL(error_code(f.request(40, "logging/setLevel",
                                         R"({"level":"loud"})")),
                    mcp_errors::invalid_params);
  BOOST_CHECK(f.request(41, "logging/setLevel", R"({"level":"error"})")
                .find("result"));
  f.request(42, "tools/call", R"({"name":"echo"})");
  BOOST_CHECK_EQUAL(f.box.count("notifications/message"), 0u);
  BOOST_CHECK(f.request(43, "logging/setLevel", R"({"level":"debug"})")
                .find("result"));
  f.request(44, "tools/call", R"({"name":"echo"})");
  auto m = f.box.wait_for([](const json::value& x) {
    return x.get_string("method") == "notifications/message";
  });
  BOOST_REQUIRE(m.is_object());
  BOOST_CHECK_EQUAL(m.find("params")->get_string("level"), "debug");
}

BOOST_AUTO_TEST_CASE(approvals_through_elicitation) {
  fixture f;
  f.init(R"({"elicitation":{}})");
  BOOST_REQUIRE(f.be.channels_set);
  BOOST_REQUIRE(f.be.approve);
  std::atomic<bool> cancelled{false};
  approval_prompt p;
  p.session_id = mcp_server_core::mibyan_id_of(*f.s);
  p.command = "rm -rf /tmp/x";
  p.descriptions = {"recursive delete"};
  p.timeout = seconds(30);
  p.cancelled = &cancelled;
  auto ask = [&](const std::string& answer) {
    approval_choice got = approval_choice::timeout;
    std::thread t([&] { got = f.be.approve(p); });
    // (the inbox is cleared after each question)
    auto req = f.box.wait_for([&](const json::value& x) {
      return x.get_string("method") == "elicitation/create";
    });
    BOOST_REQUIRE(req.is_object());
    BOOST_CHECK_EQUAL(req.find("params")->get_string("mode"), "form");
    BOOST_CHECK(req.find("params")->get_string("message").find("rm -rf")
                != std::string::npos);
    f.send(R"({"jsonrpc":"2.0","id":)" + req.find("id")->dump()
           + R"(,"result":)" + answer + "}");
    t.join();
    {
      std::lock_guard<std::mutex> g{f.box.m};
      f.box.msgs.clear();
    }
    return got;
  };
  BOOST_CHECK(ask(R"({"action":"accept","content":{"decision":"once"}})")
              == approval_choice::once);
  BOOST_CHECK(ask(R"({"action":"accept","content":{"decision":"session"}})")
              == approval_choice::session);
  BOOST_CHECK(ask(R"({"action":"decline"})") == approval_choice::deny);
  BOOST_CHECK(ask(R"({"action":"cancel"})") == approval_choice::deny);
  BOOST_CHECK(ask(R"({"action":"accept","content":{"decision":"maybe"}})")
              == approval_choice::deny);
  // No answer in time: timeout, and the client is told we stopped asking.
  p.timeout = seconds(1);
  auto got = f.be.approve(p);
  BOOST_CHECK(got == approval_choice::timeout);
  BOOST_CHECK(f.box
                .wait_for([](const json::value& x) {
                  return x.get_string("method") == "notifications/cancelled";
                })
                .is_object());
  // A cancelled tool call stops waiting: deny.
  p.timeout = seconds(30);
  cancelled = true;
  BOOST_CHECK(f.be.approve(p) == approval_choice::deny);
  // clarify asks the same way.
  BOOST_REQUIRE(f.be.clarify);
  {
    std::lock_guard<std::mutex> g{f.box.m};
    f.box.msgs.clear();
  }
  clarify_prompt q;
  q.question = "Which file?";
  q.choices = {"a.txt", "b.txt"};
  q.timeout = seconds(30);
  std::atomic<bool> qc{false};
  q.cancelled = &qc;
  std::string answer;
  std::thread t([&] { answer = f.be.clarify(q); });
  auto req = f.box.wait_for([](const json::value& x) {
    return x.get_string("method") == "elicitation/create";
  });
  BOOST_REQUIRE(req.is_object());
  f.send(R"({"jsonrpc":"2.0","id":)" + req.find("id")->dump()
         + R"(,"result":{"action":"accept","content":{"answer":"b.txt"}}})");
  t.join();
  BOOST_CHECK_EQUAL(answer, "b.txt");
}

BOOST_AUTO_TEST_CASE(without_elicitation_nobody_answers) {
  fixture f;
  f.init("{}");
  BOOST_CHECK(f.be.channels_set);
  BOOST_CHECK(!f.be.approve);
  BOOST_CHECK(!f.be.clarify);
}

BOOST_AUTO_TEST_CASE(closing_a_session_interrupts_its_calls) {
  fixture f;
  f.init();
  f.send(R"({"jsonrpc":"2.0","id":60,"method":"tools/call","params":{"name":"slow"}})");
  BOOST_REQUIRE(wait_until([&] { return f.be.slow_waiting() == 1; }));
  auto id = mcp_server_core::id_of(*f.s);
  BOOST_CHECK(f.core->close_session(id, "test"));
  BOOST_CHECK(!f.core->close_session(id, "again"));
  BOOST_CHECK(!f.core->find_session(id));
  BOOST_CHECK(!f.box.has_response(60));
  std::lock_guard<std::mutex> g{f.be.m};
  BOOST_CHECK_EQUAL(f.be.interrupts.size(), 1u);
  BOOST_CHECK_EQUAL(f.be.closed.size(), 1u);
}

BOOST_AUTO_TEST_CASE(elicitation_shapes_follow_the_protocol_version) {
  approval_prompt p;
  p.command = "x";
  p.allow_always = false;
  auto a = approval_elicitation(p, "2025-06-18");
  BOOST_CHECK(!a.find("mode"));
  auto e = a.find("requestedSchema")->find("properties")->find("decision")
             ->find("enum");
  BOOST_REQUIRE(e);
  BOOST_CHECK_EQUAL(e->size(), 3u); // once, session, deny
  json::value always = json::parse(
    R"({"action":"accept","content":{"decision":"always"}})").v.value();
  BOOST_CHECK(approval_choice_of(always, p) == approval_choice::deny);
}

BOOST_AUTO_TEST_CASE(sessions_are_capped) {
  fake be;
  mcp_core_settings cs;
  cs.max_sessions = 2;
  auto core = mcp_server_core::create(be.backend(), cs);
  auto a = core->open_session(nullptr);
  auto b = core->open_session(nullptr);
  BOOST_REQUIRE(a && b);
  BOOST_CHECK(mcp_server_core::id_of(*a) != mcp_server_core::id_of(*b));
  BOOST_CHECK(!core->open_session(nullptr));
  BOOST_CHECK(core->close_session(mcp_server_core::id_of(*a), "test"));
  BOOST_CHECK(core->open_session(nullptr));
  core->shutdown();
  BOOST_CHECK_EQUAL(core->session_count(), 0u);
  BOOST_CHECK(!core->open_session(nullptr));
}
