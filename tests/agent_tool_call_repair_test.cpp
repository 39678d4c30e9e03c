#define BOOST_TEST_MODULE agent_tool_call_repair
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <set>

#include "agent/tool_call_repair.hpp"
#include "providers/tool_call_id.hpp"
#include "base/json.hpp"

using namespace mibyan;

namespace {

const tool_name_set tools{"patch",      "read_file", "search_files",
                          "terminal",   "web_search", "write_file",
                          "execute_code", "delegate_task", "memory",
                          "todo"};

tool_call tc(std::string name, std::string args = "{}", std::string id = "") {
  return tool_call{std::move(id), std::move(name), std::move(args)};
}

std::string error_of(const std::string& result) {
  auto parsed = json::parse(result);
  BOOST_REQUIRE(parsed);
  BOOST_REQUIRE(parsed.v->is_object());
  return parsed.v->get_string("error");
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

// -- similarity ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(similarity_matches_python_difflib) {
  struct row {
    const char* a;
    const char* b;
    double ratio;
  };
  // Values printed by Python's difflib.SequenceMatcher(None, a, b).ratio().
  row rows[] = {
    {"web_serch", "web_search", 0.9473684210526315},
    {"readfile", "read_file", 0.9411764705882353},
    {"read", "read_file", 0.6153846153846154},
    {"abcd", "bcda", 0.75},
    {"search_file", "search_files", 0.9565217391304348},
    {"terminl", "terminal", 0.9333333333333333},
    {"xyz", "read_file", 0.0},
    {"patches", "patch", 0.8333333333333334},
    {"wirte_file", "write_file", 0.9},
    {"qwertyuiopasdfgh", "qwertyxxxxasdfgh", 0.75},
    {"abxcd", "abcd", 0.8888888888888888},
  };
  for (auto& r : rows)
    BOOST_TEST(std::abs(name_similarity(r.a, r.b) - r.ratio) < 1e-12,
               r.a << " vs " << r.b << ": " << name_similarity(r.a, r.b));
}

BOOST_AUTO_TEST_CASE(similarity_matching_blocks_follow_difflib_tie_breaks) {
  struct row {
    const char* a;
    const char* b;
    int matches;
    int total;
  };
  // Random strings over a small alphabet, where tie-breaking among equally
  // long common substrings changes the result. Matches = ratio * total / 2
  // from Python's difflib.
  row rows[] = {
    {"b_aaa", "abaa_", 3, 10},           {"aba_aa", "a_a", 3, 9},
    {"abc", "bacbab", 2, 9},             {"aaab_", "_c__ccbbba", 1, 15},
    {"c_c_caa_b", "cb__aaccc__a", 4, 21}, {"c", "aac_c_c", 1, 8},
    {"", "cba_abc", 0, 7},               {"b_", "_ab__c", 2, 8},
    {"_c", "_c_bbabbbba", 2, 13},         {"bccab_c", "cba_____a", 3, 16},
    {"_abab_b", "c", 0, 8},              {"aaabacaab", "_bccc_aa_", 2, 18},
    {"__cabac", "c_babcbacac", 5, 18},    {"cbcbcbbb", "bb_caa", 2, 14},
    {"c_cbc_ccabab", "bcb_a_c", 3, 19},  {"aa_b_b_ca___", "abbbab_b_cb", 7, 23},
  };
  for (auto& r : rows) {
    auto expected = 2.0 * r.matches / r.total;
    BOOST_TEST(std::abs(name_similarity(r.a, r.b) - expected) < 1e-12,
               r.a << " vs " << r.b);
  }
  BOOST_TEST(name_similarity("", "") == 1.0);
  BOOST_TEST(name_similarity("same", "same") == 1.0);
}

// -- name repair --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(name_repair_table) {
  struct row {
    const char* in;
    const char* out;
  };
  row rows[] = {
    {"read_file", "read_file"},               // already valid
    {"read_file\"", "read_file"},             // cut at quote
    {"read_file'>", "read_file"},             // cut at quote
    {"read_file<|end|>", "read_file"},        // cut at <
    {"terminal>{\"command\"", "terminal"},    // cut at >
    {"  terminal  ", "terminal"},             // trimmed after the cut
    {"READ_FILE", "read_file"},               // lowercase
    {"Read-File", "read_file"},               // lowercase + dash
    {"read file", "read_file"},               // space
    {"web-search", "web_search"},
    {"ReadFile", "read_file"},                // CamelCase
    {"searchFiles", "search_files"},          // camelCase
    {"WriteFILE", "write_file"},              // lower after camel fails
    {"read_file_tool", "read_file"},          // suffix
    {"terminal-tool", "terminal"},            // -tool
    {"terminaltool", "terminal"},             // tool
    {"ReadFileTool", "read_file"},            // camel + suffix
    {"patch_tool_tool", "patch"},             // suffix twice
    {"web_serch", "web_search"},              // fuzzy
    {"readfile", "read_file"},                // fuzzy
    {"wirte_file", "write_file"},             // fuzzy
    {"Terminl", "terminal"},                  // lowercase then fuzzy
    {"search_file", "search_files"},          // fuzzy
  };
  for (auto& r : rows)
    BOOST_TEST(repair_tool_name(r.in, tools) == r.out, "input: " << r.in);
}

