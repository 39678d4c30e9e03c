// The execute_code bridge (docs/execute_code.md, "Script tool calls"):
// every script call runs in its own invocation actor on the middleman's I/O
// thread (actors/tool_invocation.hpp), a tool declaring itself non-blocking
// in that actor's handler, others on the blocking pool, each call with its
// own deadline timer. These tests pin that shape and its guarantees:
// deadlines (also an earlier one arriving after a later one), cancellation
// when the cell ends, budgets.
#define BOOST_TEST_MODULE bridge_fast_path
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <mutex>
#include <thread>

#include <pthread.h>

#include "caf/actor_registry.hpp"
#include "caf/actor_system.hpp"

#include "mibyan/actors.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/tool.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

std::atomic<int> noop_runs{0};
std::atomic<int> cancelled_seen{0};
// The runtime under test, and the running actors its tools saw: during
// the last non-blocking call, and once `hold_calls` pool calls were in
// flight at the same time.
std::atomic<runtime*> current_rt{nullptr};
std::atomic<long> actors_in_noop{-1};
std::atomic<long> actors_in_pool{-1};
std::atomic<int> pool_in_flight{0};
std::atomic<int> hold_calls{0};

long running_actors() {
  auto* rt = current_rt.load();
  return rt ? static_cast<long>(actor_system_of(*rt).registry().running())
            : -1;
}
std::mutex names_mtx;
std::string noop_thread, wait_thread; // names of the threads that ran them

std::string thread_name() {
  char buf[32] = {0};
  ::pthread_getname_np(::pthread_self(), buf, sizeof buf);
  return buf;
}

// Replaces web_search: answers at once; declared non-blocking.
class inline_noop final : public tool {
public:
  const char* name() const override { return "web_search"; }
  const char* toolset() const override { return "web"; }
  std::string description() const override { return "test no-op"; }
  // Callable from scripts, like the built-in tool it replaces.
  script_policy script() const override { return {true, {}, ""}; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "query":{"type":"string"},"limit":{"type":"integer"}},
      "required":["query"]})").v;
  }
  bool non_blocking() const override { return true; }
  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    ++noop_runs;
    actors_in_noop = running_actors();
    {
      std::lock_guard<std::mutex> g{names_mtx};
      noop_thread = thread_name();
    }
    json::value r;
    r["echo"] = args.get_string("query");
    r["from_script"] = ctx.from_script;
    return r;
  }
};

// Replaces web_extract: waits until cancelled or for `hold_ms` (the first
// URL, as a number); its deadline is the second URL in milliseconds.
class waiting_tool final : public tool {
public:
  const char* name() const override { return "web_extract"; }
  const char* toolset() const override { return "web"; }
  std::string description() const override { return "test wait"; }
  // Callable from scripts, like the built-in tool it replaces.
  script_policy script() const override { return {true, {}, ""}; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "urls":{"type":"array","items":{"type":"string"}},
      "char_limit":{"type":"integer"}},"required":["urls"]})").v;
  }
  std::chrono::milliseconds deadline(const json::value& args,
                                     const options&) const override {
    auto& urls = args.find("urls")->as_array();
    return std::chrono::milliseconds(
      urls.size() > 1 ? std::atoll(urls[1].as_string().c_str()) : 60000);
  }
  json::value run(const json::value& args,
                  const tool_context& ctx) const override {
    auto hold = std::chrono::milliseconds(
      std::atoll(args.find("urls")->as_array()[0].as_string().c_str()));
    {
      std::lock_guard<std::mutex> g{names_mtx};
      wait_thread = thread_name();
    }
    if (++pool_in_flight == hold_calls)
      actors_in_pool = running_actors();
    struct leave {
      ~leave() { --pool_in_flight; }
    } on_return;
    auto until = std::chrono::steady_clock::now() + hold;
    while (std::chrono::steady_clock::now() < until) {
      if (ctx.is_cancelled()) {
        ++cancelled_seen;
        return error_result("cancelled");
      }
      std::this_thread::sleep_for(2ms);
    }
    json::value r;
    r["waited"] = true;
    return r;
  }
};

