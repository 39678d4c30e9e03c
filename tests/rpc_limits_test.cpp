#define BOOST_TEST_MODULE rpc_limits
#include <boost/test/unit_test.hpp>

// Bounded inputs of the execute_code bridge and the tool entry points
// (docs/kernel_protocol.md §5, docs/security.md "RPC limits"): RPC
// connections per kernel, linear line splitting with frame and buffer
// caps, cell-tagged tool calls, clipped tracebacks, reply-frame limits,
// tool-argument size, and `mibyan tool --stdin` line handling.

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include <unistd.h>

#include "kernels/frame_parser.hpp"
#include "kernels/line_splitter.hpp"
#include "kernels/rpc_codec.hpp"
#include "kernels/rpc_connections.hpp"
#include "base/bounded_line_reader.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/process.hpp"
#include "tests/support/kernel_options.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/argument_limit.hpp"

using namespace mibyan;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t open_fds() {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)e;
    ++n;
  }
  return n;
}

struct exec_fixture {
  test::temp_dir home;
  test::temp_dir work;
  std::unique_ptr<runtime> rt;

  void start(const std::function<void(options&)>& adjust = {}) {
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    if (adjust)
      adjust(opts);
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  json::value exec(const std::string& code) {
    return test::run_cell(*rt, work.path(), code);
  }
};

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

} // namespace

// -- pure helpers ------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(pure)

BOOST_AUTO_TEST_CASE(line_splitter_work_is_linear_in_the_input) {
  // 8 MiB without a newline in 4 KiB chunks: a rescan of the buffer per
  // chunk (the old broker) would be ~8 GiB of work.
  line_splitter s{64u << 20};
  std::string chunk(4096, 'x');
  std::vector<std::string> lines;
  auto on_line = [&](std::string_view l) { lines.emplace_back(l); };
  for (int i = 0; i < 2048; ++i)
    BOOST_REQUIRE(s.feed(chunk, on_line));
  BOOST_TEST(lines.empty());
  BOOST_TEST(s.buffered() == 8u << 20);
  BOOST_REQUIRE(s.feed("tail\nnext", on_line));
  BOOST_REQUIRE(lines.size() == 1u);
  BOOST_TEST(lines[0].size() == (8u << 20) + 4);
  BOOST_TEST(s.buffered() == 4u);
  BOOST_TEST(s.work() <= 4ull * ((8u << 20) + 9));
}

BOOST_AUTO_TEST_CASE(line_splitter_splits_any_chunking) {
  std::string input = "a\n\nbcd\n{\"x\": 1}\nlast";
  for (size_t step = 1; step <= input.size(); ++step) {
    line_splitter s{100};
    std::vector<std::string> lines;
    for (size_t i = 0; i < input.size(); i += step)
      s.feed(std::string_view{input}.substr(i, step),
             [&](std::string_view l) { lines.emplace_back(l); });
    BOOST_REQUIRE(lines.size() == 4u);
    BOOST_TEST(lines[0] == "a");
    BOOST_TEST(lines[1] == "");
    BOOST_TEST(lines[3] == "{\"x\": 1}");
    BOOST_TEST(s.buffered() == 4u);
  }
}

BOOST_AUTO_TEST_CASE(line_splitter_caps_a_line) {
  line_splitter s{10};
  int n = 0;
  auto on_line = [&](std::string_view) { ++n; };
  BOOST_TEST(s.feed("0123456789\n", on_line)); // exactly the cap
  BOOST_TEST(s.feed("012345", on_line));
  BOOST_TEST(!s.feed("67890", on_line));
  BOOST_TEST(s.failed());
  BOOST_TEST(s.buffered() == 0u);
  BOOST_TEST(!s.feed("\nok\n", on_line));
  BOOST_TEST(n == 1);
}