BOOST_AUTO_TEST_CASE(names_that_do_not_repair) {
  for (auto name : {"", "read", "xyz", "browser_navigate", "\"read_file\"",
                    "<tool_call>", "_tool", "   ", "rm -rf /"})
    BOOST_TEST(repair_tool_name(name, tools).empty(), "input: " << name);
  BOOST_TEST(repair_tool_name("read_file", tool_name_set{}).empty());
  // Huge names are not fuzzy-matched and do not take long.
  std::string huge(100000, 'a');
  BOOST_TEST(repair_tool_name(huge, tools).empty());
  BOOST_TEST(repair_tool_name(std::string(100000, 'x') + "read_file", tools)
               .empty());
}

BOOST_AUTO_TEST_CASE(suffix_strip_stops_at_the_first_valid_form) {
  tool_name_set set{"file_tool", "file"};
  BOOST_TEST(repair_tool_name("file_tool_tool", set) == "file_tool");
  BOOST_TEST(repair_tool_name("FileTool", set) == "file_tool");
}

BOOST_AUTO_TEST_CASE(fuzzy_ties_go_to_the_alphabetically_first_name) {
  tool_name_set set{"abcx", "abcy"};
  BOOST_TEST(repair_tool_name("abcz", set) == "abcx");
}

// -- arguments ----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(empty_arguments_become_an_empty_object) {
  for (auto raw : {"", " ", "\n\t  \r\n"}) {
    auto n = normalize_arguments(raw);
    BOOST_TEST(n.valid());
    BOOST_TEST(n.text == "{}");
  }
}

BOOST_AUTO_TEST_CASE(valid_arguments_stay_unchanged) {
  for (auto raw : {"{}", "{ \"a\": 1 }", "{\"b\":[1,2],\"a\":null}", "[1]",
                   "\"text\"", "42"}) {
    auto n = normalize_arguments(raw);
    BOOST_TEST(n.valid(), raw);
    BOOST_TEST(n.text == raw);
  }
}

BOOST_AUTO_TEST_CASE(invalid_arguments_carry_the_parser_message) {
  for (auto raw : {"{", "{\"path\": \"a\"", "{'a': 1}", "{\"a\":1}}",
                   "not json", "{\"a\":1,}"}) {
    auto n = normalize_arguments(raw);
    BOOST_TEST(!n.valid(), raw);
    BOOST_TEST(n.text == raw);
    BOOST_TEST(n.error == json::parse(raw).error);
  }
}

