// The warm-cell fast path (docs/benchmarks-history.md, "Bridge, warm cell and CLI
// start-up"): the runner's compile cache and reused capture streams, the
// kernel broker's one deadline timer for back-to-back cells, and the
// runtime's call facade. Functional checks only; no timings.
#define BOOST_TEST_MODULE warm_cell
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "kernels/direct_writes.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/kernel_harness.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/tool.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A tool whose result is far larger than a socket buffer: its reply to a
// script cannot be written at once (kernels/direct_writes.hpp hands the
// rest to the scribe). Replaces web_search (answered on the broker's
// thread) or search_files (on the blocking pool).
class big_result_tool final : public tool {
public:
  big_result_tool(const char* name, bool inline_answer)
      : name_(name), inline_(inline_answer) {}
  const char* name() const override { return name_; }
  const char* toolset() const override { return "web"; }
  std::string description() const override { return "test: big result"; }
  // Callable from scripts, like the built-in tool it replaces.
  script_policy script() const override { return {true, {}, ""}; }
  bool non_blocking() const override { return inline_; }
  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "query":{"type":"string"},"pattern":{"type":"string"}}})").v;
  }
  json::value run(const json::value&, const tool_context&) const override {
    json::value r;
    std::string big(3 << 20, 'x');
    for (size_t i = 0; i < big.size(); i += 1000)
      big[i] = 'y';
    r["data"] = big;
    return r;
  }

private:
  const char* name_;
  bool inline_;
};

struct runtime_fixture {
  temp_dir home;
  temp_dir work;
  std::unique_ptr<runtime> rt;