BOOST_AUTO_TEST_CASE(connection_table_enforces_the_limits) {
  rpc_limits lim;
  lim.max_connections = 3;
  lim.max_frame = 100;
  lim.max_buffered = 150;
  rpc_connection_table<int> t{lim};
  BOOST_TEST((t.admit(1) == rpc_verdict::ok));
  BOOST_TEST((t.admit(2) == rpc_verdict::ok));
  BOOST_TEST((t.admit(3) == rpc_verdict::ok));
  BOOST_TEST((t.admit(4) == rpc_verdict::too_many_connections));
  BOOST_TEST(!t.contains(4));
  auto none = [](std::string_view) {};
  BOOST_TEST((t.feed(1, std::string(80, 'a'), none) == rpc_verdict::ok));
  BOOST_TEST((t.feed(2, std::string(80, 'b'), none)
              == rpc_verdict::buffer_full));
  BOOST_TEST(!t.contains(2));
  BOOST_TEST(t.buffered() == 80u);
  BOOST_TEST((t.feed(1, std::string(30, 'a'), none)
              == rpc_verdict::frame_too_long));
  BOOST_TEST(t.buffered() == 0u);
  BOOST_TEST((t.admit(5) == rpc_verdict::ok));
  BOOST_TEST(t.take_all().size() == 2u);
  BOOST_TEST(t.size() == 0u);
  BOOST_TEST(contains(rpc_limit_message(rpc_verdict::too_many_connections,
                                        lim),
                      "code_execution.max_rpc_connections"));
}

BOOST_AUTO_TEST_CASE(frame_parser_work_is_linear_with_many_frames) {
  // One chunk holding thousands of frames: the old parser copied the rest
  // of the chunk for every frame.
  frame_parser p{"@@S@@"};
  std::string input;
  for (int i = 0; i < 20000; ++i)
    input += "out\n@@S@@ 2\n{}";
  int frames = 0;
  size_t raw = 0;
  frame_parser::callbacks cb;
  cb.on_raw = [&](std::string_view r) { raw += r.size(); };
  cb.on_frame = [&](std::string b) { frames += b == "{}"; };
  cb.on_error = [](std::string e) { BOOST_FAIL(e); };
  p.feed(input, cb);
  BOOST_TEST(frames == 20000);
  BOOST_TEST(raw == 20000u * 3);
  BOOST_TEST(p.work() <= 4ull * input.size());
}

BOOST_AUTO_TEST_CASE(frame_parser_skips_an_oversized_frame_and_stays_in_step) {
  frame_parser p{"@@S@@", 1000};
  std::vector<std::string> frames;
  std::string raw;
  uint64_t oversized = 0;
  frame_parser::callbacks cb;
  cb.on_raw = [&](std::string_view r) { raw += r; };
  cb.on_frame = [&](std::string b) { frames.push_back(b); };
  cb.on_error = [](std::string e) { BOOST_FAIL(e); };
  cb.on_oversized = [&](uint64_t n) { oversized = n; };
  std::string big(5000, 'z');
  std::string input = "before\n@@S@@ 5000\n" + big + "\n@@S@@ 2\n{}after";
  for (size_t i = 0; i < input.size(); i += 777)
    p.feed(std::string_view{input}.substr(i, 777), cb);
  p.finish(cb);
  BOOST_TEST(oversized == 5000u);
  BOOST_REQUIRE(frames.size() == 1u);
  BOOST_TEST(frames[0] == "{}");
  BOOST_TEST(raw == "beforeafter");
  BOOST_TEST(!p.failed());
}

BOOST_AUTO_TEST_CASE(peek_rpc_id_reads_a_leading_id_only) {
  BOOST_TEST(peek_rpc_id("{\"id\": \"12-3\", \"tool\": \"x\"}") == "12-3");
  BOOST_TEST(peek_rpc_id("{\"tool\": \"x\", \"id\": \"1\"}") == "");
  BOOST_TEST(peek_rpc_id("{\"id\": \"a\\\"b\"}") == "");
  BOOST_TEST(peek_rpc_id("{\"id\": \"" + std::string(5000, 'x')) == "");
}

