#define BOOST_TEST_MODULE stub_generator
#include <boost/test/unit_test.hpp>

#include "kernels/stub_generator.hpp"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "tests/support/kernel_harness.hpp"
#include "tests/support/kernel_rpc_server.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/process.hpp"
#include "config/options.hpp"
#include "kernels/runner_source.hpp"
#include "tools/core_tools.hpp"
#include "tools/execute_code.hpp"
#include "tools/registry.hpp"
#include "tools/script_specs.hpp"

using namespace mibyan;
using namespace mibyan::test;
using namespace std::chrono_literals;

namespace {

const std::vector<std::string> all_tools{
  "patch", "read_file", "search_files", "terminal", "web_extract",
  "web_search", "write_file"};

// Generated from the schemas (tools/script_specs.hpp): required properties
// annotated, optional ones default to None so the tool's own default applies.
const char* expected_signatures[] = {
  "def patch(path=None, old_string=None, new_string=None, replace_all=None, "
  "mode=None, patch=None, cross_profile=None):",
  "def read_file(path: str, offset=None, limit=None):",
  "def search_files(pattern: str, target=None, path=None, file_glob=None, "
  "limit=None, offset=None, output_mode=None, context=None, order=None, "
  "ignore_case=None):",
  "def terminal(command: str, timeout=None, workdir=None):",
  "def web_extract(urls: list, char_limit=None):",
  "def web_search(query: str, limit=None):",
  "def write_file(path: str, content=None, cross_profile=None):",
};

// The stub of the core tools named in `tools`.
std::string stub(const std::vector<std::string>& tools) {
  return generate_stub(tools, core_script_specs());
}

size_t count_defs(const std::string& src) {
  size_t n = 0;
  for (auto pos = src.find("\ndef "); pos != std::string::npos;
       pos = src.find("\ndef ", pos + 1))
    ++n;
  return n;
}

// Runs `script` with python3 (stub dir on PYTHONPATH); returns stdout.
process_result run_python(const temp_dir& dir, const std::string& script) {
  auto path = dir.write("check.py", script);
  process_options o;
  o.env["PYTHONPATH"] = dir.path();
  o.timeout_seconds = 60;
  return run_process({"python3", path}, o);
}

// A harness wired to a fake server on a socket inside its own dir.
struct rpc_setup {
  explicit rpc_setup(fake_rpc_options server_opts,
                     kernel_harness_options kopts = {},
                     std::string token = "secret-token")
    : sock_dir(),
      server(sock_dir / "rpc.sock",
             [&] {
               if (server_opts.token.empty())
                 server_opts.token = "secret-token";
               return std::move(server_opts);
             }()),
      kernel([&] {
        kopts.rpc_socket = sock_dir / "rpc.sock";
        kopts.rpc_token = token;
        return std::move(kopts);
      }()) {
  }
  temp_dir sock_dir;
  fake_rpc_server server;
  kernel_harness kernel;
};

// Answers like the default server, after sleeping `delay` when the request's
// path starts with "slow".
std::function<std::string(const fake_rpc_request&)>
slow_answer(std::chrono::milliseconds delay) {
  return [delay](const fake_rpc_request& r) -> std::string {
    auto args = r.msg.find("args");
    auto path = args != nullptr ? args->get_string("path", "") : "";
    if (path.rfind("slow", 0) == 0)
      std::this_thread::sleep_for(delay);
    json::value echo = json::value::make_object();
    echo["tool"] = r.msg.get_string("tool", "");
    if (args != nullptr)
      echo["args"] = *args;
    echo["connection"] = r.connection;
    return echo.dump();
  };
}

json::value parse_line(const std::string& text) {
  auto r = json::parse(text);
  BOOST_REQUIRE_MESSAGE(r.v.has_value(), "not JSON: " << text);
  return *r.v;
}

} // namespace

BOOST_AUTO_TEST_SUITE(stub_generator)

// -- generation ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(script_tool_set_is_declared_by_the_tools) {
  BOOST_TEST(core_script_tool_names() == all_tools);
  tool_registry reg;
  register_core_tools(reg);
  for (auto t : reg.all()) {
    bool listed = std::find(all_tools.begin(), all_tools.end(), t->name())
                  != all_tools.end();
    BOOST_TEST(t->script().allowed == listed, t->name());
  }
  BOOST_TEST(!reg.find("process")->script().allowed);
  // Terminal's policy strips the background arguments.
  auto stripped = reg.find("terminal")->script().stripped;
  BOOST_TEST(std::count(stripped.begin(), stripped.end(), "background") == 1);
  BOOST_TEST(std::count(stripped.begin(), stripped.end(), "pty") == 1);
}

