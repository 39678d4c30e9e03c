// The session store (storage/session_store.hpp) on every backend of the
// build (tests/support/store_backends.hpp): sessions, ids, parents and
// children, listings, messages and their fields, keyed and batched
// appends, refusals with reasons, reopening, deletion, read-only opens and
// reads during writes. LMDB's environment, format and map: lmdb_store_test.
#define BOOST_TEST_MODULE session_store
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <regex>
#include <thread>

#include <sys/stat.h>

#include "storage/byte_codec.hpp"
#include "storage/lmdb/lmdb_inspect.hpp"
#include "storage/session_store.hpp"
#include "tests/support/session_store_cases.hpp"
#include "tests/support/store_backends.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using test::msg;
using test::assistant_call;
using test::tool_result;
using fixture = test::session_store_case;

BOOST_AUTO_TEST_SUITE(session_store_suite)

// -- sessions -----------------------------------------------------------------

MIBYAN_STORE_TEST_CASE(creates_a_session_with_a_generated_id, fixture) {
  new_session ns;
  ns.source = "api";
  ns.model = "m1";
  ns.provider = "openrouter";
  ns.cwd = "/work";
  ns.title = "first";
  auto r = store->create_session(ns);
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_TEST(std::regex_match(r->id,
                              std::regex{"[0-9]{8}_[0-9]{6}_[0-9a-f]{6}"}));
  auto got = store->get_session(r->id);
  BOOST_REQUIRE(got.ok());
  BOOST_TEST(got->source == "api");
  BOOST_TEST(got->model == "m1");
  BOOST_TEST(got->provider == "openrouter");
  BOOST_TEST(got->cwd == "/work");
  BOOST_TEST(got->title == "first");
  BOOST_TEST(got->started_at_ms == clock);
  BOOST_TEST(got->ended_at_ms == 0);
  BOOST_TEST(got->message_count == 0);
}

MIBYAN_STORE_TEST_CASE(supplied_ids_are_kept_and_duplicates_refused, fixture) {
  make("s-1");
  new_session ns;
  ns.id = "s-1";
  auto r = store->create_session(ns);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "already exists"), r.error);
}

MIBYAN_STORE_TEST_CASE(malformed_ids_are_refused, fixture) {
  for (std::string bad : {std::string{"a/b"}, std::string{"with space"},
                          std::string(200, 'x'), std::string{"nul\0x", 5},
                          std::string{"caf\xc3\xa9"}}) {
    new_session ns;
    ns.id = bad;
    auto r = store->create_session(ns);
    BOOST_TEST(!r.ok());
    BOOST_TEST(contains(r.error, "session id"), r.error);
  }
  auto g = store->get_session("");
  BOOST_TEST(!g.ok());
  BOOST_TEST(contains(g.error, "session id is empty"), g.error);
}

MIBYAN_STORE_TEST_CASE(parent_must_exist_and_differ, fixture) {
  make("root");
  new_session child;
  child.id = "child";
  child.parent_session_id = "root";
  BOOST_TEST(store->create_session(child).ok());
  new_session orphan;
  orphan.id = "orphan";
  orphan.parent_session_id = "nope";
  auto r = store->create_session(orphan);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "parent session 'nope' does not exist"),
             r.error);
  new_session self;
  self.id = "self";
  self.parent_session_id = "self";
  r = store->create_session(self);
  BOOST_TEST(contains(r.error, "own parent"), r.error);
}

MIBYAN_STORE_TEST_CASE(children_are_listed_by_parent, fixture) {
  make("root");
  make("root2"); // an id that extends the parent's: not a child
  for (auto id : {"b-child", "a-child"}) {
    new_session c;
    c.id = id;
    c.parent_session_id = "root";
    BOOST_REQUIRE(store->create_session(c).ok());
  }
  auto kids = store->list_children("root");
  BOOST_REQUIRE(kids.ok());
  BOOST_TEST((*kids == std::vector<std::string>{"a-child", "b-child"}));
  BOOST_TEST(store->list_children("root2")->empty());
  BOOST_TEST(store->list_children("no-such")->empty());
  BOOST_REQUIRE(store->delete_session("a-child").ok());
  BOOST_TEST((*store->list_children("root")
              == std::vector<std::string>{"b-child"}));
  BOOST_TEST(!store->list_children("../x").ok());
}