// Replaces search_files: its deadline() throws for the pattern "boom",
// outside the tool's run (where the registry would catch it): the failure
// happens inside the invocation actor itself.
class throwing_tool final : public tool {
public:
  const char* name() const override { return "search_files"; }
  const char* toolset() const override { return "file"; }
  std::string description() const override { return "test throw"; }
  script_policy script() const override { return {true, {}, ""}; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "pattern":{"type":"string"}},"required":["pattern"]})").v;
  }
  std::chrono::milliseconds deadline(const json::value& args,
                                     const options&) const override {
    if (args.get_string("pattern") == "boom")
      throw std::runtime_error("deadline exploded");
    return std::chrono::milliseconds{60000};
  }
  json::value run(const json::value& args, const tool_context&) const override {
    json::value r;
    r["echo"] = args.get_string("pattern");
    return r;
  }
};

struct fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  void start(int64_t max_tool_calls = 50) {
    auto opts = test::kernel_test_options(home.path());
    opts.code_execution.max_tool_calls = max_tool_calls;
    std::vector<std::unique_ptr<tool>> extra;
    extra.push_back(std::make_unique<inline_noop>());
    extra.push_back(std::make_unique<waiting_tool>());
    extra.push_back(std::make_unique<throwing_tool>());
    std::string err;
    auto made = create_runtime(opts, std::move(extra));
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
    current_rt = rt.get();
  }

  ~fixture() { current_rt = nullptr; }

  json::value exec(const std::string& code) {
    return test::run_cell(*rt, work.path(), code);
  }
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(bridge, fixture)

BOOST_AUTO_TEST_CASE(non_blocking_tool_answers_every_call_in_order) {
  start();
  noop_runs = 0;
  auto r = exec("from mibyan_tools import web_search\n"
                "out = [web_search(str(i))['echo'] for i in range(40)]\n"
                "assert out == [str(i) for i in range(40)], out\n"
                "print(web_search('x')['from_script'])\n");
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  BOOST_TEST(r.get_string("output") == "True\n");
  BOOST_TEST(r.get_int("tool_calls_made", -1) == 41);
  BOOST_TEST(noop_runs.load() == 41);
}

BOOST_AUTO_TEST_CASE(non_blocking_runs_on_the_io_thread_others_on_the_pool) {
  start();
  auto r = exec("from mibyan_tools import web_search, web_extract\n"
                "web_search('x')\n"
                "print(web_extract(['1'])['waited'])\n");
  BOOST_TEST(r.get_string("output") == "True\n", r.dump());
  std::lock_guard<std::mutex> g{names_mtx};
  // A non-blocking tool runs in its invocation actor's handler, and that
  // actor lives on the middleman's I/O thread (CAF names it), beside the
  // kernel broker that spawned it; any other tool runs on the pool's
  // threads (ours), never on a CAF scheduler thread.
  BOOST_TEST(noop_thread == "caf.multiplexer");
  BOOST_TEST(wait_thread == "mibyan.block");
}

BOOST_AUTO_TEST_CASE(every_call_runs_in_its_own_invocation_actor) {
  start();
  hold_calls = 3;
  pool_in_flight = 0;
  actors_in_noop = -1;
  actors_in_pool = -1;
  // A non-blocking call first (its own invocation is alive while it
  // runs), then three pool calls in flight at once: three more actors.
  auto r = exec("import threading\n"
                "from mibyan_tools import web_search, web_extract\n"
                "web_search('x')\n"
                "ts = [threading.Thread(target=lambda: web_extract(['400']))"
                " for _ in range(3)]\n"
                "[t.start() for t in ts]\n"
                "[t.join() for t in ts]\n"
                "print('ok')\n");
  BOOST_TEST(r.get_string("output") == "ok\n", r.dump());
  BOOST_REQUIRE(actors_in_noop.load() > 0);
  BOOST_REQUIRE_MESSAGE(actors_in_pool.load() > 0,
                        "the three calls were never in flight together");
  BOOST_TEST(actors_in_pool.load() - actors_in_noop.load() >= 2,
             "running actors: " << actors_in_noop.load() << " during the "
             "non-blocking call, " << actors_in_pool.load()
             << " with three pool calls in flight");
  hold_calls = 0;
}