BOOST_AUTO_TEST_CASE(signatures_follow_the_schemas_in_sorted_order) {
  auto src = stub(all_tools);
  size_t last = 0;
  for (auto sig : expected_signatures) {
    auto pos = src.find(std::string{"\n"} + sig + "\n");
    BOOST_TEST_CONTEXT(sig) {
      BOOST_REQUIRE(pos != std::string::npos);
      BOOST_TEST(pos > last);
      last = pos;
    }
  }
  BOOST_TEST(count_defs(src) == count_defs(stub({})) + 7u);
  BOOST_TEST(src.find("AVAILABLE_TOOLS = (\"patch\", \"read_file\", "
                      "\"search_files\", \"terminal\", \"web_extract\", "
                      "\"web_search\", \"write_file\",)")
             != std::string::npos);
  // Every keyword is forwarded by name, None defaults included.
  BOOST_TEST(src.find("return _call(\"terminal\", {\"command\": command, "
                      "\"timeout\": timeout, \"workdir\": workdir})")
             != std::string::npos);
  BOOST_TEST(src.find("background") == std::string::npos);
  BOOST_TEST(src.find("hermes") == std::string::npos);
  BOOST_TEST(src.find("HERMES") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(unknown_names_are_ignored_and_order_does_not_matter) {
  auto a = stub({"web_search", "execute_code", "delegate_task",
                          "read_file", "web_search", "mcp_x_y"});
  auto b = stub({"read_file", "web_search"});
  BOOST_TEST(a == b);
  BOOST_TEST(a.find("def execute_code") == std::string::npos);
  BOOST_TEST(a.find("def delegate_task") == std::string::npos);
  BOOST_TEST(a.find("def terminal") == std::string::npos);
  BOOST_TEST(a.find("AVAILABLE_TOOLS = (\"read_file\", \"web_search\",)")
             != std::string::npos);
  BOOST_TEST(a.find("def read_file") < a.find("def web_search"));
}

BOOST_AUTO_TEST_CASE(empty_tool_set_keeps_only_helpers) {
  auto src = stub({});
  BOOST_TEST(src.find("AVAILABLE_TOOLS = ()") != std::string::npos);
  BOOST_TEST(stub({"memory", "execute_code"}) == src);
  for (auto& t : all_tools)
    BOOST_TEST(src.find("\ndef " + t + "(") == std::string::npos);
  for (auto h : {"json_parse", "shell_quote", "retry"})
    BOOST_TEST(src.find(std::string{"\ndef "} + h + "(")
               != std::string::npos);
}

BOOST_AUTO_TEST_CASE(docstrings_come_from_the_descriptions) {
  auto src = stub({"read_file", "terminal"});
  BOOST_TEST(src.find("    \"\"\"Read a text file and return its lines numbered "
                      "as 'N|content'. Returns {'content', 'total_lines', "
                      "...}.\"\"\"\n")
             != std::string::npos,
             src);
  BOOST_TEST(src.find("\"\"\"Run a shell command (bash -c) in the foreground")
             != std::string::npos);
  BOOST_TEST(first_sentence("One. Two.") == "One.");
  BOOST_TEST(first_sentence("a.b c\nd. e") == "a.b c");
  BOOST_TEST(first_sentence("no end") == "no end");
}

// execute_code's description lists the signatures of the same specs.
BOOST_AUTO_TEST_CASE(execute_code_lists_the_generated_signatures) {
  options cfg;
  auto t = make_execute_code_tool(cfg, core_script_tool_names(),
                                  core_script_specs());
  auto d = t->description();
  BOOST_TEST(d.find("  read_file(path, offset=None, limit=None) -> "
                    "{'content', 'total_lines', ...}\n")
             != std::string::npos,
             d);
  BOOST_TEST(d.find("  terminal(command, timeout=None, workdir=None) -> "
                    "{'output', 'exit_code', ...}\n")
             != std::string::npos);
  BOOST_TEST(d.find("background") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(generated_source_is_valid_python_with_those_signatures) {
  temp_dir dir;
  for (auto& tools : std::vector<std::vector<std::string>>{
         all_tools, {}, {"terminal"}, {"patch", "write_file"}}) {
    dir.write("mibyan_tools.py", stub(tools));
    auto r = run_python(dir,
                        "import inspect, mibyan_tools as m\n"
                        "print(m.AVAILABLE_TOOLS)\n"
                        "print(sorted(m.__all__))\n"
                        "for n in m.AVAILABLE_TOOLS:\n"
                        "    print(n + str(inspect.signature(getattr(m, n))))"
                        "\n");
    BOOST_TEST_CONTEXT(tools.size() << " tools") {
      BOOST_TEST(r.exit_code == 0, r.err);
      std::string expected = "(";
      for (auto& t : tools)
        expected += "'" + t + "', ";
      if (tools.size() == 1)
        expected.resize(expected.size() - 1);
      else if (!tools.empty())
        expected.resize(expected.size() - 2);
      expected += ")\n";
      BOOST_TEST(r.out.find(expected) == 0u, r.out);
      BOOST_TEST(r.out.find("'json_parse'") != std::string::npos);
    }
  }
  dir.write("mibyan_tools.py", stub(all_tools));
  auto r = run_python(dir,
                      "import inspect, mibyan_tools as m\n"
                      "for n in m.AVAILABLE_TOOLS:\n"
                      "    print(n + str(inspect.signature(getattr(m, n))))\n");
  BOOST_TEST(r.out.find("search_files(pattern: str, target=None, path=None, "
                        "file_glob=None, limit=None, offset=None, "
                        "output_mode=None, context=None, order=None, "
                        "ignore_case=None)\n")
             != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("patch(path=None, old_string=None, new_string=None, "
                        "replace_all=None, mode=None, patch=None, "
                        "cross_profile=None)\n")
             != std::string::npos);
}

// The transport is a Python module of its own (issue 29): the file in the
// tree compiles and imports without the host, the library embeds it byte
// for byte, and a generated stub is that file with its tool list filled in
// and the tool functions after it.
BOOST_AUTO_TEST_CASE(transport_is_an_embedded_python_module) {
  auto path = source_dir() + "/kernels/mibyan_tools_transport.py";
  std::string file = slurp(path);
  BOOST_REQUIRE(!file.empty());
  BOOST_TEST((file == stub_transport_source()));
  temp_dir dir;
  dir.write("mibyan_tools_transport.py", file);
  process_options o;
  o.timeout_seconds = 60;
  auto compiled = run_process(
    {"python3", "-m", "py_compile", dir.path() + "/mibyan_tools_transport.py"},
    o);
  BOOST_TEST(compiled.exit_code == 0, compiled.err);
  auto r = run_python(dir, "import mibyan_tools_transport as m\n"
                           "print(m.AVAILABLE_TOOLS, m.HELPERS, m.__all__)\n");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "() ('json_parse', 'shell_quote', 'retry') "
                      "['json_parse', 'shell_quote', 'retry']\n",
             r.out);
  // The generated module: the file up to the marker, the kernel's list,
  // the rest of the file, then the functions.
  auto generated = stub({"terminal", "read_file"});
  auto marker = file.find("AVAILABLE_TOOLS = ()");
  BOOST_REQUIRE(marker != std::string::npos);
  auto rest = file.substr(file.find('\n', marker));
  BOOST_TEST(generated.compare(0, marker, file, 0, marker) == 0);
  std::string expected = "AVAILABLE_TOOLS = (\"read_file\", \"terminal\",)"
                         + rest;
  BOOST_TEST(generated.substr(marker, expected.size()) == expected);
  BOOST_TEST(generated.find(rest + "\n\ndef read_file(") != std::string::npos);
}

// Every built-in script tool's stub parameters are its schema's properties
// minus the ones its policy strips: same names, same order, required ones
// without a default and optional ones with None.
BOOST_AUTO_TEST_CASE(stub_parameters_equal_the_schema_properties) {
  tool_registry reg;
  register_core_tools(reg);
  size_t checked = 0;
  for (auto& spec : core_script_specs()) {
    auto t = reg.find(spec.name);
    BOOST_REQUIRE(t != nullptr);
    auto policy = t->script();
    auto schema = t->schema();
    std::vector<std::string> required;
    if (auto r = schema.find("required"); r != nullptr)
      for (auto& v : r->as_array())
        required.push_back(v.as_string());
    std::vector<std::string> expected = required;
    for (auto& [name, _] : schema.find("properties")->as_object())
      if (std::count(policy.stripped.begin(), policy.stripped.end(), name)
            == 0
          && std::count(required.begin(), required.end(), name) == 0)
        expected.push_back(name);
    std::vector<std::string> got;
    for (auto& p : spec.params) {
      got.push_back(p.name);
      bool req = std::count(required.begin(), required.end(), p.name) > 0;
      BOOST_TEST(p.default_literal == (req ? "" : "None"),
                 spec.name << "." << p.name);
    }
    BOOST_TEST(got == expected, spec.name);
    ++checked;
  }
  BOOST_TEST(checked == all_tools.size());
  // The stripped terminal arguments are neither in the stub nor sent.
  auto src = stub(all_tools);
  BOOST_TEST(src.find("background") == std::string::npos);
  BOOST_TEST(src.find("watch_patterns") == std::string::npos);
}

// -- helpers ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(helpers_behave_as_documented) {
  temp_dir dir;
  dir.write("mibyan_tools.py", stub({}));
  auto r = run_python(dir,
    "from mibyan_tools import json_parse, shell_quote, retry\n"
    "print(json_parse('\\ufeff{\"a\": \"x\\ty\"}') == {'a': 'x\\ty'})\n"
    "print(json_parse(b'\\xef\\xbb\\xbf[1, 2]'))\n"
    "try:\n"
    "    json_parse('{bad')\n"
    "except ValueError:\n"
    "    print('ValueError')\n"
    "print(shell_quote(\"a b'c\"))\n"
    "print(shell_quote(''))\n"
    "calls = []\n"
    "def flaky():\n"
    "    calls.append(1)\n"
    "    if len(calls) < 2:\n"
    "        raise RuntimeError('once')\n"
    "    return 'done'\n"
    "print(retry(flaky, delay=0), len(calls))\n"
    "calls.clear()\n"
    "def always():\n"
    "    calls.append(1)\n"
    "    raise KeyError(len(calls))\n"
    "try:\n"
    "    retry(always, max_attempts=4, delay=0)\n"
    "except KeyError as e:\n"
    "    print('last', e, len(calls))\n"
    "import time\n"
    "t = time.monotonic()\n"
    "try:\n"
    "    retry(always, max_attempts=3, delay=0.05)\n"
    "except KeyError:\n"
    "    print(0.14 < time.monotonic() - t < 1.0)\n");
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "True\n[1, 2]\nValueError\n'a b'\"'\"'c'\n''\n"
                      "done 2\nlast 4 4\nTrue\n");
}

BOOST_AUTO_TEST_CASE(unavailable_tools_are_not_importable) {
  kernel_harness_options o;
  o.tools = {"read_file"};
  kernel_harness k{o};
  auto f = k.run("from mibyan_tools import terminal");
  BOOST_TEST(f.status() == "error");
  BOOST_TEST(f.trace().find("cannot import name 'terminal' from "
                            "'mibyan_tools'")
             != std::string::npos);
  auto g = k.run("import mibyan_tools\nmibyan_tools.delegate_task");
  BOOST_TEST(g.trace().find("'delegate_task' is not available inside "
                            "execute_code. Importable tools here: read_file.")
             != std::string::npos,
             g.trace());
  auto h = k.run("from mibyan_tools import *\nprint(read_file.__name__, "
                 "retry.__name__)");
  BOOST_TEST(h.out() == "read_file retry\n");
}

// -- transport ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(call_returns_the_result_as_a_dict) {
  rpc_setup s{{}};
  auto f = s.kernel.run(
    "from mibyan_tools import web_search, web_extract, terminal\n"
    "import json, os\n"
    "r = web_search('mibyan')\n"
    "print(type(r).__name__, json.dumps(r, sort_keys=True))\n"
    "print(web_extract(['http://x'])['args'])\n"
    "print(terminal('ls', workdir='/tmp')['args'])\n"
    "print(os.getpid())");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  std::string pid = f.out().substr(f.out().rfind('\n', f.out().size() - 2)
                                   + 1);
  pid.pop_back();
  BOOST_TEST(f.out().find("dict {\"args\": {\"limit\": null, \"query\": "
                          "\"mibyan\"}, \"connection\": 1, \"tool\": "
                          "\"web_search\"}\n")
             == 0u,
             f.out());
  BOOST_TEST(f.out().find("{'urls': ['http://x'], 'char_limit': None}\n")
             != std::string::npos);
  BOOST_TEST(f.out().find("{'command': 'ls', 'timeout': None, 'workdir': "
                          "'/tmp'}\n")
             != std::string::npos);
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 3u);
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto& m = reqs[i].msg;
    BOOST_TEST(m.get_string("id") == pid + "-" + std::to_string(i + 1));
    BOOST_TEST(m.get_string("token") == "secret-token");
    BOOST_TEST(reqs[i].connection == 1);
  }
  // Keys in wire order: id, tool, args, token, cell; null defaults are
  // sent.
  BOOST_TEST(reqs[1].line.find("{\"id\": \"" + pid + "-2\", \"tool\": "
                               "\"web_extract\", \"args\": {\"urls\": "
                               "[\"http://x\"], \"char_limit\": null}, "
                               "\"token\": \"secret-token\", \"cell\": ")
             == 0u,
             reqs[1].line);
  BOOST_TEST(s.server.connections() == 1);
}

