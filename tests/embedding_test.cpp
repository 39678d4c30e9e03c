// The facade of docs/embedding.md against the scripted provider server:
// host tools called by the model and from execute_code scripts, interrupt
// mid-tool, close(), agents in parallel, queued turns in order.
#define BOOST_TEST_MODULE embedding
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "caf/all.hpp"

#include "base/json.hpp"
#include "mibyan/actors.hpp"
#include "mibyan/mibyan.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char* const provider_vars[] = {"OPENAI_API_KEY", "OPENROUTER_API_KEY",
                                     "ANTHROPIC_API_KEY", "CUSTOM_API_KEY"};

// A Chat Completions response body (tests/support/scripted_replies.hpp).
std::string completion(const std::string& content,
                       const std::vector<test::scripted_call>& calls = {}) {
  return test::chat_completion(content, calls);
}

// Polls `cond` every 10 ms for at most `limit`.
template <class F>
bool wait_until(F cond, milliseconds limit = milliseconds(20000)) {
  auto end = steady_clock::now() + limit;
  while (steady_clock::now() < end) {
    if (cond())
      return true;
    std::this_thread::sleep_for(milliseconds(10));
  }
  return cond();
}

// What the host tools of the fixture saw.
struct host_log {
  std::mutex mtx;
  std::vector<std::string> args;   // get_weather arguments, in call order
  std::vector<bool> from_script;   // ... and where they came from
  std::atomic<int> blocking_started{0};
  std::atomic<bool> blocking_saw_cancel{false};
  std::atomic<int> rendezvous{0};
};

struct fixture {
  test::http_server server;
  test::temp_dir home;
  std::unique_ptr<runtime> rt;
  std::shared_ptr<host_log> log = std::make_shared<host_log>();
  std::map<std::string, std::optional<std::string>> saved_env;