BOOST_AUTO_TEST_CASE(decode_rpc_request_refuses_malformed_lines) {
  rpc_request ok;
  BOOST_TEST(decode_rpc_request(
               R"({"id":"7-1","tool":"read_file","args":{"path":"a"},)"
               R"("token":"t","cell":"c1"})", ok).ok());
  BOOST_TEST(ok.id == "7-1");
  BOOST_TEST(ok.tool == "read_file");
  BOOST_TEST(ok.args_json == R"({"path":"a"})");
  BOOST_TEST(ok.cell == "c1");
  // Each malformed line: invalid_argument with the reason; the id, when
  // the line named one, is kept for the refusal.
  struct bad_case {
    const char* line;
    const char* why;
    const char* id;
  };
  for (auto& c : {bad_case{"not json", "not JSON", ""},
                  bad_case{"[1,2]", "expected a JSON object", ""},
                  bad_case{R"({"id":"9-2"})", "missing string member 'tool'",
                           "9-2"},
                  bad_case{R"({"id":3,"tool":"x","args":[1]})",
                           "'args' must be a JSON object", "3"},
                  bad_case{R"({"tool":"x"})", "missing string member 'id'",
                           ""}}) {
    rpc_request req;
    auto st = decode_rpc_request(c.line, req);
    BOOST_TEST_CONTEXT(c.line) {
      BOOST_TEST(!st.ok());
      BOOST_TEST((st.code == status_code::invalid_argument));
      BOOST_TEST(contains(st.error, c.why));
      BOOST_TEST(req.id == c.id);
    }
  }
}

BOOST_AUTO_TEST_CASE(argument_size_check_names_the_option) {
  BOOST_TEST(check_argument_size(10, 10).ok());
  BOOST_TEST(check_argument_size(1u << 30, 0).ok()); // no limit
  auto over = check_argument_size(11, 10);
  BOOST_TEST(!over.ok());
  BOOST_TEST((over.code == status_code::resource_exhausted));
  BOOST_TEST(contains(over.error, "tools.max_argument_bytes"));
}