BOOST_AUTO_TEST_CASE(wrong_token_is_sent_and_refusal_returns_as_value) {
  rpc_setup s{{}, {}, "wrong-token"};
  auto f = s.kernel.run("from mibyan_tools import read_file\n"
                        "print(read_file('a.txt'))");
  BOOST_TEST(f.status() == "ok");
  BOOST_TEST(f.out() == "{'error': 'Unauthorized RPC request'}\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 1u);
  BOOST_TEST(reqs[0].msg.get_string("token") == "wrong-token");
}

BOOST_AUTO_TEST_CASE(double_encoded_and_odd_results_are_decoded) {
  fake_rpc_options o;
  o.answer = [](const fake_rpc_request& r) -> std::string {
    auto args = r.msg.find("args");
    auto path = args != nullptr ? args->get_string("path", "") : "";
    if (path == "double")
      return json::quote("{\"content\": \"x\", \"total_lines\": 1}");
    if (path == "string")
      return "\"just text\"";
    if (path == "garbage")
      return "not json at all";
    if (path == "bom")
      return "\xef\xbb\xbf{\"ok\": true}";
    if (path == "control")
      return "{\"content\": \"a\tb\"}";
    return "{\"error\": \"File not found: " + path + "\"}";
  };
  rpc_setup s{o};
  auto f = s.kernel.run("from mibyan_tools import read_file\n"
                        "for p in ['double', 'string', 'garbage', 'bom',\n"
                        "          'control', 'missing']:\n"
                        "    print(repr(read_file(p)))");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "{'content': 'x', 'total_lines': 1}\n"
                        "'just text'\n"
                        "'not json at all'\n"
                        "{'ok': True}\n"
                        "{'content': 'a\\tb'}\n"
                        "{'error': 'File not found: missing'}\n");
}