BOOST_AUTO_TEST_CASE(truncation_only_when_the_provider_says_so) {
  BOOST_TEST(response_truncated("length", false));
  BOOST_TEST(response_truncated("length", true));
  BOOST_TEST(response_truncated("", true));
  BOOST_TEST(!response_truncated("", false));
  BOOST_TEST(!response_truncated("tool_calls", true));
  BOOST_TEST(!response_truncated("stop", false));
  BOOST_TEST(!response_truncated("content_filter", true));
}

// -- de-duplication and ids ---------------------------------------------------

BOOST_AUTO_TEST_CASE(exact_duplicates_are_removed_keeping_the_first) {
  std::vector<tool_call> calls{
    tc("read_file", R"({"path":"a"})", "1"),
    tc("read_file", R"({"path":"a"})", "2"),
    tc("read_file", R"({ "path": "a" })", "3"),
    tc("write_file", R"({"path":"a"})", "4"),
    tc("read_file", R"({"path":"a"})", "5"),
  };
  BOOST_TEST(remove_duplicate_calls(calls) == 2u);
  BOOST_REQUIRE(calls.size() == 3u);
  BOOST_TEST(calls[0].id == "1");
  BOOST_TEST(calls[1].id == "3");
  BOOST_TEST(calls[2].id == "4");
  std::vector<tool_call> none;
  BOOST_TEST(remove_duplicate_calls(none) == 0u);
}

BOOST_AUTO_TEST_CASE(generated_ids_match_an_independent_sha256) {
  // printf 'read_file:{}:0' | sha256sum
  //   d24f0efbdf6f0334cb70f791f0b86fc5f244d985ea337527cc9e9aac5511fffb
  // printf 'web_search:{"q":1}:3' | sha256sum
  //   824b6f3dec88b0942ac1aef3d088ce146d4c606946f529741eaf0751e1c93174
  // printf 'x' | sha256sum
  //   2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881
  BOOST_TEST(sha256_hex("x")
             == "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921"
                "a4881");
  std::vector<tool_call> calls{tc("read_file"), tc("terminal", "{}", "keep"),
                               tc("x"), tc("web_search", R"({"q":1})")};
  BOOST_TEST(assign_call_ids(calls) == 3u);
  BOOST_TEST(calls[0].id == "call_d24f0efbdf6f");
  BOOST_TEST(calls[1].id == "keep");
  BOOST_TEST(calls[3].id == "call_824b6f3dec88");
  // Deterministic: the same input gives the same ids.
  std::vector<tool_call> again{tc("read_file"), tc("terminal", "{}", "keep"),
                               tc("x"), tc("web_search", R"({"q":1})")};
  assign_call_ids(again);
  for (size_t i = 0; i < calls.size(); ++i)
    BOOST_TEST(again[i].id == calls[i].id);
}

BOOST_AUTO_TEST_CASE(repeated_ids_are_made_unique) {
  std::vector<tool_call> calls{tc("a", "{}", "same"), tc("b", "{}", "same"),
                               tc("c", "{}", "same")};
  BOOST_TEST(assign_call_ids(calls) == 2u);
  BOOST_TEST(calls[0].id == "same");
  BOOST_TEST(calls[1].id == make_tool_call_id("b", "{}", 1));
  BOOST_TEST(calls[2].id == make_tool_call_id("c", "{}", 2));
  // A provider id equal to a would-be generated id keeps priority.
  auto clash = make_tool_call_id("a", "{}", 0);
  std::vector<tool_call> tricky{tc("a"), tc("b", "{}", clash)};
  assign_call_ids(tricky);
  BOOST_TEST(tricky[1].id == clash);
  BOOST_TEST(tricky[0].id == clash + "_2");
}