  fixture() {
    for (auto name : provider_vars) {
      auto v = std::getenv(name);
      saved_env[name] = v ? std::optional<std::string>{v} : std::nullopt;
      ::unsetenv(name);
    }
    // The configuration comes from a file named by runtime_config.
    auto yaml = home / "embed.yaml";
    std::ofstream{yaml} << "agent:\n  api_max_retries: 1\n"
                           "code_execution:\n  prestart_kernels: 0\n";
    runtime_config cfg;
    cfg.home = home.path();
    cfg.config_file = yaml;
    cfg.provider.provider = "custom";
    cfg.provider.model = "m";
    cfg.tools = host_tools();
    std::string err;
    auto made = runtime::create(cfg);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  ~fixture() {
    rt.reset();
    for (auto& [name, v] : saved_env)
      if (v)
        ::setenv(name.c_str(), v->c_str(), 1);
      else
        ::unsetenv(name.c_str());
  }

  std::vector<host_tool> host_tools() {
    std::vector<host_tool> tools;
    auto lg = log;
    host_tool weather;
    weather.name = "get_weather";
    weather.description = "Returns the weather of a city.";
    weather.schema_json = R"({"type":"object","properties":)"
                          R"({"city":{"type":"string"}},"required":["city"]})";
    weather.allow_in_scripts = true;
    weather.handler = [lg](const std::string& args, const host_tool_call& c) {
      std::lock_guard<std::mutex> guard{lg->mtx};
      lg->args.push_back(args);
      lg->from_script.push_back(c.from_script);
      auto city = json::parse(args).v->get_string("city", "?");
      return R"({"city":")" + city + R"(","sky":"sunny-)" + city + R"("})";
    };
    tools.push_back(weather);

    // Waits until cancelled (asynchronous handler, completes late).
    host_tool blocking;
    blocking.name = "wait_forever";
    blocking.description = "Never finishes on its own.";
    blocking.async_handler = [lg](const std::string&, const host_tool_call& c,
                                  host_tool_completion done) {
      ++lg->blocking_started;
      const std::atomic<bool>* flag = c.cancel_flag;
      std::thread([lg, flag, done] {
        while (!flag->load())
          std::this_thread::sleep_for(milliseconds(5));
        lg->blocking_saw_cancel = true;
        done(R"({"late":true})");
      }).detach();
    };
    tools.push_back(blocking);

    // Returns only when two calls are inside it at once (or after 20 s).
    host_tool meet;
    meet.name = "meet";
    meet.description = "Rendezvous of two agents.";
    meet.parallel_safe = true;
    meet.handler = [lg](const std::string&, const host_tool_call&) {
      ++lg->rendezvous;
      bool met = wait_until([&] { return lg->rendezvous.load() >= 2; });
      return std::string{met ? R"({"met":true})" : R"({"met":false})"};
    };
    tools.push_back(meet);

    // Runs until cancelled; its deadline is 200 ms.
    host_tool slow;
    slow.name = "slow";
    slow.description = "Stops only when cancelled.";
    slow.timeout = milliseconds(200);
    slow.handler = [lg](const std::string&, const host_tool_call& c) {
      while (!c.cancelled())
        std::this_thread::sleep_for(milliseconds(5));
      lg->blocking_saw_cancel = true;
      return std::string{R"({"finished":true})"};
    };
    tools.push_back(slow);
    return tools;
  }

  // Scripts the next reply to `prefix` + "/chat/completions".
  void script(const std::string& prefix, const std::string& body,
              int delay_ms = 0) {
    json::value s;
    s["path"] = prefix + "/chat/completions";
    s["status"] = 200;
    s["body"] = body;
    if (delay_ms > 0)
      s["delay_ms"] = delay_ms;
    server.script(s.dump());
  }

  agent_config agent_cfg(const std::string& prefix = "/v1") {
    agent_config ac;
    ac.provider.base_url = server.url(prefix);
    ac.provider.api_key = "sk-test-0123456789";
    return ac;
  }

  // The chat request bodies received on `prefix`.
  std::vector<json::value> requests(const std::string& prefix = "/v1") {
    auto parsed = json::parse(server.requests());
    BOOST_REQUIRE(parsed);
    std::vector<json::value> out;
    for (auto& r : parsed.v->as_array()) {
      if (r["path"].as_string() != prefix + "/chat/completions")
        continue;
      out.push_back(*json::parse(r["body"].as_string()).v);
    }
    return out;
  }

  static turn_options no_stream() {
    turn_options o;
    o.stream = false;
    return o;
  }
};

// The content of the last message of a chat request.
std::string last_content(const json::value& body) {
  auto msgs = body.find("messages");
  if (msgs == nullptr || !msgs->is_array() || msgs->as_array().empty())
    return "";
  auto c = msgs->as_array().back().find("content");
  if (c == nullptr)
    return "";
  return c->is_string() ? c->as_string() : c->dump();
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(embedding, fixture)

BOOST_AUTO_TEST_CASE(model_calls_host_tool_with_events) {
  script("/v1", completion("", {{"c1", "get_weather", R"({"city":"Oslo"})"}}));
  script("/v1", completion("Oslo is sunny."));
  auto ac = agent_cfg();
  std::vector<std::string> events;
  std::mutex mtx;
  ac.on_tool_start = [&](const tool_event& e) {
    std::lock_guard<std::mutex> guard{mtx};
    events.push_back("start " + e.tool + " " + e.call_id + " " + e.args_json);
  };
  ac.on_tool_end = [&](const tool_event& e) {
    std::lock_guard<std::mutex> guard{mtx};
    events.push_back("end " + e.tool + " " + e.result_json);
  };
  agent a{*rt, ac};
  auto r = a.run("Weather in Oslo?", no_stream()).get();
  BOOST_TEST_REQUIRE(r.error.empty(), r.error);
  BOOST_TEST(r.completed);
  BOOST_TEST(r.final_response.value_or("") == "Oslo is sunny.");
  BOOST_TEST(r.session_id == a.session_id());
  {
    std::lock_guard<std::mutex> guard{log->mtx};
    BOOST_TEST_REQUIRE(log->args.size() == 1u);
    BOOST_TEST(contains(log->args[0], "Oslo"));
    BOOST_TEST(!log->from_script[0]);
  }
  // The model saw the host tool and its result.
  auto reqs = requests();
  BOOST_TEST_REQUIRE(reqs.size() == 2u);
  BOOST_TEST(contains(reqs[0]["tools"].dump(), "get_weather"));
  BOOST_TEST(contains(last_content(reqs[1]), "sunny-Oslo"));
  // Events came before the completion, start before end.
  std::lock_guard<std::mutex> guard{mtx};
  BOOST_TEST_REQUIRE(events.size() == 2u);
  BOOST_TEST(events[0] == R"(start get_weather c1 {"city":"Oslo"})");
  BOOST_TEST(contains(events[1], "end get_weather"));
  BOOST_TEST(contains(events[1], "sunny-Oslo"));
}

BOOST_AUTO_TEST_CASE(streamed_text_reaches_on_text) {
  auto delta = [](const std::string& text, const std::string& finish) {
    json::value ch;
    ch["index"] = 0;
    ch["delta"] = json::value::make_object();
    if (!text.empty())
      ch["delta"]["content"] = text;
    if (!finish.empty())
      ch["finish_reason"] = finish;
    json::value d;
    d["choices"] = json::value::make_array();
    d["choices"].push_back(std::move(ch));
    return "data: " + d.dump() + "\n\n";
  };
  json::value s;
  s["path"] = "/v1/chat/completions";
  s["status"] = 200;
  s["chunks"] = json::value::make_array();
  for (auto& c : {delta("Hello ", ""), delta("from ", ""), delta("a stream.", ""),
                  delta("", "stop"), std::string{"data: [DONE]\n\n"}})
    s["chunks"].push_back(c);
  s["chunk_ms"] = 5;
  s["headers"]["Content-Type"] = "text/event-stream";
  server.script(s.dump());
  auto ac = agent_cfg();
  std::string text;
  int pieces = 0;
  ac.on_text = [&](const std::string& t) {
    text += t; // one callback at a time per agent
    ++pieces;
  };
  agent a{*rt, ac};
  auto r = a.run("Stream please.").get();
  BOOST_TEST_REQUIRE(r.error.empty(), r.error);
  BOOST_TEST(r.final_response.value_or("") == "Hello from a stream.");
  BOOST_TEST(text == "Hello from a stream.");
  BOOST_TEST(pieces >= 2);
}

BOOST_AUTO_TEST_CASE(script_calls_host_tool) {
  json::value code;
  code["code"] = "from mibyan_tools import get_weather\n"
                 "r = get_weather(city='Bergen')\n"
                 "print('script got', r['sky'])\n";
  script("/v1", completion("", {{"c1", "execute_code", code.dump()}}));
  script("/v1", completion("Done."));
  agent a{*rt, agent_cfg()};
  auto r = a.run("Use a script.", no_stream()).get();
  BOOST_TEST_REQUIRE(r.error.empty(), r.error);
  BOOST_TEST(r.completed);
  {
    std::lock_guard<std::mutex> guard{log->mtx};
    BOOST_TEST_REQUIRE(log->args.size() == 1u);
    BOOST_TEST(contains(log->args[0], "Bergen"));
    BOOST_TEST(log->from_script[0]);
  }
  auto reqs = requests();
  BOOST_TEST_REQUIRE(reqs.size() == 2u);
  BOOST_TEST(contains(last_content(reqs[1]), "script got sunny-Bergen"),
             last_content(reqs[1]));
  // The execute_code description lists the host tool's signature; the
  // tool that scripts may not call is not listed.
  auto tools = reqs[0]["tools"].dump();
  BOOST_TEST(contains(tools, "get_weather(city)"));
  BOOST_TEST(!contains(tools, "wait_forever("));
}

BOOST_AUTO_TEST_CASE(interrupt_mid_tool) {
  script("/v1", completion("", {{"c1", "wait_forever", "{}"}}));
  agent a{*rt, agent_cfg()};
  auto f = a.run("Wait.", no_stream());
  BOOST_TEST_REQUIRE(wait_until([&] { return log->blocking_started >= 1; }));
  a.interrupt("stop waiting");
  BOOST_TEST_REQUIRE((f.wait_for(seconds(20)) == std::future_status::ready));
  auto r = f.get();
  BOOST_TEST(r.interrupted);
  BOOST_TEST(!r.completed);
  BOOST_TEST(wait_until([&] { return log->blocking_saw_cancel.load(); }));
  // The agent stays usable after an interrupt.
  script("/v1", completion("Back."));
  auto r2 = a.run("Again.", no_stream()).get();
  BOOST_TEST(r2.final_response.value_or("") == "Back.");
}

BOOST_AUTO_TEST_CASE(close_twice_disposes_kernels) {
  json::value code;
  code["code"] = "print('kernel up')";
  script("/v1", completion("", {{"c1", "execute_code", code.dump()}}));
  script("/v1", completion("Ran."));
  agent a{*rt, agent_cfg()};
  auto r = a.run("Run code.", no_stream()).get();
  BOOST_TEST_REQUIRE(r.completed, r.error);
  auto kernels = [&] {
    return json::parse(rt->kernel_stats()).v->get_int("kernels", -1);
  };
  BOOST_TEST(kernels() == 1);
  a.close();
  a.close();
  BOOST_TEST(wait_until([&] { return kernels() == 0; }));
  auto after = a.run("Anyone?").get();
  BOOST_TEST(!after.error.empty());
  // The stored session resumes in a new agent.
  script("/v1", completion("Resumed."));
  auto ac = agent_cfg();
  ac.session_id = a.session_id();
  agent b{*rt, ac};
  auto r2 = b.run("Still there?", no_stream()).get();
  BOOST_TEST(r2.final_response.value_or("") == "Resumed.");
  auto reqs = requests();
  BOOST_TEST(contains(reqs.back()["messages"].dump(), "Run code."));
}

BOOST_AUTO_TEST_CASE(two_agents_in_parallel) {
  // Each agent's model calls `meet`, which returns only once both calls
  // are inside it: the turns must overlap.
  for (auto prefix : {"/a/v1", "/b/v1"}) {
    script(prefix, completion("", {{"m1", "meet", "{}"}}));
    script(prefix, completion(std::string{"done "} + prefix));
  }
  agent a{*rt, agent_cfg("/a/v1")};
  agent b{*rt, agent_cfg("/b/v1")};
  auto fa = a.run("A", no_stream());
  auto fb = b.run("B", no_stream());
  auto ra = fa.get();
  auto rb = fb.get();
  BOOST_TEST(ra.final_response.value_or("") == "done /a/v1");
  BOOST_TEST(rb.final_response.value_or("") == "done /b/v1");
  auto seen = last_content(requests("/a/v1")[1]);
  bool met = contains(seen, "\"met\": true") || contains(seen, "\"met\":true");
  BOOST_TEST(met, seen);
  BOOST_TEST(a.session_id() != b.session_id());
}

BOOST_AUTO_TEST_CASE(queued_runs_keep_order) {
  // The first reply is slow, so the later runs queue behind it.
  script("/v1", completion("r1"), 300);
  script("/v1", completion("r2"));
  script("/v1", completion("r3"));
  agent a{*rt, agent_cfg()};
  std::vector<std::future<turn_result>> fs;
  for (auto msg : {"one", "two", "three"})
    fs.push_back(a.run(msg, no_stream()));
  std::vector<std::string> finals;
  for (auto& f : fs)
    finals.push_back(f.get().final_response.value_or(""));
  BOOST_TEST(finals == (std::vector<std::string>{"r1", "r2", "r3"}),
             boost::test_tools::per_element());
  auto reqs = requests();
  BOOST_TEST_REQUIRE(reqs.size() == 3u);
  BOOST_TEST(last_content(reqs[0]) == "one");
  BOOST_TEST(last_content(reqs[1]) == "two");
  BOOST_TEST(last_content(reqs[2]) == "three");
  // The callback overload answers in order too.
  script("/v1", completion("r4"));
  script("/v1", completion("r5"));
  // A completion callback may still be running (here: releasing its lock)
  // after the waiter it signalled has woken, and the agent lets it outlive
  // this scope (docs/embedding.md): what it touches is owned by the
  // callback, never a reference to this test's locals.
  struct order_log {
    std::mutex mtx;
    std::vector<std::string> done_order;
    std::promise<void> both;
  };
  auto order = std::make_shared<order_log>();
  auto both = order->both.get_future();
  for (auto msg : {"four", "five"})
    a.run(msg, no_stream(), [order](turn_result r) {
      std::lock_guard<std::mutex> guard{order->mtx};
      order->done_order.push_back(r.final_response.value_or(""));
      if (order->done_order.size() == 2)
        order->both.set_value();
    });
  BOOST_TEST_REQUIRE((both.wait_for(seconds(20)) == std::future_status::ready));
  std::lock_guard<std::mutex> guard{order->mtx};
  BOOST_TEST(order->done_order == (std::vector<std::string>{"r4", "r5"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(host_tool_deadline_is_enforced) {
  // The invocation's deadline applies to host tools as to built-in ones:
  // the call answers as timed out and the handler sees its cancel flag.
  auto out = rt->call_tool({"deadline-s", "c1", "slow", "{}", ""});
  BOOST_TEST(out.timed_out, out.result_json);
  BOOST_TEST(contains(out.result_json, "error"), out.result_json);
  BOOST_TEST(wait_until([&] { return log->blocking_saw_cancel.load(); }));
  // Arguments are checked against the schema before the handler runs.
  auto bad = rt->call_tool({"deadline-s", "c2", "get_weather", "{}", ""});
  BOOST_TEST(contains(bad.result_json, "city"), bad.result_json);
  std::lock_guard<std::mutex> guard{log->mtx};
  BOOST_TEST(log->args.empty());
}

BOOST_AUTO_TEST_CASE(bad_host_tools_are_refused) {
  auto make = [&](host_tool t) {
    runtime_config cfg;
    cfg.home = home.path();
    cfg.tools.push_back(std::move(t));
    auto r = runtime::create(cfg);
    BOOST_TEST(!r);
    BOOST_TEST((r.code == status_code::config_invalid));
    return r.error;
  };
  host_tool t;
  t.name = "read_file";
  t.handler = [](const std::string&, const host_tool_call&) { return ""; };
  BOOST_TEST(contains(make(t), "built-in"));
  t.name = "ok_name";
  t.schema_json = "[1,2]";
  BOOST_TEST(contains(make(t), "schema_json"));
  t.schema_json = R"({"type":"object"})";
  t.handler = nullptr;
  BOOST_TEST(contains(make(t), "exactly one"));
  runtime_config missing;
  missing.home = home.path();
  missing.config_file = home / "no-such.yaml";
  auto r = runtime::create(missing);
  BOOST_TEST(!r);
  BOOST_TEST(contains(r.error, "no-such.yaml"));
}

BOOST_AUTO_TEST_CASE(actor_level_in_host_system) {
  // The application's own system; Mibyan's actors are spawned into it.
  caf::actor_system_config cfg;
  actors::configure(cfg);
  caf::actor_system sys{cfg};
  test::temp_dir host_home; // a second store needs its own directory
  {
    runtime_config rc;
    rc.home = host_home.path();
    rc.provider.provider = "custom";
    rc.provider.model = "m";
    rc.tools = host_tools();
    auto made = actors::attach(sys, rc);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    auto hrt = std::move(*made);
    BOOST_TEST(&actor_system_of(*hrt) == &sys);

    auto events = std::make_shared<std::vector<std::string>>();
    auto events_mtx = std::make_shared<std::mutex>();
    auto listener = sys.spawn(
      [=]() -> actors::event_listener::behavior_type {
        return {
          [=](actors::event_atom, const std::string& kind,
              const std::string& text) {
            std::lock_guard<std::mutex> guard{*events_mtx};
            events->push_back(kind + " " + text);
          },
          [=](actors::event_atom, const tool_event& e) {
            std::lock_guard<std::mutex> guard{*events_mtx};
            events->push_back(
              (e.what == tool_event::phase::start ? "tool_start " : "tool_end ")
              + e.tool + " " + e.args_json + " " + e.result_json);
          },
        };
      });
    script("/v1", completion("", {{"c1", "get_weather", R"({"city":"Rome"})"}}));
    script("/v1", completion("Rome is sunny."));
    auto conv = actors::spawn_conversation(*hrt, agent_cfg(), listener);
    caf::scoped_actor self{sys};
    turn_result turn;
    self->request(conv, caf::infinite, actors::run_atom_v,
                  std::string{"Weather in Rome?"})
      .receive([&](turn_result& r) { turn = std::move(r); },
               [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });
    BOOST_TEST(turn.started, turn.error);
    BOOST_TEST(turn.completed, turn.error);
    BOOST_TEST(turn.final_response.value_or("") == "Rome is sunny.");
    // The typed result carries the conversation (no JSON in between).
    BOOST_TEST_REQUIRE(!turn.messages.empty());
    BOOST_TEST(turn.messages.back().role == "assistant");
    std::string result;
    BOOST_TEST(wait_until([&] {
      std::lock_guard<std::mutex> guard{*events_mtx};
      return events->size() >= 2;
    }));
    {
      std::lock_guard<std::mutex> guard{*events_mtx};
      BOOST_TEST(contains(events->at(0), "tool_start"));
      BOOST_TEST(contains(events->at(1), "tool_end"));
      BOOST_TEST(contains(events->at(1), "sunny-Rome"));
    }

    auto tools = actors::spawn_tool_actor(*hrt);
    self->request(tools, caf::infinite, actors::tool_atom_v,
                  std::string{"host-s"}, std::string{"get_weather"},
                  std::string{R"({"city":"Lima"})"})
      .receive([&](std::string& r) { result = std::move(r); },
               [&](caf::error& e) { BOOST_FAIL(sys.render(e)); });
    BOOST_TEST(contains(result, "sunny-Lima"), result);

    // The contract of mibyan/actors.hpp: the runtime goes only after the
    // actors spawned into it have exited (a conversation's exit closes its
    // session through the runtime).
    for (auto& a : {caf::actor_cast<caf::actor>(conv),
                    caf::actor_cast<caf::actor>(tools),
                    caf::actor_cast<caf::actor>(listener)}) {
      self->monitor(a);
      self->send_exit(a, caf::exit_reason::user_shutdown);
    }
    for (int i = 0; i < 3; ++i)
      self->receive([](const caf::down_msg&) {});
  }
}

BOOST_AUTO_TEST_SUITE_END()
