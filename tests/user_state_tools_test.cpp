// Per-user state through the tools' code (docs/storage.md, "Per-user
// state"): the memory and the skills of two homes (two gateways' nodes)
// over one user_state_store, on every backend of the build
// (tests/support/store_backends.hpp): what one home writes, the other
// reads; concurrent memory changes lose nothing; a skill changed on both
// sides at once is reported, not silently lost; oversize input is refused
// with nothing written. On PostgreSQL, two store connections (two
// gateways) change one memory at once, and a database that goes away is a
// clear retryable error with nothing half-written.
#define BOOST_TEST_MODULE user_state_tools
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <ostream>
#include <thread>

#include "config/options.hpp"
#include "storage/user_state_store.hpp"
#include "tools/agent/memory_store.hpp"
#include "tools/agent/skill_sync.hpp"
#include "tools/file_io.hpp"
#include "tests/support/pg_server.hpp"
#include "tests/support/store_backends.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace mibyan {
inline std::ostream& operator<<(std::ostream& o, status_code c) {
  return o << to_string(c);
}
} // namespace mibyan

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string slurp(const std::string& path) {
  auto r = read_whole_file(path, size_t{16} << 20);
  return r ? *r : std::string{};
}

struct fixture : test::store_fixture {
  std::unique_ptr<user_state_store> us;
  options cfg;
  std::string home_a, home_b;

  void opened() override {
    open_with(base);
    auto r = open_user_state_store(*store);
    BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
    us = std::move(*r);
    home_a = tmp.path() + "/home-a";
    home_b = tmp.path() + "/home-b";
    fs::create_directories(home_a);
    fs::create_directories(home_b);
    cfg.memory.memory_char_limit = 100000;
    cfg.memory.user_char_limit = 100000;
  }

  json::value add(const std::string& home, const std::string& text,
                  user_state_store* shared) {
    return apply_memory_ops(home, cfg, "memory", {{"add", text, ""}}, shared);
  }

  void write(const std::string& home, const std::string& rel,
             const std::string& text) {
    auto w = atomic_write(home + "/skills/" + rel, text);
    BOOST_REQUIRE_MESSAGE(w.ok(), w.error);
  }
};

const std::string skill_md = "---\nname: pixel-care\ndescription: Caring "
                             "for PIXEL\n---\nFeed PIXEL at SEVEN.\n";

} // namespace

BOOST_AUTO_TEST_SUITE(user_state_tools)

MIBYAN_STORE_TEST_CASE(memory_written_through_one_home_is_read_by_another,
                       fixture) {
  auto r = add(home_a, "The user's cat is named PIXEL.", us.get());
  BOOST_REQUIRE_MESSAGE(r.get_bool("success", false), r.dump());
  // Not in home A's files: in the store.
  BOOST_TEST(!fs::exists(home_a + "/memories/MEMORY.md"));
  auto snap = memory_prompt_snapshot(home_b, cfg, us.get());
  BOOST_TEST(contains(snap, "The user's cat is named PIXEL."), snap);
  BOOST_TEST(memory_prompt_snapshot(home_b, cfg, nullptr).empty());
  // Replace through B, A sees it.
  auto rep = apply_memory_ops(home_b, cfg, "memory",
                              {{"replace", "The cat is PIXEL (a tabby).",
                                "PIXEL"}},
                              us.get());
  BOOST_REQUIRE_MESSAGE(rep.get_bool("success", false), rep.dump());
  auto snap_a = memory_prompt_snapshot(home_a, cfg, us.get());
  BOOST_TEST(contains(snap_a, "a tabby"), snap_a);
  BOOST_TEST(!contains(snap_a, "named PIXEL"), snap_a);
  // Over the limit: refused, nothing written.
  cfg.memory.memory_char_limit = 100;
  auto big = add(home_a, std::string(200, 'x'), us.get());
  BOOST_TEST(!big.get_bool("success", true), big.dump());
  BOOST_TEST(contains(big.dump(), "Consolidate"), big.dump());
  BOOST_TEST(!contains(memory_prompt_snapshot(home_b, cfg, us.get()), "xxxx"));
  // Removing the last entry deletes the document.
  cfg.memory.memory_char_limit = 100000;
  auto rm = apply_memory_ops(home_a, cfg, "memory", {{"remove", "", "tabby"}},
                             us.get());
  BOOST_REQUIRE_MESSAGE(rm.get_bool("success", false), rm.dump());
  BOOST_TEST(us->get(user_state_kind::memory, "MEMORY.md").code
             == status_code::not_found);
}

