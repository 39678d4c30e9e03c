#define BOOST_TEST_MODULE agent_history_repair
#include <boost/test/unit_test.hpp>

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "agent/history_repair.hpp"
#include "providers/tool_call_id.hpp"

using namespace mibyan;

namespace {

chat_message msg(std::string role, std::string content = "") {
  chat_message m;
  m.role = std::move(role);
  m.content = std::move(content);
  return m;
}

chat_message assistant(std::vector<tool_call> calls, std::string content = "") {
  auto m = msg("assistant", std::move(content));
  m.tool_calls = std::move(calls);
  return m;
}

chat_message result(std::string id, std::string content = "out") {
  auto m = msg("tool", std::move(content));
  m.tool_call_id = std::move(id);
  return m;
}

tool_call tc(std::string id, std::string name = "read_file",
             std::string args = "{}") {
  return tool_call{std::move(id), std::move(name), std::move(args)};
}

std::string roles(const std::vector<chat_message>& xs) {
  std::string out;
  for (auto& m : xs) {
    if (!out.empty())
      out += ",";
    out += m.role;
  }
  return out;
}

// The postcondition of repair_history: every call id is unique, each
// assistant message with calls is followed directly by exactly one result
// per call, in the calls' order, and no other tool message exists.
void check_invariants(const std::vector<chat_message>& xs) {
  std::set<std::string> ids;
  for (size_t i = 0; i < xs.size(); ++i) {
    auto& m = xs[i];
    BOOST_TEST(is_valid_role(m.role), "role " << m.role);
    if (m.role == "tool") {
      // A tool message must sit in the result block of an assistant.
      size_t j = i;
      while (j > 0 && xs[j - 1].role == "tool")
        --j;
      BOOST_TEST_REQUIRE(j > 0, "orphan tool message at " << i);
      auto& owner = xs[j - 1];
      BOOST_TEST_REQUIRE(owner.role == "assistant");
      BOOST_TEST_REQUIRE(i - j < owner.tool_calls.size(),
                         "extra tool message at " << i);
      BOOST_TEST(m.tool_call_id == owner.tool_calls[i - j].id);
    }
    if (m.role == "assistant") {
      BOOST_TEST((!m.content.empty() || !m.tool_calls.empty()));
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        auto& c = m.tool_calls[k];
        BOOST_TEST(!c.id.empty());
        BOOST_TEST(!c.name.empty());
        BOOST_TEST(ids.insert(c.id).second, "duplicate id " << c.id);
        BOOST_TEST_REQUIRE(i + 1 + k < xs.size(), "missing result");
        BOOST_TEST(xs[i + 1 + k].role == "tool");
        BOOST_TEST(xs[i + 1 + k].tool_call_id == c.id);
      }
    }
    if (i > 0 && m.role == "user")
      BOOST_TEST(xs[i - 1].role != "user", "adjacent users at " << i);
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(a_clean_history_is_unchanged) {
  std::vector<chat_message> h{
    msg("system", "sys"), msg("user", "hi"),
    assistant({tc("a", "read_file", R"({"path":"x"})")}), result("a"),
    msg("assistant", "done"), msg("user", "next")};
  auto copy = h;
  auto stats = repair_history(h);
  BOOST_TEST(!stats.changed());
  BOOST_REQUIRE(h.size() == copy.size());
  for (size_t i = 0; i < h.size(); ++i) {
    BOOST_TEST(h[i].role == copy[i].role);
    BOOST_TEST(h[i].content == copy[i].content);
  }
  // The result gained the tool name of its call.
  BOOST_TEST(h[3].tool_name == "read_file");
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(invalid_roles_are_dropped) {
  std::vector<chat_message> h{msg("system", "s"), msg("robot", "x"),
                              msg("user", "u"), msg("", "y"),
                              msg("developer", "d"), msg("function", "f"),
                              msg("Assistant", "z")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.invalid_roles_dropped == 3u);
  BOOST_TEST(roles(h) == "system,user,developer,function");
}

BOOST_AUTO_TEST_CASE(orphan_results_are_removed) {
  std::vector<chat_message> h{
    msg("user", "u"), result("ghost"), assistant({tc("a")}), result("a"),
    result("a"), result("b"), msg("assistant", "ok")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.orphan_results_dropped == 3u);
  BOOST_TEST(roles(h) == "user,assistant,tool,assistant");
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(results_before_their_call_are_orphans) {
  std::vector<chat_message> h{msg("user", "u"), result("a"),
                              assistant({tc("a")})};
  auto stats = repair_history(h);
  BOOST_TEST(stats.orphan_results_dropped == 1u);
  BOOST_TEST(stats.stub_results_inserted == 1u);
  BOOST_TEST(roles(h) == "user,assistant,tool");
  BOOST_TEST(h[2].content == missing_tool_result_text);
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(unanswered_calls_get_stubs_in_model_order) {
  std::vector<chat_message> h{
    msg("user", "u"),
    assistant({tc("a", "read_file"), tc("b", "terminal"), tc("c", "patch")}),
    result("c", "third"), result("a", "first"), msg("user", "stop")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.stub_results_inserted == 1u);
  BOOST_TEST(roles(h) == "user,assistant,tool,tool,tool,user");
  BOOST_TEST(h[2].content == "first");
  BOOST_TEST(h[3].tool_call_id == "b");
  BOOST_TEST(h[3].tool_name == "terminal");
  BOOST_TEST(h[3].content == missing_tool_result_text);
  BOOST_TEST(h[4].content == "third");
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(interrupted_tail_gets_stubs) {
  std::vector<chat_message> h{msg("user", "u"),
                              assistant({tc("a"), tc("b")})};
  repair_history(h);
  BOOST_TEST(roles(h) == "user,assistant,tool,tool");
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(a_result_after_a_user_message_moves_back) {
  std::vector<chat_message> h{msg("user", "u"), assistant({tc("a")}),
                              msg("user", "more"), result("a", "late")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.stub_results_inserted == 0u);
  BOOST_TEST(roles(h) == "user,assistant,tool,user");
  BOOST_TEST(h[2].content == "late");
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(duplicate_call_ids_are_made_unique) {
  // One message repeating an id, and a later message reusing ids the way
  // some local servers number them per message.
  std::vector<chat_message> h{
    msg("user", "u"),
    assistant({tc("call_0", "read_file", R"({"path":"a"})"),
               tc("call_0", "read_file", R"({"path":"b"})")}),
    result("call_0", "A"), result("call_0", "B"),
    msg("assistant", "x"), msg("user", "again"),
    assistant({tc("call_0", "terminal")}), result("call_0", "T")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.ids_assigned == 2u);
  BOOST_TEST(stats.orphan_results_dropped == 0u);
  BOOST_TEST(h[1].tool_calls[0].id == "call_0");
  BOOST_TEST(h[1].tool_calls[1].id
             == make_tool_call_id("read_file", R"({"path":"b"})", 1));
  BOOST_TEST(h[2].content == "A");
  BOOST_TEST(h[3].content == "B");
  BOOST_TEST(h[3].tool_call_id == h[1].tool_calls[1].id);
  BOOST_TEST(h[6].tool_calls[0].id == make_tool_call_id("terminal", "{}", 0));
  BOOST_TEST(h[7].content == "T");
  BOOST_TEST(h[7].tool_call_id == h[6].tool_calls[0].id);
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(reused_id_answers_the_most_recent_declaration) {
  // The first call's result was lost; the id is reused by the next message.
  std::vector<chat_message> h{
    msg("user", "u"), assistant({tc("x", "terminal")}), msg("user", "hm"),
    assistant({tc("x", "read_file")}), result("x", "R")};
  repair_history(h);
  BOOST_TEST(roles(h) == "user,assistant,tool,user,assistant,tool");
  BOOST_TEST(h[2].content == missing_tool_result_text);
  BOOST_TEST(h[5].content == "R");
  BOOST_TEST(h[5].tool_name == "read_file");
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(empty_names_and_ids_are_repaired) {
  std::vector<chat_message> h{msg("user", "u"),
                              assistant({tc("", ""), tc("", "terminal")})};
  auto stats = repair_history(h);
  BOOST_TEST(stats.empty_names_renamed == 1u);
  BOOST_TEST(stats.ids_assigned == 2u);
  BOOST_TEST(h[1].tool_calls[0].name == "invalid_tool_call");
  BOOST_TEST(h[1].tool_calls[0].id
             == make_tool_call_id("invalid_tool_call", "{}", 0));
  check_invariants(h);
}

BOOST_AUTO_TEST_CASE(adjacent_user_messages_merge) {
  std::vector<chat_message> h{msg("system", "s"), msg("user", " one "),
                              msg("user", "two\n"), msg("user", ""),
                              msg("assistant", "a"), msg("user", "three")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.user_messages_merged == 2u);
  BOOST_TEST(roles(h) == "system,user,assistant,user");
  BOOST_TEST(h[1].content == "one\n\ntwo");
}

BOOST_AUTO_TEST_CASE(thinking_only_and_empty_assistant_turns_are_dropped) {
  auto thinking = msg("assistant", "  \n");
  thinking.reasoning = "let me think";
  std::vector<chat_message> h{msg("user", "a"), thinking, msg("user", "b"),
                              msg("assistant", ""), msg("assistant", "real")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.empty_assistants_dropped == 2u);
  BOOST_TEST(roles(h) == "user,assistant");
  BOOST_TEST(h[0].content == "a\n\nb");
  BOOST_TEST(h[1].content == "real");
}

BOOST_AUTO_TEST_CASE(contents_are_trimmed) {
  std::vector<chat_message> h{msg("system", "\n sys \n"), msg("user", "\tu "),
                              assistant({tc("a")}, "  calling  "),
                              result("a", "  out\n")};
  auto stats = repair_history(h);
  BOOST_TEST(stats.contents_trimmed == 4u);
  BOOST_TEST(h[0].content == "sys");
  BOOST_TEST(h[1].content == "u");
  BOOST_TEST(h[2].content == "calling");
  BOOST_TEST(h[3].content == "out");
}

BOOST_AUTO_TEST_CASE(arguments_are_canonicalised) {
  std::vector<chat_message> h{
    msg("user", "u"),
    assistant({tc("a", "f",
                  R"({ "b": 1, "a": {"z": [ {"y":1,"x":2} ], "c": null} })"),
               tc("b", "f", "  "), tc("c", "f", "{broken"),
               tc("d", "f", R"({"a":1})")})};
  auto stats = repair_history(h);
  BOOST_TEST(stats.arguments_canonicalized == 2u);
  auto& calls = h[1].tool_calls;
  BOOST_TEST(calls[0].arguments
             == R"({"a":{"c":null,"z":[{"x":2,"y":1}]},"b":1})");
  BOOST_TEST(calls[1].arguments == "{}");
  BOOST_TEST(calls[2].arguments == "{broken");
  BOOST_TEST(calls[3].arguments == R"({"a":1})");
}

BOOST_AUTO_TEST_CASE(canonical_arguments_helpers) {
  BOOST_TEST(canonical_arguments("") == "{}");
  BOOST_TEST(canonical_arguments("[3, 1]") == "[3,1]");
  BOOST_TEST(canonical_arguments("\"s\"") == "\"s\"");
  BOOST_TEST(canonical_arguments("nope") == "nope");
  BOOST_TEST(canonical_arguments(R"({"b":1,"a":2})")
             == canonical_arguments(R"({ "a" : 2 , "b" : 1 })"));
  // Duplicate keys keep their relative order.
  json::object dup;
  dup.emplace_back("k", 1);
  dup.emplace_back("a", 0);
  dup.emplace_back("k", 2);
  BOOST_TEST(sort_keys(json::value{dup}).dump() == R"({"a":0,"k":1,"k":2})");
}

BOOST_AUTO_TEST_CASE(repair_is_idempotent) {
  std::vector<chat_message> h{
    msg("user", " u "), result("zz"), assistant({tc("a"), tc("a"), tc("")}),
    result("a"), msg("user", "x"), msg("user", "y"), msg("bogus", "q"),
    assistant({}, " ")};
  repair_history(h);
  check_invariants(h);
  auto once = h;
  auto stats = repair_history(h);
  BOOST_TEST(!stats.changed());
  BOOST_REQUIRE(h.size() == once.size());
  for (size_t i = 0; i < h.size(); ++i) {
    BOOST_TEST(h[i].content == once[i].content);
    BOOST_TEST(h[i].tool_call_id == once[i].tool_call_id);
    BOOST_TEST(h[i].tool_calls.size() == once[i].tool_calls.size());
  }
}

BOOST_AUTO_TEST_CASE(random_histories_satisfy_the_invariants) {
  // Deterministic fuzzing: messy histories built from a fixed seed.
  std::mt19937 rng{20240607};
  const char* roles_pool[] = {"user", "assistant", "tool", "system", "weird"};
  const char* ids_pool[] = {"a", "b", "c", "", "call_0"};
  const char* args_pool[] = {"{}", R"({"b":1,"a":2})", "", "{bad", "[1]"};
  for (int round = 0; round < 300; ++round) {
    std::vector<chat_message> h;
    auto n = rng() % 14;
    for (size_t i = 0; i < n; ++i) {
      auto m = msg(roles_pool[rng() % 5], rng() % 3 == 0 ? " " : "text");
      if (m.role == "assistant")
        for (auto k = rng() % 4; k > 0; --k)
          m.tool_calls.push_back(tc(ids_pool[rng() % 5],
                                    rng() % 4 == 0 ? "" : "read_file",
                                    args_pool[rng() % 5]));
      if (m.role == "tool")
        m.tool_call_id = ids_pool[rng() % 5];
      h.push_back(std::move(m));
    }
    repair_history(h);
    check_invariants(h);
    auto again = repair_history(h);
    BOOST_TEST(!again.changed(), "round " << round);
  }
}
