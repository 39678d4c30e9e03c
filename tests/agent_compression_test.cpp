// Context compression through the real runtime against the scripted
// provider (docs/agent_loop.md, "Context compression"): a session that
// crosses the threshold is summarised into a new session whose parent is
// the old one; tool calls keep their results; the prompt head stays
// byte-identical; `mibyan sessions show` shows the chain.
#define BOOST_TEST_MODULE agent_compression
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "agent/context_compression.hpp"
#include "tests/support/agent_fixture.hpp"
#include "tests/support/process.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

chat_message msg(const char* role, std::string content = "x") {
  chat_message m;
  m.role = role;
  m.content = std::move(content);
  return m;
}

chat_message calling(const std::string& id) {
  chat_message m;
  m.role = "assistant";
  m.tool_calls.push_back(tool_call{id, "read_file", "{}"});
  return m;
}

chat_message answer_of(const std::string& id) {
  chat_message m;
  m.role = "tool";
  m.tool_call_id = id;
  m.content = "r";
  return m;
}

// Every call id of an assistant message has exactly one tool result, and
// every tool result answers a call (OpenAI-shaped messages).
void check_pairing(json::value msgs) {
  std::map<std::string, int> calls;
  std::map<std::string, int> results;
  for (auto& m : msgs.as_array()) {
    if (auto tc = m.find("tool_calls"); tc != nullptr && tc->is_array())
      for (auto& c : tc->as_array())
        ++calls[c["id"].as_string()];
    if (m["role"].as_string() == "tool")
      ++results[m["tool_call_id"].as_string()];
  }
  BOOST_CHECK(calls == results);
  for (auto& [id, n] : calls)
    BOOST_CHECK_MESSAGE(n == 1, id);
}

} // namespace

BOOST_AUTO_TEST_CASE(threshold_and_window) {
  BOOST_TEST(context_window("gpt-4o-mini", 0) == 128000);
  BOOST_TEST(context_window("anything", 4000) == 4000);
  // Small windows: 85 % of the window (the 64000 floor reaches it).
  BOOST_TEST(compression_threshold(4000, 0, 0.5) == 3400);
  // Under 512K the ratio is at least 0.75.
  BOOST_TEST(compression_threshold(200000, 0, 0.5) == 150000);
  BOOST_TEST(compression_threshold(1000000, 0, 0.5) == 500000);
}

BOOST_AUTO_TEST_CASE(cut_keeps_calls_with_their_results) {
  std::vector<chat_message> h{msg("user"),     calling("a"), answer_of("a"),
                              msg("assistant"), msg("user"),  calling("b"),
                              answer_of("b"),      calling("c"), answer_of("c")};
  // A head of 2 would end between call a and its result: it takes it.
  auto cut = choose_cut(h, 2, 1, 0);
  BOOST_TEST(cut.head_end == 3u);
  // A tail of 1 would start at a result: it starts at the call.
  BOOST_TEST(cut.tail_begin == 7u);
  BOOST_TEST(cut.worthwhile());
  auto out = compacted_history(h, cut, "S");
  BOOST_REQUIRE(out.size() == 6u);
  BOOST_TEST(out[3].content.find("S") != std::string::npos);
  BOOST_TEST(out[3].role == "user"); // after a tool result
  BOOST_TEST(out[4].tool_calls.size() == 1u);
  // Nothing between head and tail: not worthwhile.
  BOOST_TEST(!choose_cut(h, 5, 4, 0).worthwhile());
}

BOOST_FIXTURE_TEST_SUITE(agent_compression, agent_fixture)