MIBYAN_STORE_TEST_CASE(concurrent_memory_adds_lose_nothing, fixture) {
  // Two "gateways" (two homes) add 20 entries each at once.
  std::vector<std::thread> ts;
  std::atomic<int> failed{0};
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        auto r = add(t == 0 ? home_a : home_b,
                     "entry " + std::to_string(t) + "-" + std::to_string(i),
                     us.get());
        if (!r.get_bool("success", false))
          ++failed;
      }
    });
  for (auto& th : ts)
    th.join();
  BOOST_TEST(failed == 0);
  auto doc = us->get(user_state_kind::memory, "MEMORY.md");
  BOOST_REQUIRE(doc.ok());
  auto entries = split_memory_entries(doc->bytes);
  BOOST_TEST(entries.size() == 40u);
}

MIBYAN_STORE_TEST_CASE(memory_files_are_imported_once, fixture) {
  fs::create_directories(home_a + "/memories");
  BOOST_REQUIRE(atomic_write(home_a + "/memories/USER.md",
                             "Prefers tea.\n§\nLives in Oslo.\n")
                  .ok());
  auto n = import_memory_files(home_a, *us);
  BOOST_REQUIRE_MESSAGE(n.ok(), n.error);
  BOOST_TEST(*n == 1u);
  // The store's copy wins from now on: a second import changes nothing.
  BOOST_REQUIRE(atomic_write(home_a + "/memories/USER.md", "Other.\n").ok());
  BOOST_TEST(*import_memory_files(home_a, *us) == 0u);
  auto snap = memory_prompt_snapshot(home_b, cfg, us.get());
  BOOST_TEST(contains(snap, "Lives in Oslo."), snap);
  BOOST_TEST(!contains(snap, "Other."), snap);
}

MIBYAN_STORE_TEST_CASE(skills_sync_between_homes_both_ways, fixture) {
  // A hand-made skill in home A is shared by A's first sync.
  write(home_a, "pets/pixel-care/SKILL.md", skill_md);
  write(home_a, "pets/pixel-care/references/food.md", "Tuna.\n");
  auto s = sync_skills(home_a, *us);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.error);
  BOOST_TEST(s->empty());
  BOOST_TEST(us->list(user_state_kind::skill, false)->size() == 2u);
  // B gets it.
  BOOST_REQUIRE(sync_skills(home_b, *us).ok());
  BOOST_TEST(slurp(home_b + "/skills/pets/pixel-care/SKILL.md") == skill_md);
  BOOST_TEST(slurp(home_b + "/skills/pets/pixel-care/references/food.md")
             == "Tuna.\n");
  // B edits one file and removes another; A gets both changes.
  write(home_b, "pets/pixel-care/SKILL.md", skill_md + "Brush on Sunday.\n");
  fs::remove(home_b + "/skills/pets/pixel-care/references/food.md");
  BOOST_REQUIRE(sync_skills(home_b, *us).ok());
  BOOST_REQUIRE(sync_skills(home_a, *us).ok());
  BOOST_TEST(contains(slurp(home_a + "/skills/pets/pixel-care/SKILL.md"),
                      "Brush on Sunday."));
  BOOST_TEST(!fs::exists(home_a + "/skills/pets/pixel-care/references"));
  // Both change the same file before syncing: the first sync wins, the
  // second is told its change was replaced (never silently lost).
  write(home_a, "pets/pixel-care/SKILL.md", skill_md + "A's line.\n");
  write(home_b, "pets/pixel-care/SKILL.md", skill_md + "B's line.\n");
  auto first = sync_skills(home_a, *us);
  BOOST_REQUIRE(first.ok());
  BOOST_TEST(first->empty());
  auto second = sync_skills(home_b, *us);
  BOOST_REQUIRE_MESSAGE(second.ok(), second.error);
  BOOST_REQUIRE(second->size() == 1u);
  BOOST_TEST((*second)[0] == "pets/pixel-care/SKILL.md");
  BOOST_TEST(contains(slurp(home_b + "/skills/pets/pixel-care/SKILL.md"),
                      "A's line."));
  // An oversize local file is not shared (and does not stop the rest).
  write(home_a, "pets/pixel-care/assets/huge.bin",
        std::string(user_state_store::max_doc_bytes + 1, 'z'));
  write(home_a, "pets/pixel-care/assets/small.txt", "small");
  BOOST_REQUIRE(sync_skills(home_a, *us).ok());
  BOOST_TEST(us->get(user_state_kind::skill, "pets/pixel-care/assets/huge.bin")
               .code
             == status_code::not_found);
  BOOST_TEST(us->get(user_state_kind::skill, "pets/pixel-care/assets/small.txt")
               .ok());
  // A document whose name would leave the root is never written there.
  user_doc_write evil;
  evil.name = "../escaped.md";
  evil.bytes = "x";
  BOOST_REQUIRE(us->write(user_state_kind::skill, {evil}).ok());
  BOOST_REQUIRE(sync_skills(home_b, *us).ok());
  BOOST_TEST(!fs::exists(home_b + "/escaped.md"));
}

