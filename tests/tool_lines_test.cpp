// `mibyan tool --stdin`'s line protocol (cli/tool_lines.hpp): the push-style
// bounded line buffer against the blocking reader, the request parser, and
// the whole command with its input read on the runtime's I/O loop (pipe,
// socket) or by the main thread (a regular file), including back-pressure,
// answers too long to write without blocking, over-long lines, and the
// input's blocking flag restored at the end.
#define BOOST_TEST_MODULE tool_lines
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/bounded_line_reader.hpp"
#include "base/json.hpp"
#include "cli/tool_lines.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in{text};
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

struct got_line {
  bounded_line_buffer::status st;
  std::string text;
  uint64_t length;
  bool operator==(const got_line& o) const {
    return st == o.st && text == o.text && length == o.length;
  }
};

// Everything a buffer hands out for `input` fed in chunks of `sizes`.
std::vector<got_line> drain(const std::string& input, size_t max,
                            std::mt19937& rng, size_t max_chunk) {
  bounded_line_buffer b{max};
  std::vector<got_line> out;
  size_t off = 0;
  std::uniform_int_distribution<size_t> pick(1, max_chunk);
  for (;;) {
    std::string line;
    uint64_t len = 0;
    auto st = b.next(line, len);
    if (st == bounded_line_buffer::status::eof)
      break;
    if (st == bounded_line_buffer::status::need_more) {
      if (off == input.size()) {
        b.finish();
        continue;
      }
      auto n = std::min(pick(rng), input.size() - off);
      b.append(input.data() + off, n);
      off += n;
      BOOST_TEST(b.held() <= max + max_chunk + 1);
      continue;
    }
    out.push_back({st, line, len});
  }
  return out;
}

// The same rules written plainly.
std::vector<got_line> expected_lines(const std::string& input, size_t max) {
  std::vector<got_line> out;
  size_t start = 0;
  while (start < input.size()) {
    auto nl = input.find('\n', start);
    auto end = nl == std::string::npos ? input.size() : nl;
    auto len = end - start;
    if (len > max)
      out.push_back({bounded_line_buffer::status::too_long, "", len});
    else
      out.push_back({bounded_line_buffer::status::line,
                     input.substr(start, len), len});
    if (nl == std::string::npos)
      break;
    start = nl + 1;
  }
  return out;
}

tool_line_settings settings() {
  return tool_line_settings{"s1", "/tmp", 1000};
}

test::process_options home_options(const test::temp_dir& home) {
  test::process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  return po;
}

std::string read_line_json(const std::string& path) {
  json::value v;
  v["tool"] = "read_file";
  v["args"]["path"] = path;
  return v.dump();
}

} // namespace

BOOST_AUTO_TEST_CASE(buffer_matches_the_plain_rules_for_any_chunking) {
  std::mt19937 rng{1234};
  std::uniform_int_distribution<int> kind(0, 9);
  for (int round = 0; round < 300; ++round) {
    std::string input;
    auto pieces = rng() % 12;
    for (size_t i = 0; i < pieces; ++i) {
      auto k = kind(rng);
      if (k < 2)
        input += "\n";
      else if (k < 4)
        input += std::string(rng() % 80, 'x') + "\n";
      else if (k < 5)
        input += std::string(30 + rng() % 40, 'L') + "\r\n";
      else
        input += "{\"tool\":\"t" + std::to_string(rng() % 100) + "\"}\n";
    }
    if (rng() % 3 == 0)
      input += "tail-without-newline";
    auto want = expected_lines(input, 40);
    for (size_t chunk : {size_t{1}, size_t{3}, size_t{17}, size_t{4096}}) {
      auto got = drain(input, 40, rng, chunk);
      BOOST_TEST_REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i)
        BOOST_TEST((got[i] == want[i]), "round " << round << " line " << i);
    }
  }
}

BOOST_AUTO_TEST_CASE(buffer_keeps_nothing_of_an_over_long_line) {
  bounded_line_buffer b{100};
  std::string line;
  uint64_t len = 0;
  std::string big(10000, 'y');
  for (int i = 0; i < 100; ++i) {
    b.append(big.data(), big.size());
    BOOST_TEST((b.next(line, len) == bounded_line_buffer::status::need_more));
    BOOST_TEST(b.held() <= 100u);
  }
  b.append("z\nok\n", 5);
  BOOST_TEST((b.next(line, len) == bounded_line_buffer::status::too_long));
  BOOST_TEST(len == 1000001u);
  BOOST_TEST(line.empty());
  BOOST_TEST((b.next(line, len) == bounded_line_buffer::status::line));
  BOOST_TEST(line == "ok");
  BOOST_TEST((b.next(line, len) == bounded_line_buffer::status::need_more));
  b.finish();
  BOOST_TEST((b.next(line, len) == bounded_line_buffer::status::eof));
}