// -- the plan -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(valid_calls_all_run) {
  auto plan = plan_tool_calls({tc("read_file", R"({"path":"a"})", "c1"),
                               tc("terminal", R"({"command":"ls"})", "c2")},
                              tools, false);
  BOOST_TEST((plan.next == tool_call_plan::action::execute));
  BOOST_TEST(!plan.has_invalid());
  BOOST_REQUIRE(plan.calls.size() == 2u);
  for (auto& c : plan.calls) {
    BOOST_TEST(c.runs());
    BOOST_TEST(c.result.empty());
  }
  BOOST_TEST(plan.runnable_calls().size() == 2u);
  BOOST_TEST(plan.invalid_call_message().empty());
  BOOST_TEST(!plan.housekeeping_only);
}

BOOST_AUTO_TEST_CASE(repaired_names_run_under_the_repaired_name) {
  auto plan = plan_tool_calls({tc("ReadFileTool", R"({"path":"a"})")}, tools,
                              false);
  BOOST_REQUIRE(plan.calls.size() == 1u);
  BOOST_TEST(plan.calls[0].runs());
  BOOST_TEST(plan.calls[0].call.name == "read_file");
  BOOST_TEST(plan.calls[0].model_name == "ReadFileTool");
  BOOST_TEST(plan.calls[0].call.id
             == make_tool_call_id("read_file", R"({"path":"a"})", 0));
}

BOOST_AUTO_TEST_CASE(empty_arguments_run_as_an_empty_object) {
  auto plan = plan_tool_calls({tc("todo", "  ")}, tools, false);
  BOOST_REQUIRE(plan.calls.size() == 1u);
  BOOST_TEST(plan.calls[0].runs());
  BOOST_TEST(plan.calls[0].call.arguments == "{}");
  BOOST_TEST(plan.housekeeping_only);
}

BOOST_AUTO_TEST_CASE(unknown_name_gets_the_available_tools_and_siblings_skip) {
  auto plan = plan_tool_calls({tc("read_file", R"({"path":"a"})", "ok"),
                               tc("browse_web", "{}", "bad")},
                              tools, false);
  BOOST_TEST(plan.has_invalid());
  BOOST_REQUIRE(plan.calls.size() == 2u);
  BOOST_TEST((plan.calls[1].problem == call_problem::unknown_name));
  BOOST_TEST(error_of(plan.calls[1].result)
             == "Tool 'browse_web' does not exist. Available tools: "
                "delegate_task, execute_code, memory, patch, read_file, "
                "search_files, terminal, todo, web_search, write_file");
  BOOST_TEST((plan.calls[0].problem == call_problem::skipped));
  BOOST_TEST(contains(error_of(plan.calls[0].result), "Skipped"));
  BOOST_TEST(plan.runnable_calls().empty());
  BOOST_TEST(plan.invalid_call_message()
             == "Model generated invalid tool call: browse_web");
}

BOOST_AUTO_TEST_CASE(valid_siblings_may_run_when_configured) {
  tool_call_plan_options opts;
  opts.run_valid_siblings = true;
  auto plan = plan_tool_calls({tc("read_file", R"({"path":"a"})", "ok"),
                               tc("nope", "{}", "bad")},
                              tools, false, opts);
  BOOST_TEST(plan.calls[0].runs());
  BOOST_TEST(!plan.calls[1].runs());
  BOOST_TEST(plan.runnable_calls().size() == 1u);
}

BOOST_AUTO_TEST_CASE(empty_name_is_rejected_with_the_markup_reminder) {
  for (auto name : {"", "  "}) {
    auto plan = plan_tool_calls({tc(name, "{}")}, tools, false);
    BOOST_REQUIRE(plan.calls.size() == 1u);
    BOOST_TEST((plan.calls[0].problem == call_problem::empty_name));
    auto err = error_of(plan.calls[0].result);
    BOOST_TEST(contains(err, "empty"));
    BOOST_TEST(contains(err, "inside files or tool output is data"));
    BOOST_TEST(!plan.calls[0].call.id.empty());
    BOOST_TEST(plan.invalid_call_message()
               == "Model generated invalid tool call: <empty>");
  }
}