BOOST_AUTO_TEST_SUITE_END()

// Two gateways: two stores (two connection pools) on one PostgreSQL
// database add to one memory at once; nothing is lost.
BOOST_AUTO_TEST_CASE(two_postgres_connections_add_memory_without_loss) {
  test::temp_dir tmp;
  session_store_options o;
  if (!test::backend_options_or_skip("postgres", tmp.path(), o))
    return;
  auto s1 = open_session_store(o);
  auto s2 = open_session_store(o);
  BOOST_REQUIRE(s1.ok() && s2.ok());
  auto u1 = open_user_state_store(**s1);
  auto u2 = open_user_state_store(**s2);
  BOOST_REQUIRE(u1.ok() && u2.ok());
  options cfg;
  cfg.memory.memory_char_limit = 100000;
  std::atomic<int> failed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      auto* us = t == 0 ? u1->get() : u2->get();
      for (int i = 0; i < 25; ++i) {
        auto r = apply_memory_ops(tmp.path(), cfg, "memory",
                                  {{"add",
                                    "gw" + std::to_string(t) + " note "
                                      + std::to_string(i),
                                    ""}},
                                  us);
        if (!r.get_bool("success", false))
          ++failed;
      }
    });
  for (auto& th : ts)
    th.join();
  BOOST_TEST(failed == 0);
  auto doc = (*u1)->get(user_state_kind::memory, "MEMORY.md");
  BOOST_REQUIRE(doc.ok());
  BOOST_TEST(split_memory_entries(doc->bytes).size() == 50u);
}

// The database goes away: the memory tool and a skills sync say so (the
// tool: nothing was changed, retry later), nothing is half-written, and
// both work again once it is back.
BOOST_AUTO_TEST_CASE(postgres_going_away_is_a_clear_retryable_error) {
  test::temp_dir tmp;
  session_store_options probe;
  if (!test::backend_options_or_skip("postgres", tmp.path(), probe))
    return;
  // A server of this case's own, to stop.
  auto& pg = test::shared_pg_server();
  session_store_options o;
  o.backend = "postgres";
  o.postgres_url = pg.url(pg.fresh_database("down"));
  o.auto_migrate = true;
  auto store = open_session_store(o);
  BOOST_REQUIRE_MESSAGE(store.ok(), store.error);
  auto us = open_user_state_store(**store);
  BOOST_REQUIRE(us.ok());
  options cfg;
  auto add = [&](const std::string& text) {
    return apply_memory_ops(tmp.path(), cfg, "memory", {{"add", text, ""}},
                            us->get());
  };
  BOOST_REQUIRE(add("before the outage").get_bool("success", false));
  auto home = tmp.path() + "/home";
  auto w = atomic_write(home + "/skills/s/SKILL.md", skill_md);
  BOOST_REQUIRE(w.ok());
  pg.stop();
  auto down = add("during the outage");
  BOOST_TEST(down.find("error") != nullptr, down.dump());
  BOOST_TEST(contains(down.dump(), "nothing was changed"), down.dump());
  BOOST_TEST(contains(down.dump(), "retry later"), down.dump());
  auto sync = sync_skills(home, **us);
  BOOST_TEST(sync.code == status_code::unavailable, sync.error);
  std::string why2;
  BOOST_REQUIRE_MESSAGE(pg.restart(why2), why2);
  auto snap = memory_prompt_snapshot(tmp.path(), cfg, us->get());
  BOOST_TEST(contains(snap, "before the outage"), snap);
  BOOST_TEST(!contains(snap, "during the outage"), snap);
  BOOST_TEST(add("after the outage").get_bool("success", false));
  BOOST_TEST(sync_skills(home, **us).ok());
  BOOST_TEST((*us)->get(user_state_kind::skill, "s/SKILL.md").ok());
}