BOOST_AUTO_TEST_CASE(bounded_line_reader_discards_the_rest_of_a_long_line) {
  int fds[2];
  BOOST_REQUIRE(::pipe(fds) == 0);
  auto writer = std::async(std::launch::async, [&] {
    std::string data = "first\n\n" + std::string(3 << 20, 'y')
                       + "\nafter\nlast";
    size_t off = 0;
    while (off < data.size()) {
      auto n = ::write(fds[1], data.data() + off, data.size() - off);
      if (n <= 0)
        break;
      off += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  bounded_line_reader r{fds[0], 1000};
  std::string line;
  uint64_t len = 0;
  using st = bounded_line_reader::status;
  BOOST_TEST((r.next(line, len) == st::line));
  BOOST_TEST(line == "first");
  BOOST_TEST((r.next(line, len) == st::line));
  BOOST_TEST(line.empty());
  BOOST_TEST((r.next(line, len) == st::too_long));
  BOOST_TEST(len == 3u << 20);
  BOOST_TEST(line.capacity() <= 70000u);
  BOOST_TEST((r.next(line, len) == st::line));
  BOOST_TEST(line == "after");
  BOOST_TEST((r.next(line, len) == st::line));
  BOOST_TEST(line == "last");
  BOOST_TEST((r.next(line, len) == st::eof));
  writer.get();
  ::close(fds[0]);
}

BOOST_AUTO_TEST_SUITE_END()

// -- the kernel broker -------------------------------------------------------

BOOST_FIXTURE_TEST_SUITE(broker, exec_fixture)

BOOST_AUTO_TEST_CASE(connection_flood_is_bounded_and_closed_with_the_cell) {
  start();
  exec("x = 1"); // the kernel is up; its fds are in the baseline
  auto baseline = open_fds();
  auto ready = work / "opened";
  auto go = work / "go";
  auto fut = std::async(std::launch::async, [&] {
    return exec(
      "import os, socket, time\n"
      "from mibyan_tools import read_file\n"
      "socks = []\n"
      "for i in range(500):\n"
      "    s = socket.socket(socket.AF_UNIX)\n"
      "    s.connect(os.environ['MIBYAN_RPC_SOCKET'])\n"
      "    socks.append(s)\n"
      "for s in socks:\n"
      "    s.setblocking(False)\n"
      "refused, pending = 0, list(socks)\n"
      "deadline = time.time() + 30\n"
      "while pending and refused < 436 and time.time() < deadline:\n"
      "    still = []\n"
      "    for s in pending:\n"
      "        try:\n"
      "            d = s.recv(4096)\n"
      "        except BlockingIOError:\n"
      "            still.append(s)\n"
      "            continue\n"
      "        except OSError:\n"
      "            d = b''\n"
      "        refused += b'Too many RPC connections' in d\n"
      "    pending = still\n"
      "    time.sleep(0.05)\n"
      "print('refused', refused)\n"
      "try:\n"
      "    read_file('/etc/hostname')\n"
      "    print('call ran')\n"
      "except ConnectionError as e:\n"
      "    print('call error:', e)\n"
      "open('opened', 'w').close()\n"
      "for _ in range(600):\n"
      "    if os.path.exists('go'):\n"
      "        break\n"
      "    time.sleep(0.05)\n");
  });
  auto until = std::chrono::steady_clock::now() + 60s;
  while (!std::filesystem::exists(ready)
         && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  auto during = open_fds();
  { std::ofstream{go}; }
  auto r = fut.get();
  auto out = r.get_string("output");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST_MESSAGE("host fds: baseline " << baseline << ", during "
                     << during);
  BOOST_TEST(during <= baseline + 64 + 16);
  BOOST_TEST(contains(out, "refused 436"));
  BOOST_TEST(contains(out, "call error: mibyan_tools: the host refused "
                           "'read_file': Too many RPC connections"));
  // The cell's connections end with it, although the script still holds
  // its ends.
  auto settle_until = std::chrono::steady_clock::now() + 10s;
  while (open_fds() > baseline + 4
         && std::chrono::steady_clock::now() < settle_until)
    std::this_thread::sleep_for(20ms);
  BOOST_TEST(open_fds() <= baseline + 4);
  auto next = exec("print(len(socks))\n"
                   "print(read_file('/etc/hostname').get('total_lines'))");
  BOOST_TEST(next.get_string("output") == "500\n1\n");
  BOOST_TEST(next.get_int("tool_calls_made", 0) == 1);
}

// Script threads open connections of their own while others are in
// flight; past the kernel's connection limit the host refuses one (running
// nothing), and the stub sends that call again on the shared connection:
// every call runs once, none fails (48 calls: the cell's budget is 50).
BOOST_AUTO_TEST_CASE(threads_past_the_connection_limit_share_and_every_call_runs) {
  start([](options& o) { o.code_execution.max_rpc_connections = 3; });
  auto r = exec(
    "import sys, threading\n"
    "from mibyan_tools import read_file\n"
    "done, errors = [], []\n"
    "go = threading.Barrier(8)\n"
    "def work():\n"
    "    go.wait()\n"
    "    for _ in range(6):\n"
    "        try:\n"
    "            done.append('total_lines' in read_file('/etc/hostname'))\n"
    "        except Exception as e:\n"
    "            errors.append(repr(e))\n"
    "ts = [threading.Thread(target=work) for _ in range(8)]\n"
    "for t in ts:\n"
    "    t.start()\n"
    "for t in ts:\n"
    "    t.join()\n"
    "print(len(done), all(done), errors[:2],\n"
    "      sys.modules['mibyan_tools']._own_refused)\n");
  BOOST_TEST(r.get_string("output") == "48 True [] True\n", r.dump());
  BOOST_TEST(r.get_int("tool_calls_made", 0) == 48);
}

BOOST_AUTO_TEST_CASE(oversized_rpc_line_closes_the_connection_only) {
  start();
  exec("x = 1");
  auto baseline = open_fds();
  auto r = exec(
    "import os, socket\n"
    "from mibyan_tools import read_file\n"
    "s = socket.socket(socket.AF_UNIX)\n"
    "s.settimeout(30)\n"
    "s.connect(os.environ['MIBYAN_RPC_SOCKET'])\n"
    "try:\n"
    "    s.sendall(b'{\"id\": \"big\", \"args\": \"' + b'x' * (17 << 20))\n"
    "except OSError as e:\n"
    "    print('send stopped:', type(e).__name__)\n"
    "got = b''\n"
    "try:\n"
    "    while True:\n"
    "        d = s.recv(65536)\n"
    "        if not d:\n"
    "            break\n"
    "        got += d\n"
    "    print('closed')\n"
    "except socket.timeout:\n"
    "    print('still open')\n"
    "except OSError:\n"
    "    print('closed')\n"
    "print(got.decode())\n"
    "print(read_file('/etc/hostname').get('total_lines'))\n");
  auto out = r.get_string("output");
  BOOST_TEST_MESSAGE(out);
  // The script still holds its end; the host's end is gone.
  auto until = std::chrono::steady_clock::now() + 10s;
  while (open_fds() > baseline + 4 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(20ms);
  BOOST_TEST(open_fds() <= baseline + 4);
  BOOST_TEST(contains(out, "closed"));
  BOOST_TEST(contains(out, "code_execution.max_rpc_frame_bytes"));
  BOOST_TEST(contains(out, "\n1\n"));
  BOOST_TEST(r.get_int("tool_calls_made", 0) == 1);
}

BOOST_AUTO_TEST_CASE(late_calls_never_count_against_the_next_cell) {
  start([](options& o) { o.code_execution.max_tool_calls = 2; });
  exec("import threading\n"
       "from mibyan_tools import read_file\n"
       "go, done, late = threading.Event(), threading.Event(), []\n"
       "def leftover():\n"
       "    go.wait(60)\n"
       "    for i in range(5):\n"
       "        late.append(read_file('/etc/hostname').get('error', 'RAN'))\n"
       "    done.set()\n"
       "threading.Thread(target=leftover).start()\n");
  auto r = exec("go.set()\n"
                "done.wait(60)\n"
                "print(late[0])\n"
                "print(sum(1 for x in late if x == 'RAN'))\n"
                "print(read_file('/etc/hostname').get('total_lines'))\n"
                "print(read_file('/etc/hostname').get('total_lines'))\n");
  auto out = r.get_string("output");
  BOOST_TEST_MESSAGE(out);
  BOOST_TEST(contains(out, "No active execute_code cell"));
  BOOST_TEST(contains(out, "\n0\n1\n1\n"));
  BOOST_TEST(r.get_int("tool_calls_made", -1) == 2);
}

BOOST_AUTO_TEST_CASE(executor_reused_by_a_later_cell_keeps_working) {
  start();
  exec("from concurrent.futures import ThreadPoolExecutor\n"
       "from mibyan_tools import read_file\n"
       "ex = ThreadPoolExecutor(2)\n"
       "print(ex.submit(read_file, '/etc/hostname').result()"
       ".get('total_lines'))\n");
  auto r = exec("print(ex.submit(read_file, '/etc/hostname').result()"
                ".get('total_lines'))\n");
  BOOST_TEST(r.get_string("output") == "1\n");
  BOOST_TEST(r.get_int("tool_calls_made", -1) == 1);
}

BOOST_AUTO_TEST_CASE(huge_exception_text_is_clipped_and_the_kernel_lives) {
  start([](options& o) { o.code_execution.max_stderr_bytes = 200000; });
  exec("x = 7");
  auto r = exec("raise ValueError('x' * (65 << 20))");
  auto out = r.get_string("output");
  BOOST_TEST(r.get_string("status") == "error");
  BOOST_TEST(contains(out, "characters omitted"));
  BOOST_TEST(contains(out, "ValueError"));
  BOOST_TEST(out.size() < 200000u);
  auto next = exec("print(x)");
  BOOST_TEST(next.get_string("output") == "7\n");
  BOOST_TEST(next["kernel"].get_bool("reused", false));
}

BOOST_AUTO_TEST_CASE(oversized_tool_arguments_are_refused_everywhere) {
  start([](options& o) { o.tools.max_argument_bytes = 1 << 20; });
  // From a script (RPC frame).
  auto r = exec("from mibyan_tools import write_file\n"
                "print(write_file('big.txt', 'x' * (2 << 20)).get('error'))\n"
                "print(write_file('small.txt', 'ok').get('error'))\n");
  auto out = r.get_string("output");
  BOOST_TEST(contains(out, "tools.max_argument_bytes"));
  BOOST_TEST(contains(out, "\nNone\n"));
  BOOST_TEST(!std::filesystem::exists(work / "big.txt"));
  BOOST_TEST(std::filesystem::exists(work / "small.txt"));
  // A direct call (the dispatch path the agent loop uses too).
  json::value args;
  args["path"] = work / "direct.txt";
  args["content"] = std::string(2 << 20, 'y');
  auto d = rt->call_tool({"s1", "c2", "write_file", args.dump(),
                          work.path()});
  BOOST_TEST(contains(d.result_json, "tools.max_argument_bytes"));
  BOOST_TEST(!std::filesystem::exists(work / "direct.txt"));
}

BOOST_AUTO_TEST_SUITE_END()

// -- mibyan tool ---------------------------------------------------------------

BOOST_AUTO_TEST_SUITE(cli)

BOOST_AUTO_TEST_CASE(stdin_empty_lines_get_an_error_each) {
  test::temp_dir home;
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.input = "\n"
             R"J({"tool":"read_file","args":{"path":"/etc/hostname"}})J" "\n"
             " \t\n";
  auto r = test::run_mibyan({"tool", "--stdin"}, po);
  BOOST_TEST(r.exit_code == 0);
  auto lines = split_lines(r.out);
  BOOST_REQUIRE(lines.size() == 3u);
  BOOST_TEST(contains(lines[0], "Invalid request line 1: the line is empty"));
  BOOST_TEST(contains(lines[1], "total_lines"));
  BOOST_TEST(contains(lines[2], "Invalid request line 3: the line is empty"));
}

BOOST_AUTO_TEST_CASE(stdin_answers_every_line_in_order) {
  test::temp_dir home;
  test::temp_dir work;
  home.write("config.yaml", "tools:\n  max_argument_bytes: 4096\n");
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  po.input = R"J({"tool":"read_file","args":{"path":"/etc/hostname"}})J" "\n"
             "\n"
             "   \n"
             R"J({"tool":"write_file","args":{"path":")J" + work / "a.txt"
             + R"J(","content":")J" + std::string(200000, 'z') + "\"}}\n"
             R"J({"tool":"read_file","args":{"path":"/etc/passwd","limit":1}})J" "\n";
  auto r = test::run_mibyan({"tool", "--stdin"}, po);
  BOOST_TEST(r.exit_code == 0);
  auto lines = split_lines(r.out);
  BOOST_TEST_MESSAGE(r.out);
  BOOST_REQUIRE(lines.size() == 5u);
  BOOST_TEST(contains(lines[0], "total_lines"));
  BOOST_TEST(contains(lines[1], "Invalid request line 2: the line is empty"));
  BOOST_TEST(contains(lines[2], "Invalid request line 3: the line is empty"));
  BOOST_TEST(contains(lines[3], "Invalid request line 4"));
  BOOST_TEST(contains(lines[3], "tools.max_argument_bytes"));
  BOOST_TEST(contains(lines[4], "total_lines"));
  BOOST_TEST(!std::filesystem::exists(work / "a.txt"));
}

BOOST_AUTO_TEST_CASE(positional_arguments_over_the_cap_are_refused) {
  test::temp_dir home;
  test::temp_dir work;
  home.write("config.yaml", "tools:\n  max_argument_bytes: 1024\n");
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  json::value args;
  args["path"] = work / "b.txt";
  args["content"] = std::string(5000, 'q');
  auto r = test::run_mibyan({"tool", "write_file", args.dump()}, po);
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(contains(r.err, "tools.max_argument_bytes"));
  BOOST_TEST(!std::filesystem::exists(work / "b.txt"));
}

BOOST_AUTO_TEST_SUITE_END()
