// The scripts' mibyan_tools stubs (kernels/stub_generator.hpp): generated
// from the tools' schemas and script policies, valid Python with those
// signatures and docstrings, the documented helpers, and host tools' stubs.
// The transport the stubs call through: stub_transport_test.
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