  void start(int64_t timeout_seconds = 300, bool big_tools = false) {
    auto opts = test::kernel_test_options(home.path());
    opts.code_execution.timeout = timeout_seconds;
    std::string err;
    std::vector<std::unique_ptr<tool>> extra;
    if (big_tools) {
      extra.push_back(std::make_unique<big_result_tool>("web_search", true));
      extra.push_back(
        std::make_unique<big_result_tool>("search_files", false));
    }
    auto made = create_runtime(opts, std::move(extra));
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  json::value exec(const std::string& code) {
    return test::run_cell(*rt, work.path(), code);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(runner_compile_cache)

// The same text runs many times (the cache serves it from the third run)
// and always sees the globals of the moment, also through a function the
// cell defines.
BOOST_AUTO_TEST_CASE(same_text_runs_against_the_current_globals) {
  kernel_harness k;
  const std::string cell = "def f():\n    return x * 10\nprint(x, f())";
  for (int x = 1; x <= 5; ++x) {
    BOOST_REQUIRE(k.run("x = " + std::to_string(x)).ok);
    auto f = k.run(cell);
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.status() == "ok");
    BOOST_TEST(f.out() == std::to_string(x) + " " + std::to_string(x * 10)
                            + "\n");
  }
  // A name the cached text needs can disappear between runs.
  BOOST_REQUIRE(k.run("del x").ok);
  auto g = k.run(cell);
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(contains(g.trace(), "NameError"));
}

// Compilation warnings are printed on every run, as by a real interpreter:
// a text whose compilation warns is never served from the cache.
BOOST_AUTO_TEST_CASE(a_text_that_warns_at_compile_time_warns_every_time) {
  kernel_harness k;
  const std::string cell = "x = 1\nprint(x is 1)";
  for (int i = 0; i < 5; ++i) {
    auto f = k.run(cell);
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.out() == "True\n");
    BOOST_TEST(contains(f.err(), "SyntaxWarning"), "run " << i << ": "
                                                         << f.err());
  }
}

BOOST_AUTO_TEST_CASE(a_syntax_error_stays_an_error) {
  kernel_harness k;
  for (int i = 0; i < 4; ++i) {
    auto f = k.run("def (:");
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.status() == "error");
    BOOST_TEST(contains(f.trace(), "SyntaxError"));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(runner_capture_streams)

// A capture stream is reused only when nothing refers to it: a cell that
// kept its sys.stdout (or its buffer, or a bound write) still has its own
// output there, and later cells' output never lands in it.
BOOST_AUTO_TEST_CASE(a_kept_stream_is_never_reused) {
  kernel_harness k;
  auto a = k.run("import sys\nkeep = sys.stdout\nw = sys.stderr.write\n"
                 "b = sys.stdout.buffer\nprint('one')");
  BOOST_REQUIRE(a.ok);
  BOOST_TEST(a.out() == "one\n");
  for (int i = 0; i < 3; ++i) {
    auto f = k.run("print('two')\nimport sys\n"
                   "print('same', sys.stdout is keep)");
    BOOST_TEST(f.out() == "two\nsame False\n");
  }
  auto c = k.run("print(repr(keep.value()))");
  BOOST_TEST(c.out() == "'one\\n'\n");
}

// A reused stream starts empty, with zero totals and not clipped.
BOOST_AUTO_TEST_CASE(a_reused_stream_starts_empty) {
  kernel_harness k;
  auto a = k.run("print('x' * 10)\nimport sys\nprint('e', file=sys.stderr)");
  BOOST_TEST(a.out() == "xxxxxxxxxx\n");
  for (int i = 0; i < 3; ++i) {
    auto f = k.run("pass");
    BOOST_REQUIRE(f.ok);
    BOOST_TEST(f.out().empty());
    BOOST_TEST(f.err().empty());
    BOOST_TEST(f.body.get_int("stdout_total", -1) == 0);
    BOOST_TEST(f.body.get_int("stderr_total", -1) == 0);
    BOOST_TEST(!f.body.get_bool("stdout_clipped", true));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(runtime_warm_path, runtime_fixture)

// The broker arms a deadline timer only when none fires before the new
// cell's deadline; a timer left from an earlier cell fires early for this
// one and must re-arm, not end the cell before its own timeout.
BOOST_AUTO_TEST_CASE(a_cell_gets_its_whole_timeout_after_earlier_cells) {
  start(3);
  BOOST_TEST(exec("pass").get_string("status") == "success");
  std::this_thread::sleep_for(1500ms);
  // Armed for the first cell (about 1.5 s from now): not this one's end.
  auto r = exec("import time\nt = time.monotonic()\ntime.sleep(2.2)\n"
                "print('slept')");
  BOOST_TEST(r.get_string("status") == "success", r.dump());
  BOOST_TEST(contains(r.get_string("output"), "slept"));
  // And the timeout still ends a cell that runs past it.
  auto t = exec("import time\ntime.sleep(60)");
  BOOST_TEST(t.get_string("status") == "timeout", t.dump());
}

// Cells chained from call_tool_async's callback (the event-based path):
// each answer arrives once, in order, and the kernel is reused.
BOOST_AUTO_TEST_CASE(event_based_callers_chain_cells) {
  start();
  struct chain {
    runtime* rt;
    std::string cwd;
    int left = 20;
    std::vector<std::string> outputs;
    std::promise<void> done;
    void next() {
      json::value args;
      args["code"] = "n = globals().get('n', 0) + 1\nprint(n)";
      rt->call_tool_async({"s1", "e", "execute_code", args.dump(), cwd},
                          [this](tool_outcome o) {
        auto r = json::parse(o.result_json);
        outputs.push_back(r ? r.v->get_string("output") : o.result_json);
        if (--left > 0)
          next();
        else
          done.set_value();
      });
    }
  } c{rt.get(), work.path()};
  auto f = c.done.get_future();
  c.next();
  BOOST_REQUIRE(f.wait_for(120s) == std::future_status::ready);
  BOOST_REQUIRE(c.outputs.size() == 20u);
  for (int i = 0; i < 20; ++i)
    BOOST_TEST(c.outputs[i] == std::to_string(i + 1) + "\n");
}

// A call still running when the runtime goes is answered (not left
// waiting), and calls after that get an error at once.
BOOST_AUTO_TEST_CASE(pending_calls_are_answered_when_the_runtime_goes) {
  start();
  auto marker = work.path() + "/started";
  std::promise<tool_outcome> p;
  auto f = p.get_future();
  json::value args;
  args["code"] = "open(" + json::value(marker).dump()
                 + ", 'w').close()\nimport time\ntime.sleep(60)";
  rt->call_tool_async({"s1", "long", "execute_code", args.dump(),
                       work.path()},
                      [&p](tool_outcome o) { p.set_value(std::move(o)); });
  for (int i = 0; i < 600 && !std::ifstream(marker).good(); ++i)
    std::this_thread::sleep_for(50ms);
  BOOST_REQUIRE(std::ifstream(marker).good());
  rt.reset();
  BOOST_REQUIRE(f.wait_for(60s) == std::future_status::ready);
  auto out = f.get();
  BOOST_TEST(!out.result_json.empty());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(bridge_direct_writes, runtime_fixture)

// Replies too large for one send() arrive whole and in order, from the
// broker's thread and from the blocking pool, also when mixed with small
// replies on the same connection.
BOOST_AUTO_TEST_CASE(large_replies_arrive_whole) {
  start(300, true);
  auto r = exec(
    "from mibyan_tools import web_search, search_files, json_parse\n"
    "ok = 0\n"
    "for i in range(3):\n"
    "    a = web_search('q')\n"
    "    b = search_files(pattern='p')\n"
    "    for x in (a, b):\n"
    "        d = x['data']\n"
    "        assert len(d) == 3 << 20, len(d)\n"
    "        assert d.count('y') == -(-(3 << 20) // 1000), d.count('y')\n"
    "        ok += 1\n"
    "print('ok', ok)\n");
  BOOST_TEST(r.get_string("status") == "success", r.dump().substr(0, 2000));
  BOOST_TEST(r.get_string("output") == "ok 6\n");
  BOOST_TEST(r.get_int("tool_calls_made", 0) == 6);
}

// The direct writer only takes a descriptor that is a connected Unix
// stream socket of the expected listening path.
BOOST_AUTO_TEST_CASE(only_a_connection_of_the_rpc_socket_is_duplicated) {
  temp_dir dir;
  auto path = dir.path() + "/rpc.sock";
  int lfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  BOOST_REQUIRE(::bind(lfd, reinterpret_cast<sockaddr*>(&addr),
                       sizeof addr) == 0);
  BOOST_REQUIRE(::listen(lfd, 4) == 0);
  BOOST_TEST(unix_socket_path(lfd) == path);
  int cfd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(::connect(cfd, reinterpret_cast<sockaddr*>(&addr),
                          sizeof addr) == 0);
  int afd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
  BOOST_REQUIRE(afd >= 0);
  // The accepted connection: yes; the listener, another path, a pipe, a
  // closed descriptor: no.
  int d = dup_unix_connection(afd, path);
  BOOST_TEST(d >= 0);
  BOOST_TEST(dup_unix_connection(lfd, path) == -1);
  BOOST_TEST(dup_unix_connection(afd, path + ".other") == -1);
  int p[2];
  BOOST_REQUIRE(::pipe(p) == 0);
  BOOST_TEST(dup_unix_connection(p[0], path) == -1);
  BOOST_TEST(dup_unix_connection(12345, path) == -1);
  // What the duplicate sends arrives; closing it alone does not end the
  // connection while the original is open.
  BOOST_TEST(send_now(d, "hi\n", 3) == 3u);
  char buf[8] = {};
  BOOST_TEST(::read(cfd, buf, sizeof buf) == 3);
  for (int fd : {d, afd, cfd, lfd, p[0], p[1]})
    ::close(fd);
}

BOOST_AUTO_TEST_SUITE_END()