BOOST_AUTO_TEST_CASE(request_lines_parse_or_answer) {
  auto s = settings();
  auto call = parse_tool_line(R"({"tool":"read_file","args":{"path":"/x"}})",
                              7, s);
  BOOST_REQUIRE(call.call.has_value());
  BOOST_TEST(call.call->tool == "read_file");
  BOOST_TEST(call.call->session_id == "s1");
  BOOST_TEST(call.call->call_id == "stdin-7");
  BOOST_TEST(call.call->cwd == "/tmp");
  BOOST_TEST(json::parse(call.call->args_json).v->get_string("path") == "/x");
  // Arguments given as a JSON string are passed as they are.
  auto str = parse_tool_line(R"({"tool":"t","args":"{\"a\":1}"})", 1, s);
  BOOST_REQUIRE(str.call.has_value());
  BOOST_TEST(str.call->args_json == R"({"a":1})");
  auto none = parse_tool_line(R"({"tool":"t"})", 1, s);
  BOOST_REQUIRE(none.call.has_value());
  BOOST_TEST(none.call->args_json == "{}");
  for (auto bad : {"", " \t\r", "[1]", "nope", R"({"tool":3})",
                   R"({"args":{}})"}) {
    auto r = parse_tool_line(bad, 4, s);
    BOOST_TEST(!r.call.has_value(), bad);
    BOOST_TEST(contains(r.answer, "Invalid request line 4"), bad);
    BOOST_TEST(json::parse(r.answer).v->is_object());
  }
  auto too_long = too_long_tool_line(9, 123456, s);
  BOOST_TEST(contains(too_long, "Invalid request line 9"));
  BOOST_TEST(contains(too_long, "tools.max_argument_bytes"));
}

// Many lines at once: more than the read-ahead bound while calls run, so
// the loop stops and resumes reading; every line is answered in order.
BOOST_AUTO_TEST_CASE(a_flood_of_lines_is_answered_in_order) {
  test::temp_dir home;
  test::temp_dir work;
  home.write("config.yaml", "tools:\n  max_argument_bytes: 1024\n");
  std::vector<std::string> files;
  std::string input;
  const int n = 2500;
  for (int i = 0; i < n; ++i) {
    if (i % 100 == 0) {
      auto name = "f" + std::to_string(i) + ".txt";
      {
        std::ofstream f{work / name};
        f << "content-" << i << "\n";
      }
      input += read_line_json(work / name) + "\n";
    } else if (i % 100 == 50) {
      input += "not json " + std::to_string(i) + "\n";
    } else {
      // A padded no-op the parser rejects: cheap, and keeps the input large.
      input += R"({"tool":"no_such_tool","args":{"pad":")"
               + std::string(60, 'p') + "\"}}\n";
    }
  }
  BOOST_REQUIRE(input.size() > 200000u);
  auto po = home_options(home);
  po.input = input;
  auto r = test::run_mibyan({"tool", "--stdin"}, po);
  BOOST_TEST(r.exit_code == 0);
  auto lines = split_lines(r.out);
  BOOST_REQUIRE(lines.size() == static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (i % 100 == 0)
      BOOST_TEST(contains(lines[i], "content-" + std::to_string(i)), i);
    else if (i % 100 == 50)
      BOOST_TEST(contains(lines[i], "Invalid request line "
                                      + std::to_string(i + 1)), i);
    else
      BOOST_TEST(contains(lines[i], "no_such_tool"), i);
  }
}