BOOST_AUTO_TEST_CASE(long_session_continues_in_a_child_session) {
  auto opts = base_options();
  opts.model.context_length = 40000; // threshold 34000 tokens
  opts.compression.protect_first_n = 1;
  opts.compression.protect_last_n = 2;
  start(opts);
  temp_dir work;
  // Two files of ~70K characters: after the first read the context is
  // under the threshold, after the second it is over.
  std::string line(149, 'q');
  auto a = work.path() + "/a.txt";
  auto b = work.path() + "/b.txt";
  {
    std::ofstream fa(a), fb(b);
    for (int i = 0; i < 500; ++i) {
      fa << "A" << line << "\n";
      fb << "B" << line << "\n";
    }
  }
  script(chat_completion("", {{"call_a", "read_file", one_arg("path", a)}}));
  script(chat_completion("", {{"call_b", "read_file", one_arg("path", b)}}));
  script(chat_completion("SUMMARY: read a.txt, it is all q."));
  script(chat_completion("Both files are full of q."));
  std::string old_id = "compress-old";
  std::string new_id;
  auto res = run(call("read both files", old_id), &new_id);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(),
                    "Both files are full of q.");
  BOOST_CHECK_NE(new_id, old_id);
  BOOST_CHECK_EQUAL(res["session_id"].as_string(), new_id);
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  // The third call is the summary: tool-free, over the middle.
  BOOST_CHECK(reqs[2].find("tools") == nullptr);
  BOOST_CHECK(contains(reqs[2]["messages"].dump(), "a.txt"));
  BOOST_CHECK(!contains(reqs[2]["messages"].dump(), "Bqqq"));
  // The head of the prompt is byte-identical before and after.
  auto& before = reqs[0]["messages"].as_array();
  auto& after = reqs[3]["messages"].as_array();
  BOOST_CHECK_EQUAL(before[0].dump(), after[0].dump());
  BOOST_CHECK_EQUAL(before[1].dump(), after[1].dump());
  BOOST_CHECK_EQUAL(reqs[0]["tools"].dump(), reqs[3]["tools"].dump());
  BOOST_CHECK(contains(after[2]["content"].as_string(),
                       "CONTEXT COMPACTION"));
  BOOST_CHECK(contains(after[2]["content"].as_string(), "SUMMARY: read a"));
  BOOST_CHECK(!contains(reqs[3]["messages"].dump(), "Aqqq"));
  BOOST_CHECK(contains(reqs[3]["messages"].dump(), "Bqqq"));
  check_pairing(reqs[3]["messages"]);
  check_pairing(res["messages"]);
  // A chain of two sessions in the store.
  auto store = open_store();
  auto old_info = store->get_session(old_id);
  auto new_info = store->get_session(new_id);
  BOOST_REQUIRE(old_info && new_info);
  BOOST_CHECK_EQUAL(new_info->parent_session_id, old_id);
  BOOST_CHECK_EQUAL(old_info->end_reason, "compression");
  auto stored = store->load_messages(new_id);
  BOOST_REQUIRE(stored);
  json::value arr = json::value::make_array();
  for (auto& m : *stored) {
    json::value j;
    j["role"] = m.message.role;
    if (!m.message.tool_calls.empty()) {
      j["tool_calls"] = json::value::make_array();
      for (auto& c : m.message.tool_calls) {
        json::value cj;
        cj["id"] = c.id;
        j["tool_calls"].push_back(std::move(cj));
      }
    }
    if (m.message.role == "tool")
      j["tool_call_id"] = m.message.tool_call_id;
    arr.push_back(std::move(j));
  }
  check_pairing(arr);
  BOOST_CHECK_EQUAL(stored->front().message.content, "read both files");
  BOOST_CHECK_EQUAL(stored->back().message.content,
                    "Both files are full of q.");
  store.reset();
  // `mibyan sessions show` shows the chain from both ends.
  process_options po;
  po.env["MIBYAN_HOME"] = home.path();
  auto shown = run_mibyan({"sessions", "show", new_id}, po);
  BOOST_CHECK_EQUAL(shown.exit_code, 0);
  BOOST_CHECK_MESSAGE(
    contains(shown.out, "chain: " + old_id + " -> " + new_id + " (this)"),
    shown.out.substr(0, 400));
  auto shown_old = run_mibyan({"sessions", "show", old_id, "--json"}, po);
  BOOST_CHECK_EQUAL(shown_old.exit_code, 0);
  auto j = json::parse(shown_old.out);
  BOOST_REQUIRE(j);
  BOOST_REQUIRE_EQUAL((*j.v)["children"].size(), 1u);
  BOOST_CHECK_EQUAL((*j.v)["children"].as_array()[0]["id"].as_string(),
                    new_id);
}

BOOST_AUTO_TEST_CASE(context_overflow_error_compresses_and_retries) {
  auto opts = base_options();
  opts.compression.protect_first_n = 1;
  opts.compression.protect_last_n = 2;
  start(opts);
  temp_dir work;
  auto a = work.path() + "/a.txt";
  auto b = work.path() + "/b.txt";
  { std::ofstream(a) << "apple\n"; std::ofstream(b) << "banana\n"; }
  script(chat_completion("", {{"call_a", "read_file", one_arg("path", a)}}));
  script(chat_completion("", {{"call_b", "read_file", one_arg("path", b)}}));
  json::value overflow;
  overflow["path"] = "/v1/chat/completions";
  overflow["status"] = 400;
  overflow["body"] = R"({"error":{"message":"This model's maximum context )"
                     R"(length is 4096 tokens","type":"invalid_request_error",)"
                     R"("code":"context_length_exceeded"}})";
  server.script(overflow.dump());
  script(chat_completion("SUMMARY: a.txt holds apple."));
  script(chat_completion("apple and banana"));
  std::string sid;
  auto res = run(call("read them", "overflow-old"), &sid);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "apple and banana");
  BOOST_CHECK(!res["failed"].as_bool());
  BOOST_CHECK_NE(sid, "overflow-old");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 5u);
  BOOST_CHECK(reqs[3].find("tools") == nullptr); // the summary
  BOOST_CHECK(contains(reqs[4]["messages"].dump(), "SUMMARY: a.txt"));
  check_pairing(reqs[4]["messages"]);
}