MIBYAN_STORE_TEST_CASE(invalid_text_fields_are_refused, fixture) {
  new_session ns;
  ns.title = "bad \xff title";
  auto r = store->create_session(ns);
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "title is not valid UTF-8 (byte 4)"), r.error);
  ns.title = std::string(5000, 't');
  r = store->create_session(ns);
  BOOST_TEST(contains(r.error, "title is 5000 bytes"), r.error);
}

MIBYAN_STORE_TEST_CASE(unknown_session_gives_clear_errors, fixture) {
  auto g = store->get_session("ghost");
  BOOST_TEST(contains(g.error, "session 'ghost' does not exist"), g.error);
  auto l = store->load_messages("ghost");
  BOOST_TEST(contains(l.error, "session 'ghost' does not exist"), l.error);
  BOOST_TEST(contains(append_error("ghost", msg("user", "hi")),
                      "append_message: session 'ghost' does not exist"));
  BOOST_TEST(contains(store->set_title("ghost", "t").error, "does not exist"));
  BOOST_TEST(contains(store->end_session("ghost", "x").error,
                      "does not exist"));
  BOOST_TEST(contains(store->add_usage("ghost", {}).error, "does not exist"));
  BOOST_TEST(contains(store->delete_session("ghost").error,
                      "delete_session: session 'ghost' does not exist"));
}

MIBYAN_STORE_TEST_CASE(failures_carry_a_code_callers_can_branch_on, fixture) {
  BOOST_TEST(std::string{to_string(store->get_session("ghost").code)} == "not_found");
  BOOST_TEST(std::string{to_string(store->load_messages("ghost").code)} == "not_found");
  BOOST_TEST(std::string{to_string(store->delete_session("ghost").code)} == "not_found");
  BOOST_TEST(std::string{to_string(store->set_title("ghost", "t").code)} == "not_found");
  BOOST_TEST(std::string{to_string(store->get_session("").code)} == "invalid_argument");
  BOOST_TEST(std::string{to_string(store->get_session("a/b").code)} == "invalid_argument");
  new_session orphan;
  orphan.parent_session_id = "no-such-parent";
  BOOST_TEST(std::string{to_string(store->create_session(orphan).code)} == "not_found");
  BOOST_TEST(std::string{to_string(store->create_session(new_session{}).code)} == "ok");
}

MIBYAN_STORE_TEST_CASE(lists_newest_first_with_limit_and_offset, fixture) {
  make("a", 1000);
  make("c", 3000);
  make("b", 2000);
  make("d", 3000);
  auto all = store->list_sessions(10, 0);
  BOOST_REQUIRE(all.ok());
  std::vector<std::string> ids;
  for (auto& s : *all)
    ids.push_back(s.id);
  BOOST_TEST((ids == std::vector<std::string>{"d", "c", "b", "a"}));
  auto page = store->list_sessions(2, 1);
  BOOST_REQUIRE(page.ok());
  BOOST_REQUIRE(page->size() == 2u);
  BOOST_TEST((*page)[0].id == "c");
  BOOST_TEST((*page)[1].id == "b");
  BOOST_TEST(store->list_sessions(5, 10)->empty());
}