BOOST_AUTO_TEST_CASE(concurrent_calls_get_their_own_out_of_order_replies) {
  fake_rpc_options o;
  o.hold = 16;  // nothing is answered until all 16 are in flight
  rpc_setup s{o};
  auto f = s.kernel.run(
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file\n"
    "with ThreadPoolExecutor(16) as pool:\n"
    "    res = list(pool.map(lambda i: read_file('p%d' % i, limit=i + 1),\n"
    "                        range(16)))\n"
    "print(all(r['args']['path'] == 'p%d' % i and\n"
    "          r['args']['limit'] == i + 1 for i, r in enumerate(res)))\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "True\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 16u);
  std::set<std::string> ids;
  for (auto& r : reqs) {
    ids.insert(r.msg.get_string("id"));
    BOOST_TEST(r.connection == 1);
  }
  BOOST_TEST(ids.size() == 16u);
}

BOOST_AUTO_TEST_CASE(lost_reply_raises_outcome_unknown_and_never_resends) {
  fake_rpc_options o;
  o.close_after_read = true;
  rpc_setup s{o};
  auto f = s.kernel.run(
    "from mibyan_tools import write_file\n"
    "try:\n"
    "    write_file('a.txt', 'data')\n"
    "except ConnectionError as e:\n"
    "    print(type(e).__name__, e)\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "ConnectionError mibyan_tools: connection lost after "
                        "'write_file' was sent; outcome unknown \xe2\x80\x94 "
                        "check the effect before retrying.\n");
  std::this_thread::sleep_for(300ms);
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 1u);
  BOOST_TEST(reqs[0].msg.get_string("tool") == "write_file");
  BOOST_TEST(s.server.connections() == 1);
  // An uncaught loss fails the cell, and a later call connects afresh.
  auto g = s.kernel.run("from mibyan_tools import write_file\n"
                        "write_file('b.txt', 'data')");
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(g.trace().find("ConnectionError: mibyan_tools: connection lost "
                            "after 'write_file' was sent; outcome unknown")
             != std::string::npos);
  BOOST_TEST(s.server.requests().size() == 2u);
  BOOST_TEST(s.server.connections() == 2);
}