// The character estimate is low here; the provider's prompt count is
// over the threshold and triggers the compression.
BOOST_AUTO_TEST_CASE(reported_prompt_tokens_trigger_compression) {
  auto opts = base_options();
  opts.model.context_length = 40000; // threshold 34000 tokens
  opts.compression.protect_first_n = 1;
  opts.compression.protect_last_n = 2;
  start(opts);
  temp_dir work;
  auto a = work.path() + "/a.txt";
  { std::ofstream(a) << "apple\n"; }
  auto with_prompt_tokens = [](std::string body, int64_t n) {
    auto j = json::parse(body);
    BOOST_REQUIRE(j);
    (*j.v)["usage"]["prompt_tokens"] = n;
    return j.v->dump();
  };
  script(chat_completion("", {{"call_a", "read_file", one_arg("path", a)}}));
  script(with_prompt_tokens(
    chat_completion("", {{"call_b", "read_file", one_arg("path", a)}}),
    36000));
  script(chat_completion("SUMMARY: read a.txt once."));
  script(chat_completion("done reading"));
  std::string sid;
  auto res = run(call("read twice", "reported-old"), &sid);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "done reading");
  BOOST_CHECK_NE(sid, "reported-old");
  auto reqs = requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  BOOST_CHECK(reqs[2].find("tools") == nullptr);
  check_pairing(reqs[3]["messages"]);
}

// Tools keep the first session's id across the chain: the kernel keeps
// its state, and closing the session by its new id still ends it.
BOOST_AUTO_TEST_CASE(kernel_survives_compression_and_closes_with_the_chain) {
  auto opts = base_options();
  opts.model.context_length = 40000;
  opts.compression.protect_first_n = 1;
  opts.compression.protect_last_n = 2;
  start(opts);
  temp_dir work;
  auto a = work.path() + "/a.txt";
  {
    std::ofstream fa(a);
    for (int i = 0; i < 500; ++i)
      fa << std::string(149, 'k') << "\n";
  }
  auto with_prompt_tokens = [](std::string body, int64_t n) {
    auto j = json::parse(body);
    BOOST_REQUIRE(j);
    (*j.v)["usage"]["prompt_tokens"] = n;
    return j.v->dump();
  };
  json::value c1, c2;
  c1["code"] = "import os\nmarker = 41\nprint('PID', os.getpid())";
  c2["code"] = "print('MARK', marker + 1)";
  script(chat_completion("", {{"call_1", "execute_code", c1.dump()}}));
  script(chat_completion("", {{"call_a", "read_file", one_arg("path", a)}}));
  script(with_prompt_tokens(
    chat_completion("", {{"call_b", "read_file", one_arg("path", a)}}),
    36000));
  script(chat_completion("SUMMARY: kernel has marker."));
  script(chat_completion("", {{"call_2", "execute_code", c2.dump()}}));
  script(chat_completion("marker is 42"));
  std::string sid;
  auto res = run(call("use the kernel", "kernel-old"), &sid);
  BOOST_CHECK_NE(sid, "kernel-old");
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "marker is 42");
  // The second cell ran in the same kernel, after the compression.
  BOOST_CHECK(contains(res["messages"].dump(), "MARK 42"));
  BOOST_CHECK(contains(rt->kernel_stats(), "\"kernels\":1"));
  rt->close_session(sid);
  BOOST_CHECK(wait_for(
    [&] { return contains(rt->kernel_stats(), "\"kernels\":0"); }, 15));
}

BOOST_AUTO_TEST_CASE(small_sessions_are_not_compressed) {
  auto opts = base_options();
  opts.model.context_length = 40000;
  start(opts);
  script(chat_completion("short"));
  std::string sid;
  auto res = run(call("hi", "compress-small"), &sid);
  BOOST_CHECK_EQUAL(sid, "compress-small");
  BOOST_CHECK_EQUAL(requests().size(), 1u);
}

BOOST_AUTO_TEST_SUITE_END()