MIBYAN_STORE_TEST_CASE(title_end_and_usage_update_the_row, fixture) {
  make("s");
  BOOST_TEST(store->set_title("s", "renamed").ok());
  token_usage u;
  u.input_tokens = 100;
  u.output_tokens = 20;
  u.cache_read_tokens = 5;
  u.cache_write_tokens = 7;
  u.reasoning_tokens = 3;
  BOOST_TEST(store->add_usage("s", u).ok());
  BOOST_TEST(store->add_usage("s", u, 2).ok());
  BOOST_TEST(store->end_session("s", "compression", 5555).ok());
  BOOST_TEST(store->end_session("s", "user_exit", 9999).ok());
  auto s = store->get_session("s");
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(s->title == "renamed");
  BOOST_TEST(s->api_call_count == 3);
  BOOST_TEST(s->tokens.input_tokens == 200);
  BOOST_TEST(s->tokens.output_tokens == 40);
  BOOST_TEST(s->tokens.cache_read_tokens == 10);
  BOOST_TEST(s->tokens.cache_write_tokens == 14);
  BOOST_TEST(s->tokens.reasoning_tokens == 6);
  BOOST_TEST(s->ended_at_ms == 5555);
  BOOST_TEST(s->end_reason == "compression");
  token_usage neg;
  neg.output_tokens = -1;
  BOOST_TEST(contains(store->add_usage("s", neg).error, "negative"));
}

// -- messages -----------------------------------------------------------------

MIBYAN_STORE_TEST_CASE(messages_round_trip_in_order_with_all_fields, fixture) {
  make("s");
  make("other");
  auto a = append("s", msg("system", "you are helpful"));
  auto b = append("s", msg("user", "list the files"));
  auto o = append("other", msg("user", "elsewhere"));
  auto c = append("s", assistant_call("", "terminal", R"({"command":"ls"})"));
  auto t = tool_result("call_terminal", "terminal", "a.txt\nb.txt");
  t.timestamp_ms = 42;
  auto d = append("s", t);
  BOOST_TEST(a < b);
  BOOST_TEST(b < o);
  BOOST_TEST(o < c);
  BOOST_TEST(c < d);
  auto r = store->load_messages("s");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  BOOST_REQUIRE(r->size() == 4u);
  std::vector<uint64_t> ids;
  for (auto& m : *r)
    ids.push_back(m.id);
  BOOST_TEST((ids == std::vector<uint64_t>{a, b, c, d}));
  auto& call = (*r)[2].message;
  BOOST_TEST(call.role == "assistant");
  BOOST_REQUIRE(call.tool_calls.size() == 1u);
  BOOST_TEST(call.tool_calls[0].id == "call_terminal");
  BOOST_TEST(call.tool_calls[0].name == "terminal");
  BOOST_TEST(call.tool_calls[0].arguments == R"({"command":"ls"})");
  BOOST_TEST(call.reasoning == "thinking about terminal");
  BOOST_TEST(call.finish_reason == "tool_calls");
  BOOST_TEST(call.timestamp_ms == clock);
  auto& res = (*r)[3].message;
  BOOST_TEST(res.tool_call_id == "call_terminal");
  BOOST_TEST(res.tool_name == "terminal");
  BOOST_TEST(res.content == "a.txt\nb.txt");
  BOOST_TEST(res.timestamp_ms == 42);
  BOOST_TEST((*r)[0].session_id == "s");
}