BOOST_AUTO_TEST_CASE(closed_idle_connection_reconnects_before_send) {
  fake_rpc_options o;
  o.close_after_reply = true;
  rpc_setup s{o};
  auto f = s.kernel.run("from mibyan_tools import read_file\n"
                        "import time\n"
                        "a = read_file('one')\n"
                        "time.sleep(0.3)\n"
                        "b = read_file('two')\n"
                        "print(a['connection'], b['connection'])");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "1 2\n");
  BOOST_TEST(s.server.requests().size() == 2u);
}

BOOST_AUTO_TEST_CASE(forked_child_and_subprocess_get_their_own_connection) {
  rpc_setup s{{}};
  auto f = s.kernel.run(
    "import os, subprocess, sys\n"
    "from mibyan_tools import read_file\n"
    "first = read_file('parent-1')['connection']\n"
    "r, w = os.pipe()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.close(r)\n"
    "    c = read_file('child')['connection']\n"
    "    os.write(w, str(c).encode())\n"
    "    os._exit(0)\n"
    "os.close(w)\n"
    "os.waitpid(pid, 0)\n"
    "child = int(os.read(r, 100))\n"
    "second = read_file('parent-2')['connection']\n"
    "sub = subprocess.run([sys.executable, '-c', 'from mibyan_tools import "
    "read_file; print(read_file(\"sub\")[\"connection\"])'],\n"
    "                     capture_output=True, text=True)\n"
    "print(first, child, second, sub.stdout.strip(), sub.stderr)");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "1 2 1 3 \n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 4u);
  std::set<std::string> pids;
  for (auto& r : reqs) {
    auto id = r.msg.get_string("id");
    pids.insert(id.substr(0, id.find('-')));
  }
  BOOST_TEST(pids.size() == 3u);
  BOOST_TEST(s.server.connections() == 3);
}

BOOST_AUTO_TEST_CASE(missing_or_dead_socket_raises_without_sending) {
  kernel_harness none;  // no MIBYAN_RPC_SOCKET at all
  auto f = none.run("from mibyan_tools import read_file\nread_file('x')");
  BOOST_TEST(f.status() == "error");
  BOOST_TEST(f.trace().find("ConnectionError: mibyan_tools: "
                            "MIBYAN_RPC_SOCKET is not set")
             != std::string::npos,
             f.trace());
  temp_dir d;
  kernel_harness_options o;
  o.rpc_socket = d / "nobody-listens.sock";
  o.rpc_token = "t";
  kernel_harness dead{o};
  auto start = std::chrono::steady_clock::now();
  auto g = dead.run("from mibyan_tools import terminal\nterminal('ls')");
  BOOST_TEST(g.status() == "error");
  BOOST_TEST(g.trace().find("cannot reach the Mibyan host")
               != std::string::npos,
             g.trace());
  BOOST_TEST(g.trace().find("'terminal' was not sent") != std::string::npos);
  BOOST_TEST((std::chrono::steady_clock::now() - start < 5s));
}

BOOST_AUTO_TEST_CASE(missing_reply_times_out_with_outcome_unknown) {
  fake_rpc_options o;
  o.hold = 2;  // a single call is never answered
  kernel_harness_options ko;
  ko.rpc_timeout = 0.5;
  rpc_setup s{o, ko};
  auto start = std::chrono::steady_clock::now();
  auto f = s.kernel.run("from mibyan_tools import terminal\n"
                        "try:\n"
                        "    terminal('sleep 100')\n"
                        "except TimeoutError as e:\n"
                        "    print(e)");
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.out() == "mibyan_tools: no reply to 'terminal' within 0.5s; "
                        "outcome unknown \xe2\x80\x94 check the effect before "
                        "retrying.\n");
  BOOST_TEST((took < 5s));
  BOOST_TEST(s.server.requests().size() == 1u);
}

BOOST_AUTO_TEST_CASE(unserialisable_arguments_raise_before_sending) {
  rpc_setup s{{}};
  auto f = s.kernel.run("from mibyan_tools import read_file, write_file\n"
                        "for call in (lambda: read_file({1, 2}),\n"
                        "             lambda: write_file('a', float('nan')),\n"
                        "             lambda: read_file(b'bytes')):\n"
                        "    try:\n"
                        "        call()\n"
                        "    except TypeError as e:\n"
                        "        print(str(e).split(':')[1].strip())\n");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "the arguments of 'read_file' cannot be sent as JSON\n"
                        "the arguments of 'write_file' cannot be sent as "
                        "JSON\n"
                        "the arguments of 'read_file' cannot be sent as "
                        "JSON\n");
  BOOST_TEST(s.server.requests().empty());
}