// Answers longer than PIPE_BUF are written by the main thread; order
// holds across both writers, and an over-long line does not stop the run.
BOOST_AUTO_TEST_CASE(long_answers_and_over_long_lines) {
  test::temp_dir home;
  test::temp_dir work;
  home.write("config.yaml", "tools:\n  max_argument_bytes: 1024\n");
  // One file per read: read_file answers a repeated read of the same
  // range with a short "unchanged" result.
  for (int n = 0; n < 20; ++n) {
    std::ofstream f{work / ("big" + std::to_string(n) + ".txt")};
    for (int i = 0; i < 400; ++i)
      f << "line " << i << " " << std::string(60, 'b') << "\n";
  }
  std::string input;
  for (int i = 0; i < 20; ++i) {
    input += read_line_json(work / ("big" + std::to_string(i) + ".txt"))
             + "\n";
    if (i == 10)
      input += std::string(200000, 'q') + "\n";
    auto small = work / ("small" + std::to_string(i) + ".txt");
    std::ofstream{small} << "small " << i << "\n";
    input += read_line_json(small) + "\n";
  }
  auto po = home_options(home);
  po.input = input;
  auto r = test::run_mibyan({"tool", "--stdin"}, po);
  BOOST_TEST(r.exit_code == 0);
  auto lines = split_lines(r.out);
  BOOST_REQUIRE(lines.size() == 41u);
  size_t k = 0;
  for (int i = 0; i < 20; ++i) {
    BOOST_TEST(lines[k].size() > 4096u);
    BOOST_TEST(contains(lines[k++], "line 399"));
    if (i == 10) {
      BOOST_TEST(contains(lines[k], "Invalid request line 22"));
      BOOST_TEST(contains(lines[k++], "tools.max_argument_bytes"));
    }
    BOOST_TEST(contains(lines[k++], "small " + std::to_string(i)));
  }
}

// A regular file cannot be polled: the main thread reads it; same answers.
BOOST_AUTO_TEST_CASE(a_regular_file_as_input) {
  test::temp_dir home;
  test::temp_dir work;
  std::string input = read_line_json("/etc/hostname") + "\n\n"
                      + R"J({"tool":"execute_code","args":{"code":"print(6*7)"}})J"
                      + "\nlast-without-newline";
  {
    std::ofstream f{work / "in.jsonl"};
    f << input;
  }
  auto po = home_options(home);
  po.env["MIBYAN_BIN"] = test::mibyan_binary();
  po.env["MIBYAN_IN"] = work / "in.jsonl";
  home.write("config.yaml", "approvals:\n  unattended_mode: approve\n");
  auto r = test::run_process(
    {"/bin/sh", "-c", "exec \"$MIBYAN_BIN\" tool --stdin < \"$MIBYAN_IN\""},
    po);
  BOOST_TEST(r.exit_code == 0, r.err);
  auto lines = split_lines(r.out);
  BOOST_REQUIRE(lines.size() == 4u);
  BOOST_TEST(contains(lines[0], "total_lines"));
  BOOST_TEST(contains(lines[1], "Invalid request line 2: the line is empty"));
  BOOST_TEST(contains(lines[2], "42"));
  BOOST_TEST(contains(lines[3], "Invalid request line 4"));
}

// A socket as input, read on the loop; and a pipe whose read end the
// parent shares: its blocking flag is as it was once the command ends.
BOOST_AUTO_TEST_CASE(socket_input_and_the_blocking_flag_restored) {
  test::temp_dir home;
  home.write("config.yaml", "approvals:\n  unattended_mode: approve\n");
  const char* script = R"PY(
import os, socket, subprocess, sys
binary = sys.argv[1]
line = b'{"tool":"execute_code","args":{"code":"x = 5\\nprint(x * 2)"}}\n'
a, b = socket.socketpair()
p = subprocess.Popen([binary, "tool", "--stdin"], stdin=b,
                     stdout=subprocess.PIPE)
b.close()
a.sendall(line + b'{"tool":"execute_code","args":{"code":"print(x + 1)"}}\n')
a.shutdown(socket.SHUT_WR)
out = p.stdout.read().decode()
assert p.wait() == 0, "exit status"
assert out.count("\n") == 2 and '"10\\n"' in out and '"6\\n"' in out, out
r, w = os.pipe()
p = subprocess.Popen([binary, "tool", "--stdin"], stdin=r,
                     stdout=subprocess.PIPE)
os.write(w, line)
os.close(w)
out = p.stdout.read().decode()
assert p.wait() == 0, "exit status"
assert '"10\\n"' in out, out
assert os.get_blocking(r), "the pipe was left non-blocking"
print("ok")
)PY";
  auto po = home_options(home);
  auto r = test::run_process({"python3", "-c", script, test::mibyan_binary()},
                             po);
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "ok\n", r.out + r.err);
}