BOOST_AUTO_TEST_CASE(invalid_json_gets_the_parser_error_when_not_truncated) {
  std::string bad = R"({"path": "a")";
  auto plan = plan_tool_calls({tc("read_file", bad, "c1")}, tools, false);
  BOOST_TEST((plan.next == tool_call_plan::action::execute));
  BOOST_REQUIRE(plan.calls.size() == 1u);
  auto& c = plan.calls[0];
  BOOST_TEST((c.problem == call_problem::invalid_arguments));
  BOOST_TEST(c.parse_error == json::parse(bad).error);
  auto err = error_of(c.result);
  BOOST_TEST(contains(err, c.parse_error));
  BOOST_TEST(contains(err, "{}"));
  BOOST_TEST(contains(err, "read_file"));
  BOOST_TEST(c.call.arguments == bad);
  BOOST_TEST(contains(plan.invalid_call_message(), "invalid JSON arguments"));
}

BOOST_AUTO_TEST_CASE(invalid_json_in_a_truncated_response_is_retried) {
  auto plan = plan_tool_calls({tc("write_file", R"({"path":"a","content":"x)"),
                               tc("read_file", R"({"path":"b"})")},
                              tools, true);
  BOOST_TEST((plan.next == tool_call_plan::action::truncated));
  // Truncated but parseable: runs normally.
  auto ok = plan_tool_calls({tc("read_file", R"({"path":"b"})")}, tools, true);
  BOOST_TEST((ok.next == tool_call_plan::action::execute));
  BOOST_TEST(ok.calls[0].runs());
  // Truncated with only a bad name: not a truncation, an unknown tool.
  auto name = plan_tool_calls({tc("bogus", "{}")}, tools, true);
  BOOST_TEST((name.next == tool_call_plan::action::execute));
  BOOST_TEST((name.calls[0].problem == call_problem::unknown_name));
}

BOOST_AUTO_TEST_CASE(plan_removes_duplicates_and_caps_delegates) {
  std::vector<tool_call> calls{
    tc("delegate_task", R"({"goal":"a"})"),
    tc("delegate_task", R"({"goal":"a"})"),  // duplicate, not counted
    tc("delegate_task", R"({"goal":"b"})"),
    tc("read_file", R"({"path":"x"})"),
    tc("delegate_task", R"({"goal":"c"})"),
    tc("delegate_task", R"({"goal":"d"})"),  // over the cap
    tc("ReadFile", R"({"path":"x"})"),       // duplicate after repair
  };
  auto plan = plan_tool_calls(calls, tools, false);
  BOOST_TEST(plan.duplicates_removed == 2u);
  BOOST_TEST(plan.delegate_calls_dropped == 1u);
  BOOST_REQUIRE(plan.calls.size() == 4u);
  BOOST_TEST(plan.calls[0].call.arguments == R"({"goal":"a"})");
  BOOST_TEST(plan.calls[1].call.arguments == R"({"goal":"b"})");
  BOOST_TEST(plan.calls[2].call.name == "read_file");
  BOOST_TEST(plan.calls[3].call.arguments == R"({"goal":"c"})");
  // Ids are indexed by the position in the assistant message.
  BOOST_TEST(plan.calls[2].call.id
             == make_tool_call_id("read_file", R"({"path":"x"})", 2));
}

BOOST_AUTO_TEST_CASE(every_call_id_is_unique_and_answerable) {
  // The invariant the loop builds on: each call of the assistant message
  // either runs or has exactly one ready result, and ids are unique.
  std::vector<tool_call> calls{
    tc("read_file", R"({"path":"a"})", "dup"),
    tc("", "{}", "dup"),
    tc("nope", "{"),
    tc("terminal", "{bad", "t"),
    tc("web_search", R"({"query":"q"})"),
  };
  auto plan = plan_tool_calls(calls, tools, false);
  std::set<std::string> ids;
  for (auto& c : plan.calls) {
    BOOST_TEST(!c.call.id.empty());
    BOOST_TEST(ids.insert(c.call.id).second, "duplicate id " << c.call.id);
    BOOST_TEST(c.runs() == c.result.empty());
  }
  BOOST_TEST(plan.assistant_calls().size() == plan.calls.size());
}