BOOST_AUTO_TEST_CASE(function_captured_in_one_cell_works_in_the_next) {
  rpc_setup s{{}};
  BOOST_REQUIRE(s.kernel.run("from mibyan_tools import read_file as rf").ok);
  auto f = s.kernel.run("print(rf('later')['args']['path'])");
  BOOST_TEST(f.out() == "later\n");
  BOOST_TEST(s.server.connections() == 1);
}

BOOST_AUTO_TEST_CASE(sequential_calls_are_fast) {
  rpc_setup s{{}};
  auto f = s.kernel.run("import time\n"
                        "from mibyan_tools import read_file\n"
                        "read_file('warm-up')\n"
                        "t = time.perf_counter()\n"
                        "for i in range(500):\n"
                        "    read_file('f')\n"
                        "print((time.perf_counter() - t) / 500 * 1e6)");
  BOOST_REQUIRE(f.ok);
  BOOST_REQUIRE(f.status() == "ok");
  auto us = std::stod(f.out());
  BOOST_TEST_MESSAGE("tool call round trip: " << us << " us");
  BOOST_TEST(us < 20000.0);
  BOOST_TEST(s.server.requests().size() == 501u);
}

// -- leader/follower read path ------------------------------------------------

BOOST_AUTO_TEST_CASE(single_threaded_calls_start_no_thread) {
  rpc_setup s{{}};
  auto f = s.kernel.run("import threading\n"
                        "from mibyan_tools import read_file\n"
                        "before = threading.active_count()\n"
                        "for i in range(50):\n"
                        "    assert read_file('p%d' % i)['args']['path'] == "
                        "'p%d' % i\n"
                        "print(before, threading.active_count(),\n"
                        "      sorted(t.name for t in threading.enumerate()"
                        "))");
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  // The runner's own threads are there before and after; none is added.
  auto out = f.out();
  BOOST_TEST(out.find("reader") == std::string::npos, out);
  auto sp = out.find(' ');
  BOOST_REQUIRE(sp != std::string::npos);
  auto sp2 = out.find(' ', sp + 1);
  BOOST_TEST(out.substr(0, sp) == out.substr(sp + 1, sp2 - sp - 1), out);
  BOOST_TEST(s.server.requests().size() == 50u);
  BOOST_TEST(s.server.connections() == 1);
}

BOOST_AUTO_TEST_CASE(sixteen_pool_calls_with_reversed_replies) {
  fake_rpc_options o;
  o.hold = 16;  // all 16 in flight, then answered last-first
  kernel_harness_options ko;
  ko.rpc_timeout = 20;
  rpc_setup s{o, ko};
  auto f = s.kernel.run(
    "import threading\n"
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file, terminal\n"
    "def one(i):\n"
    "    if i % 2:\n"
    "        return terminal('echo %d' % i)['args']['command']\n"
    "    return read_file('p%d' % i, offset=i)['args']\n"
    "with ThreadPoolExecutor(16) as pool:\n"
    "    res = list(pool.map(one, range(16)))\n"
    "ok = all(r == ('echo %d' % i if i % 2 else\n"
    "                {'path': 'p%d' % i, 'offset': i, 'limit': None})\n"
    "         for i, r in enumerate(res))\n"
    "print(ok, [t.name for t in threading.enumerate()\n"
    "           if 'mibyan-tools' in t.name])\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "True []\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 16u);
  std::set<std::string> ids;
  for (auto& r : reqs) {
    ids.insert(r.msg.get_string("id"));
    BOOST_TEST(r.connection == 1);
  }
  BOOST_TEST(ids.size() == 16u);
}

// The first caller reads for everyone; its own reply comes last.
BOOST_AUTO_TEST_CASE(reader_routes_others_before_its_own_reply) {
  fake_rpc_options o;
  o.hold = 4;  // replies: d, c, b, then the reader's a
  kernel_harness_options ko;
  ko.rpc_timeout = 10;
  rpc_setup s{o, ko};
  auto f = s.kernel.run(
    "import threading, time\n"
    "from mibyan_tools import read_file\n"
    "res = {}\n"
    "def call(p):\n"
    "    res[p] = read_file(p)['args']['path']\n"
    "lead = threading.Thread(target=call, args=('a',))\n"
    "lead.start()\n"
    "time.sleep(0.2)\n"
    "rest = [threading.Thread(target=call, args=(p,)) for p in 'bcd']\n"
    "for t in rest:\n"
    "    t.start()\n"
    "t0 = time.monotonic()\n"
    "for t in [lead] + rest:\n"
    "    t.join()\n"
    "print(sorted(res.items()), time.monotonic() - t0 < 5)\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "[('a', 'a'), ('b', 'b'), ('c', 'c'), ('d', 'd')] "
                        "True\n");
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 4u);
  BOOST_TEST(reqs[0].msg.find("args")->get_string("path") == "a");
}