MIBYAN_STORE_TEST_CASE(counters_follow_appends, fixture) {
  make("s");
  append("s", msg("user", "hi"));
  auto two = assistant_call("", "a", "{}");
  two.tool_calls.push_back(tool_call{"call_b", "b", "{}"});
  append("s", two);
  append("s", tool_result("call_a", "a", "ok"));
  auto s = store->get_session("s");
  BOOST_TEST(s->message_count == 3);
  BOOST_TEST(s->tool_call_count == 2);
  BOOST_TEST(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(keyed_appends_are_idempotent, fixture) {
  make("s");
  make("t");
  auto first = store->append_message("s", msg("user", "hello"), "turn-1");
  BOOST_REQUIRE(first.ok());
  BOOST_TEST(!first->duplicate);
  auto again = store->append_message("s", msg("user", "hello"), "turn-1");
  BOOST_REQUIRE(again.ok());
  BOOST_TEST(again->duplicate);
  BOOST_TEST(again->id == first->id);
  auto other = store->append_message("t", msg("user", "hello"), "turn-1");
  BOOST_TEST(!other->duplicate);
  auto synthetic = store->append_message("s", msg("user", "scaffold"),
                                         "_retry_hint");
  BOOST_REQUIRE(synthetic.ok());
  BOOST_TEST(synthetic->skipped);
  BOOST_TEST(synthetic->id == 0u);
  BOOST_TEST(store->load_messages("s")->size() == 1u);
  BOOST_TEST(store->get_session("s")->message_count == 1);
  // Duplicates inside one batch collapse too.
  auto batch = store->append_batch({{"s", msg("user", "x"), "k2"},
                                    {"s", msg("user", "x"), "k2"}});
  BOOST_REQUIRE(batch.ok());
  BOOST_TEST((*batch)[1].duplicate);
  BOOST_TEST((*batch)[1].id == (*batch)[0].id);
  BOOST_TEST(store->get_session("s")->message_count == 2);
  reopen();
  auto after = store->append_message("s", msg("user", "hello"), "turn-1");
  BOOST_TEST(after->duplicate);
  BOOST_TEST(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(a_batch_is_all_or_nothing, fixture) {
  make("s");
  auto r = store->append_batch({{"s", msg("user", "one"), ""},
                                {"missing", msg("user", "two"), ""}});
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "session 'missing' does not exist"), r.error);
  BOOST_TEST(store->load_messages("s")->empty());
  BOOST_TEST(store->get_session("s")->message_count == 0);
  auto bad = store->append_batch({{"s", msg("user", "one"), ""},
                                  {"s", msg("robot", "two"), ""}});
  BOOST_TEST(contains(bad.error, "message 1: message role 'robot'"),
             bad.error);
}

MIBYAN_STORE_TEST_CASE(bad_messages_are_refused_with_reasons, fixture) {
  make("s");
  BOOST_TEST(contains(append_error("s", msg("", "x")), "role is empty"));
  BOOST_TEST(contains(append_error("s", msg("robot", "x")),
                      "'robot' is not one of system, user, assistant, "
                      "tool"));
  BOOST_TEST(contains(append_error("s", msg("tool", "x")),
                      "needs the tool_call_id"));
  auto user_call = msg("user", "x");
  user_call.tool_calls.push_back(tool_call{"c", "n", "{}"});
  BOOST_TEST(contains(append_error("s", user_call),
                      "only assistant messages carry tool_calls"));
  auto nameless = assistant_call("", "", "{}");
  BOOST_TEST(contains(append_error("s", nameless), "needs an id and a "
                                                   "function name"));
  BOOST_TEST(contains(append_error("s", msg("user", "ok \xc3\x28 no")),
                      "content is not valid UTF-8 (byte 3)"));
  BOOST_TEST(contains(append_error("s", msg("user", "\xed\xa0\x80")),
                      "not valid UTF-8"));  // a UTF-16 surrogate
  BOOST_TEST(contains(append_error("s", msg("user", "\xc0\xaf")),
                      "not valid UTF-8"));  // overlong '/'
  auto bad_args = assistant_call("", "t", "{\"a\":\"\xfe\"}");
  BOOST_TEST(contains(append_error("s", bad_args),
                      "tool_calls[0].arguments is not valid UTF-8"));
  std::string huge(17u << 20, 'x');
  BOOST_TEST(contains(append_error("s", msg("user", huge)),
                      "the limit is 16777216"));
  auto long_key = store->append_message("s", msg("user", "x"),
                                        std::string(300, 'k'));
  BOOST_TEST(contains(long_key.error, "idempotency key is longer"));
  BOOST_TEST(contains(append_error("", msg("user", "x")),
                      "session id is empty"));
  BOOST_TEST(store->get_session("s")->message_count == 0);
  BOOST_TEST(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(empty_and_large_contents_are_kept_exactly, fixture) {
  make("s");
  append("s", assistant_call("", "terminal", "{}"));
  append("s", msg("user", ""));
  std::string big;
  for (int i = 0; big.size() < (3u << 20); ++i)
    big += "word" + std::to_string(i) + " \xe2\x82\xac ";
  append("s", msg("user", big));
  auto r = store->load_messages("s");
  BOOST_REQUIRE(r.ok());
  BOOST_REQUIRE(r->size() == 3u);
  BOOST_TEST((*r)[1].message.content.empty());
  BOOST_TEST((*r)[2].message.content == big);
  BOOST_TEST(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(everything_survives_close_and_reopen, fixture) {
  make("s");
  auto a = append("s", msg("user", "remember the lighthouse"));
  append("s", assistant_call("sure", "memory", R"({"x":1})"));
  BOOST_TEST(store->set_title("s", "lights").ok());
  store.reset();
  reopen();
  auto s = store->get_session("s");
  BOOST_REQUIRE(s.ok());
  BOOST_TEST(s->title == "lights");
  BOOST_TEST(s->message_count == 2);
  BOOST_TEST(s->tool_call_count == 1);
  auto msgs = store->load_messages("s");
  BOOST_REQUIRE(msgs->size() == 2u);
  BOOST_TEST((*msgs)[0].message.content == "remember the lighthouse");
  auto next = append("s", msg("user", "again"));
  BOOST_TEST(next > a + 1);  // ids are never reused
  search_request q;
  q.query = "lighthouse";
  auto hits = store->search(q);
  BOOST_REQUIRE(hits.ok());
  BOOST_TEST(hits->total == 1u);
  BOOST_TEST(store->verify(true).ok());
}

MIBYAN_STORE_TEST_CASE(delete_removes_messages_keys_and_postings, fixture) {
  make("keep");
  make("drop");
  append("keep", msg("user", "shared zebra keep"));
  append("drop", msg("user", "shared zebra drop"), "k1");
  append("drop", assistant_call("unique giraffe", "t", "{}"));
  auto last = append("drop", tool_result("call_t", "t", "giraffe"));
  BOOST_TEST(store->delete_session("drop").ok());
  BOOST_TEST(!store->get_session("drop").ok());
  BOOST_TEST(!store->load_messages("drop").ok());
  search_request q;
  q.query = "giraffe";
  BOOST_TEST(store->search(q)->total == 0u);
  q.query = "zebra";
  BOOST_TEST(store->search(q)->total == 1u);
  BOOST_TEST(store->list_sessions(10, 0)->size() == 1u);
  BOOST_TEST(*store->message_count() == 1u);
  BOOST_TEST_MESSAGE(store->verify(true).error);
  BOOST_TEST(store->verify(true).ok());
  // The id and the key are free again, but ids keep increasing.
  make("drop");
  auto r = store->append_message("drop", msg("user", "x"), "k1");
  BOOST_TEST(!r->duplicate);
  BOOST_TEST(r->id > last);
}

// -- environment --------------------------------------------------------------

MIBYAN_STORE_TEST_CASE(read_only_reads_but_never_writes, fixture) {
  make("s");
  append("s", msg("user", "hello"));
  reopen(true);
  BOOST_TEST(store->load_messages("s")->size() == 1u);
  auto w = store->append_message("s", msg("user", "x"));
  BOOST_TEST(contains(w.error, "opened read-only"), w.error);
  BOOST_TEST(contains(store->create_session({}).error, "read-only"));
  BOOST_TEST(contains(store->delete_session("s").error, "read-only"));
}

MIBYAN_STORE_TEST_CASE(reads_run_on_other_threads_during_writes, fixture) {
  make("s");
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::atomic<int> failures{0};
  std::thread reader([&] {
    while (!stop) {
      auto l = store->load_messages("s");
      search_request q;
      q.query = "concurrent";
      auto h = store->search(q);
      if (!l.ok() || !h.ok() || h->total > 100)
        ++failures;
      ++reads;
    }
  });
  for (int i = 0; i < 100; ++i)
    append("s", msg("user", "concurrent message " + std::to_string(i)));
  while (reads < 10)
    std::this_thread::yield();
  stop = true;
  reader.join();
  BOOST_TEST(failures == 0);
  BOOST_TEST(store->load_messages("s")->size() == 100u);
}

BOOST_AUTO_TEST_SUITE_END()