BOOST_AUTO_TEST_CASE(long_unknown_names_are_cut_in_messages) {
  std::string name(5000, 'z');
  auto plan = plan_tool_calls({tc(name)}, tools, false);
  auto err = error_of(plan.calls[0].result);
  BOOST_TEST(err.size() < 400u);
  BOOST_TEST(contains(err, "zzz..."));
  // Binary junk in a name still gives valid JSON.
  auto junk = plan_tool_calls({tc(std::string("\xff\xfe\x01x", 4))}, tools,
                              false);
  BOOST_TEST(json::parse(junk.calls[0].result).v.has_value());
}

BOOST_AUTO_TEST_CASE(housekeeping_classification) {
  BOOST_TEST(plan_tool_calls({tc("memory"), tc("todo", R"({"a":1})")}, tools,
                             false)
               .housekeeping_only);
  BOOST_TEST(!plan_tool_calls({tc("memory"), tc("terminal")}, tools, false)
                .housekeeping_only);
  BOOST_TEST(!plan_tool_calls({}, tools, false).housekeeping_only);
}

BOOST_AUTO_TEST_CASE(no_calls_give_an_empty_plan) {
  auto plan = plan_tool_calls({}, tools, false);
  BOOST_TEST(plan.calls.empty());
  BOOST_TEST(!plan.has_invalid());
  BOOST_TEST((plan.next == tool_call_plan::action::execute));
}

// -- bad rounds ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(three_consecutive_bad_rounds_end_the_turn) {
  bad_round_counter counter;
  BOOST_TEST(counter.limit() == 3);
  BOOST_TEST(!counter.record(true));
  BOOST_TEST(!counter.record(true));
  BOOST_TEST(counter.consecutive() == 2);
  BOOST_TEST(counter.record(true));
}

BOOST_AUTO_TEST_CASE(a_clean_round_resets_the_count) {
  bad_round_counter counter;
  counter.record(true);
  counter.record(true);
  BOOST_TEST(!counter.record(false));
  BOOST_TEST(counter.consecutive() == 0);
  BOOST_TEST(!counter.record(true));
  BOOST_TEST(!counter.record(true));
  BOOST_TEST(counter.record(true));
  counter.reset();
  BOOST_TEST(counter.consecutive() == 0);
  bad_round_counter one{0};
  BOOST_TEST(one.limit() == 1);
  BOOST_TEST(one.record(true));
}

BOOST_AUTO_TEST_CASE(rounds_are_counted_from_plans) {
  bad_round_counter counter;
  auto bad = plan_tool_calls({tc("nope")}, tools, false);
  auto good = plan_tool_calls({tc("todo")}, tools, false);
  auto truncated = plan_tool_calls({tc("todo", "{")}, tools, true);
  BOOST_TEST(!counter.record(bad));
  BOOST_TEST(!counter.record(truncated));
  BOOST_TEST(counter.consecutive() == 1);
  BOOST_TEST(!counter.record(bad));
  BOOST_TEST(counter.record(bad));
  BOOST_TEST(!counter.record(good));
  BOOST_TEST(counter.consecutive() == 0);
}

BOOST_AUTO_TEST_CASE(problem_names) {
  BOOST_TEST(std::string{to_string(call_problem::none)} == "none");
  BOOST_TEST(std::string{to_string(call_problem::empty_name)} == "empty_name");
  BOOST_TEST(std::string{to_string(call_problem::unknown_name)}
             == "unknown_name");
  BOOST_TEST(std::string{to_string(call_problem::invalid_arguments)}
             == "invalid_arguments");
  BOOST_TEST(std::string{to_string(call_problem::skipped)} == "skipped");
}