// The reader's reply comes first while two calls still wait: the role must
// pass to one of them (no reply would be read otherwise; the timeout is 10 s
// and the cell must end in well under that).
BOOST_AUTO_TEST_CASE(reader_hands_off_when_its_reply_comes_first) {
  fake_rpc_options o;
  o.answer = slow_answer(300ms);  // served in order: a, b, c, 0.3 s each
  kernel_harness_options ko;
  ko.rpc_timeout = 10;
  rpc_setup s{o, ko};
  auto f = s.kernel.run(
    "import threading, time\n"
    "from mibyan_tools import read_file\n"
    "res, order = {}, []\n"
    "def call(p):\n"
    "    res[p] = read_file(p)['args']['path']\n"
    "    order.append(p)\n"
    "t0 = time.monotonic()\n"
    "lead = threading.Thread(target=call, args=('slow-a',))\n"
    "lead.start()\n"
    "time.sleep(0.1)\n"
    "rest = [threading.Thread(target=call, args=('slow-' + p,))\n"
    "        for p in 'bc']\n"
    "for t in rest:\n"
    "    t.start()\n"
    "lead.join()\n"
    "lead_done = time.monotonic() - t0\n"
    "for t in rest:\n"
    "    t.join()\n"
    "took = time.monotonic() - t0\n"
    "print(order[0], all(k == v for k, v in res.items()), len(res))\n"
    "print(lead_done < 0.6, 0.8 < took < 3)\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "slow-a True 3\nTrue True\n", f.out());
  BOOST_TEST(s.server.requests().size() == 3u);
  BOOST_TEST(s.server.connections() == 1);
}

// A waiting (non-reading) call times out on its own deadline while the
// reader keeps reading; its late reply is dropped, never misrouted.
BOOST_AUTO_TEST_CASE(follower_times_out_while_the_reader_reads) {
  fake_rpc_options o;
  o.answer = slow_answer(1000ms);  // b queues behind slow-a on the server
  rpc_setup s{o};
  auto f = s.kernel.run(
    "import os, threading, time\n"
    "from mibyan_tools import read_file\n"
    "res = {}\n"
    "def lead():\n"
    "    res['a'] = read_file('slow-a')['args']['path']\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '5'\n"
    "t = threading.Thread(target=lead)\n"
    "t.start()\n"
    "time.sleep(0.1)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '0.4'\n"
    "t0 = time.monotonic()\n"
    "try:\n"
    "    read_file('b')\n"
    "    print('no timeout')\n"
    "except TimeoutError as e:\n"
    "    print(e)\n"
    "print(time.monotonic() - t0 < 0.9)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '5'\n"
    "t.join()\n"
    "print(res['a'], read_file('after')['args']['path'])\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "mibyan_tools: no reply to 'read_file' within 0.4s; "
                        "outcome unknown \xe2\x80\x94 check the effect before "
                        "retrying.\nTrue\nslow-a after\n",
             f.out());
  auto reqs = s.server.requests();
  BOOST_REQUIRE(reqs.size() == 3u);  // b was not resent
  BOOST_TEST(s.server.connections() == 1);
}

// The reader itself times out: it gives the role to the call still waiting,
// which then reads the reader's late reply (dropped) and its own.
BOOST_AUTO_TEST_CASE(reader_times_out_and_hands_off) {
  fake_rpc_options o;
  o.answer = slow_answer(1000ms);
  rpc_setup s{o};
  auto f = s.kernel.run(
    "import os, threading, time\n"
    "from mibyan_tools import read_file\n"
    "res = {}\n"
    "def lead():\n"
    "    t0 = time.monotonic()\n"
    "    try:\n"
    "        read_file('slow-a')\n"
    "    except TimeoutError as e:\n"
    "        res['a'] = (str(e).startswith(\n"
    "            \"mibyan_tools: no reply to 'read_file' within 0.4s;\"),\n"
    "            time.monotonic() - t0 < 0.9)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '0.4'\n"
    "t = threading.Thread(target=lead)\n"
    "t.start()\n"
    "time.sleep(0.1)\n"
    "os.environ['MIBYAN_RPC_TIMEOUT'] = '5'\n"
    "t0 = time.monotonic()\n"
    "b = read_file('b')['args']['path']\n"
    "took = time.monotonic() - t0\n"
    "t.join()\n"
    "print(res['a'], b, 0.6 < took < 3)\n",
    30s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "(True, True) b True\n",
             f.out());
  BOOST_TEST(s.server.requests().size() == 2u);
}

// Four calls in flight on one connection when the host goes away: each gets
// the outcome-unknown error and none is sent again (a new server listening
// on the same path sees nothing until the next call).
BOOST_AUTO_TEST_CASE(drop_with_four_in_flight_fails_all_four_once) {
  temp_dir sock_dir;
  auto path = sock_dir / "rpc.sock";
  fake_rpc_options o;
  o.token = "secret-token";
  o.hold = 5;  // never answered
  auto server = std::make_unique<fake_rpc_server>(path, o);
  kernel_harness_options ko;
  ko.rpc_socket = path;
  ko.rpc_token = "secret-token";
  ko.rpc_timeout = 20;
  kernel_harness kernel{ko};
  auto cell = std::async(std::launch::async, [&] {
    return kernel.run(
      "import threading\n"
      "from mibyan_tools import write_file\n"
      "errs = []\n"
      "def call(i):\n"
      "    try:\n"
      "        write_file('f%d' % i, 'x')\n"
      "        errs.append('returned')\n"
      "    except ConnectionError as e:\n"
      "        errs.append(str(e))\n"
      "ts = [threading.Thread(target=call, args=(i,)) for i in range(4)]\n"
      "for t in ts:\n"
      "    t.start()\n"
      "for t in ts:\n"
      "    t.join()\n"
      "for e in errs:\n"
      "    print(e)\n",
      60s);
  });
  auto until = std::chrono::steady_clock::now() + 20s;
  while (server->requests().size() < 4u
         && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  auto reqs = server->requests();
  BOOST_REQUIRE(reqs.size() == 4u);
  for (auto& r : reqs)
    BOOST_TEST(r.connection == 1);
  server.reset();  // shuts every connection down
  fake_rpc_options o2;
  o2.token = "secret-token";
  fake_rpc_server second{path, o2};
  auto f = cell.get();
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  std::string lost = "mibyan_tools: connection lost after 'write_file' was "
                     "sent; outcome unknown \xe2\x80\x94 check the effect "
                     "before retrying.\n";
  BOOST_TEST(f.out() == lost + lost + lost + lost, f.out());
  std::this_thread::sleep_for(300ms);
  BOOST_TEST(second.requests().empty());
  BOOST_TEST(second.connections() == 0);
  // The next call connects afresh.
  auto g = kernel.run("from mibyan_tools import read_file\n"
                      "print(read_file('next')['args']['path'])");
  BOOST_TEST(g.out() == "next\n", g.trace());
  BOOST_TEST(second.requests().size() == 1u);
  BOOST_TEST(second.connections() == 1);
}

// Replies larger than the read buffer, interleaved with small ones and out
// of order, arrive whole.
BOOST_AUTO_TEST_CASE(large_replies_out_of_order_arrive_whole) {
  fake_rpc_options o;
  o.hold = 4;
  o.answer = [](const fake_rpc_request& r) -> std::string {
    auto args = r.msg.find("args");
    auto n = args != nullptr ? args->get_int("limit", 0) : 0;
    json::value v = json::value::make_object();
    v["content"] = std::string(static_cast<size_t>(n), 'x');
    v["n"] = n;
    return v.dump();
  };
  kernel_harness_options ko;
  ko.rpc_timeout = 20;
  rpc_setup s{o, ko};
  auto f = s.kernel.run(
    "from concurrent.futures import ThreadPoolExecutor\n"
    "from mibyan_tools import read_file\n"
    "sizes = [3 << 20, 10, 200000, 1]\n"
    "with ThreadPoolExecutor(4) as pool:\n"
    "    res = list(pool.map(lambda n: read_file('f', limit=n), sizes))\n"
    "    again = list(pool.map(lambda n: read_file('f', limit=n),\n"
    "                          [5, 1, 2, 3]))\n"
    "print([r['n'] == n and len(r['content']) == n\n"
    "       for r, n in zip(res, sizes)])\n"
    "print(again[0]['content'], [r['n'] for r in again])\n",
    60s);
  BOOST_REQUIRE(f.ok);
  BOOST_TEST(f.status() == "ok", f.trace());
  BOOST_TEST(f.out() == "[True, True, True, True]\nxxxxx [5, 1, 2, 3]\n",
             f.out());
}

// -- host tools (docs/embedding.md) --------------------------------------------

BOOST_AUTO_TEST_CASE(host_tool_stub_from_schema) {
  auto schema = parse_line(
    R"({"type":"object","properties":{"verbose":{"type":"boolean"},)"
    R"("order_id":{"type":"string"},"count":{"type":"integer"}},)"
    R"("required":["order_id"]})");
  auto made = make_script_tool_spec("lookup_order", "Finds an \"order\".\n"
                                    "Second line.", schema);
  BOOST_REQUIRE_MESSAGE(made.ok(), made.error);
  auto spec = *made;
  BOOST_TEST(stub_signature(spec) == "lookup_order(order_id, verbose=None, "
                                     "count=None)");
  // Offered only when named in the tool list; sorted in with the others.
  auto specs = core_script_specs();
  specs.push_back(spec);
  auto without = generate_stub({"read_file"}, specs);
  BOOST_TEST(without.find("def lookup_order") == std::string::npos);
  auto src = generate_stub({"read_file", "lookup_order"}, specs);
  BOOST_TEST(src.find("AVAILABLE_TOOLS = (\"lookup_order\", \"read_file\",)")
             != std::string::npos);
  BOOST_TEST(src.find("\ndef lookup_order(order_id: str, verbose=None, "
                      "count=None):\n") != std::string::npos);
  BOOST_TEST(src.find(R"(return _call("lookup_order", {"order_id": order_id, )"
                      R"("verbose": verbose, "count": count}))")
             != std::string::npos);
  BOOST_TEST(src.find(R"(Finds an \"order\". Second line.)")
             != std::string::npos);
  BOOST_TEST(src.find("def lookup_order") < src.find("def read_file"));
  // Names that cannot be Python identifiers are refused.
  for (auto name : {"lookup-order", "class", "_hidden"}) {
    auto refused = make_script_tool_spec(name, "", schema);
    BOOST_TEST(!refused.ok());
    BOOST_TEST((refused.code == status_code::invalid_argument));
    BOOST_TEST(refused.error.find(name) != std::string::npos);
  }
  auto bad = parse_line(R"({"type":"object","properties":{"a b":{}},)"
                        R"("required":[]})");
  auto refused = make_script_tool_spec("ok", "", bad);
  BOOST_TEST(!refused.ok());
  BOOST_TEST((refused.code == status_code::invalid_argument));
  BOOST_TEST(refused.error.find("a b") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