BOOST_AUTO_TEST_CASE(budget_applies_to_non_blocking_calls) {
  start(3);
  auto r = exec("from mibyan_tools import web_search\n"
                "for i in range(5):\n"
                "    print(web_search('x').get('error', 'ok'))\n");
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "ok\nok\nok\n"), out);
  BOOST_TEST(contains(out, "Tool call limit reached (3)"), out);
  BOOST_TEST(r.get_int("tool_calls_made", -1) == 3);
}

BOOST_AUTO_TEST_CASE(pool_call_past_its_deadline_times_out_and_is_cancelled) {
  start();
  cancelled_seen = 0;
  auto r = exec("from mibyan_tools import web_extract\n"
                "print(web_extract(['30000', '300']))\n");
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "did not finish within its deadline"), out);
  BOOST_TEST(contains(out, "'status': 'timeout'"), out);
  for (int i = 0; i < 500 && cancelled_seen.load() == 0; ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(cancelled_seen.load() == 1);
}

BOOST_AUTO_TEST_CASE(earlier_deadline_after_a_later_one_still_fires) {
  start();
  cancelled_seen = 0;
  // The first call arms the timer for its 20 s deadline; the second call's
  // 300 ms deadline must fire on time, not after the first one's.
  auto r = exec("import threading, time\n"
                "from mibyan_tools import web_extract\n"
                "slow = {}\n"
                "t = threading.Thread(target=lambda: slow.update("
                "r=web_extract(['1500', '20000'])))\n"
                "t.start()\n"
                "time.sleep(0.2)\n"
                "t0 = time.monotonic()\n"
                "fast = web_extract(['30000', '300'])\n"
                "took = time.monotonic() - t0\n"
                "t.join()\n"
                "print(fast.get('status'), slow['r'].get('waited'),"
                " took < 1.4)\n");
  BOOST_TEST(r.get_string("output") == "timeout True True\n", r.dump());
}

BOOST_AUTO_TEST_CASE(cell_end_cancels_a_running_pool_call) {
  start();
  cancelled_seen = 0;
  // A thread's call is still running when the cell ends: the tool sees its
  // cancel flag (the cell's calls belong to it). The thread outlives its
  // cell, so its call ends in an error (the cell's connection is gone);
  // it swallows that, or its traceback could land in the next cell's
  // output.
  auto r = exec("import threading, time\n"
                "from mibyan_tools import web_extract\n"
                "def call():\n"
                "    try:\n"
                "        web_extract(['30000'])\n"
                "    except BaseException:\n"
                "        pass\n"
                "threading.Thread(target=call, daemon=True).start()\n"
                "time.sleep(0.3)\n");
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  for (int i = 0; i < 500 && cancelled_seen.load() == 0; ++i)
    std::this_thread::sleep_for(10ms);
  BOOST_TEST(cancelled_seen.load() == 1);
  // The kernel is still usable for the next cell.
  auto next = exec("from mibyan_tools import web_search\n"
                   "print(web_search('again')['echo'])\n");
  BOOST_TEST(next.get_string("output") == "again\n", next.dump());
}

BOOST_AUTO_TEST_CASE(a_failing_invocation_is_contained) {
  start();
  // The invocation of the first call fails before its tool runs: that call
  // gets an error result, and the cell, its kernel and the next calls go
  // on.
  auto r = exec("from mibyan_tools import search_files, web_search\n"
                "bad = search_files('boom')\n"
                "print('error' in bad, bad.get('error', ''))\n"
                "print(search_files('fine')['echo'])\n"
                "print(web_search('x')['echo'])\n");
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "True Tool 'search_files' failed"), out);
  BOOST_TEST(contains(out, "\nfine\nx\n"), out);
  auto next = exec("from mibyan_tools import web_search\n"
                   "print(web_search('again')['echo'])\n");
  BOOST_TEST(next.get_string("output") == "again\n", next.dump());
}

BOOST_AUTO_TEST_SUITE_END()
