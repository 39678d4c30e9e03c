#define BOOST_TEST_MODULE file_checkpoint_store
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include <sys/stat.h>
#include <unistd.h>

#include "storage/file_checkpoint_store.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scratch_mounts.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

// Every entry under `dir` (links not followed): path -> kind, mode and
// bytes (a link's target).
std::map<std::string, std::string> snapshot_of(const std::string& dir) {
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    auto rel = fs::relative(it->path(), dir).string();
    struct stat st;
    if (::lstat(it->path().c_str(), &st) != 0)
      continue;
    std::string v = std::to_string(st.st_mode) + ":";
    if (S_ISLNK(st.st_mode))
      v += fs::read_symlink(it->path()).string();
    else if (S_ISREG(st.st_mode))
      v += test::slurp(it->path().string());
    out[rel] = v;
  }
  return out;
}

struct fixture {
  test::temp_dir home;
  test::temp_dir proj;
  std::string project;
  std::unique_ptr<file_checkpoint_store> store;

  fixture() {
    project = fs::canonical(proj.path()).string();
    open();
  }

  void open(file_checkpoint_limits lim = {}) {
    store.reset();
    auto s = file_checkpoint_store::open(home / "checkpoints", lim);
    BOOST_REQUIRE_MESSAGE(s, s.error);
    store = std::move(*s);
  }

  file_checkpoint snap(std::vector<std::string> agent = {}) {
    snapshot_request r;
    r.project = project;
    r.session_id = "s1";
    r.turn = 1;
    r.tool = "patch";
    r.agent_files = std::move(agent);
    auto out = store->snapshot(r);
    BOOST_REQUIRE_MESSAGE(out, out.error);
    return out->checkpoint;
  }
};

bool has(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(store, fixture)

BOOST_AUTO_TEST_CASE(restore_keeps_the_users_edits_unless_all) {
  proj.write("a.txt", "agent original\n");
  proj.write("b.txt", "user original\n");
  proj.write("src/c.txt", "c\n");
  auto c = snap();
  BOOST_TEST(c.number == 1);
  BOOST_TEST(c.files == 3);
  // The agent edits a.txt and creates d.txt; the user edits b.txt.
  proj.write("a.txt", "agent changed\n");
  proj.write("src/d.txt", "new by agent\n");
  BOOST_REQUIRE(store->add_agent_files(project, 1, {"a.txt", "src/d.txt"}));
  proj.write("b.txt", "user changed\n");
  auto d = store->diff(project, 1);
  BOOST_REQUIRE_MESSAGE(d, d.error);
  BOOST_TEST(d->find("-agent original") != std::string::npos);
  BOOST_TEST(d->find("+agent changed") != std::string::npos);
  BOOST_TEST(d->find("+user changed") != std::string::npos);
  BOOST_TEST(d->find("+new by agent") != std::string::npos);
  restore_options ro;
  auto r = store->restore(project, 1, ro);
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(proj.read("a.txt") == "agent original\n");
  BOOST_TEST(!fs::exists(proj / "src/d.txt"));
  BOOST_TEST(proj.read("b.txt") == "user changed\n");
  BOOST_TEST(has(r->restored, "a.txt"));
  BOOST_TEST(has(r->deleted, "src/d.txt"));
  BOOST_TEST(has(r->kept, "b.txt"));
  BOOST_TEST(r->failed.empty());
  BOOST_TEST(r->safety_number == 2);
  auto l = store->list(project);
  BOOST_REQUIRE(l);
  BOOST_TEST(l->at(0).rolled_back);
  // --all brings b.txt back too; the safety checkpoint undoes it again.
  ro.all = true;
  r = store->restore(project, 1, ro);
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(proj.read("b.txt") == "user original\n");
  ro.all = true;
  r = store->restore(project, 2, ro);
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(proj.read("b.txt") == "user changed\n");
  // --file restores one path only.
  proj.write("a.txt", "x\n");
  proj.write("src/c.txt", "y\n");
  restore_options one;
  one.file = project + "/src/c.txt";
  r = store->restore(project, 1, one);
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(proj.read("src/c.txt") == "c\n");
  BOOST_TEST(proj.read("a.txt") == "x\n");
  one.file = "/etc/passwd";
  BOOST_TEST(!store->restore(project, 1, one));
  // An unknown checkpoint is an error, not a crash.
  auto bad = store->restore(project, 99, ro);
  BOOST_TEST(!bad);
  BOOST_TEST(static_cast<int>(bad.code)
             == static_cast<int>(status_code::not_found));
  BOOST_TEST(!store->diff(project, 99));
}

BOOST_AUTO_TEST_CASE(gitignore_size_limit_and_the_users_git_untouched) {
  // A real repository with uncommitted changes.
  auto git = [&](std::vector<std::string> a) {
    a.insert(a.begin(), {"git", "-C", project});
    test::process_options o;
    o.env["GIT_AUTHOR_NAME"] = o.env["GIT_COMMITTER_NAME"] = "t";
    o.env["GIT_AUTHOR_EMAIL"] = o.env["GIT_COMMITTER_EMAIL"] = "t@t";
    auto r = test::run_process(a, o);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  };
  proj.write(".gitignore", "build/\n*.log\n");
  proj.write("main.c", "int main() {}\n");
  git({"init", "-q"});
  git({"add", "."});
  git({"commit", "-qm", "one"});
  proj.write("main.c", "int main() { return 1; }\n"); // uncommitted
  proj.write("build/out.o", "object");
  proj.write("x.log", "log");
  proj.write("sub/big.bin", std::string(2 << 20, 'b'));
  auto before = snapshot_of(proj / ".git");
  BOOST_REQUIRE(!before.empty());
  file_checkpoint_limits lim;
  lim.max_file_bytes = 1 << 20;
  open(lim);
  auto project_of = file_checkpoint_store::project_of(project + "/sub/x.c",
                                                      "/nonexistent");
  BOOST_TEST(project_of == project);
  snapshot_request req;
  req.project = project;
  req.tool = "write_file";
  auto s = store->snapshot(req);
  BOOST_REQUIRE_MESSAGE(s, s.error);
  BOOST_TEST(s->checkpoint.files == 2); // .gitignore, main.c
  BOOST_TEST(has(s->checkpoint.skipped, "sub/big.bin"));
  BOOST_TEST(!s->warnings.empty());
  proj.write("main.c", "agent\n");
  proj.write("sub/big.bin", "shrunk");
  BOOST_REQUIRE(store->add_agent_files(project, 1, {"main.c"}));
  restore_options all;
  all.all = true;
  auto r = store->restore(project, 1, all);
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(proj.read("main.c") == "int main() { return 1; }\n");
  // Ignored and left-out files are never deleted.
  BOOST_TEST(proj.read("build/out.o") == "object");
  BOOST_TEST(proj.read("x.log") == "log");
  BOOST_TEST(proj.read("sub/big.bin") == "shrunk");
  BOOST_TEST(has(r->kept, "sub/big.bin"));
  auto after = snapshot_of(proj / ".git");
  BOOST_TEST((before == after), "the project's .git changed");
}

BOOST_AUTO_TEST_CASE(symlinks_are_kept_as_links_and_never_followed) {
  test::temp_dir outside;
  outside.write("secret.txt", "outside\n");
  proj.write("a.txt", "a\n");
  fs::create_directory_symlink(outside.path(), proj / "out");
  fs::create_symlink("a.txt", proj / "link-to-a");
  auto c = snap();
  BOOST_TEST(c.files == 3); // a.txt, out (a link), link-to-a
  // The agent replaces the link to the outside by a directory with a file
  // and changes the link; a restore puts the links back and never writes
  // outside.
  fs::remove(proj / "out");
  proj.write("out/secret.txt", "inside now\n");
  fs::remove(proj / "link-to-a");
  proj.write("link-to-a", "a file now\n");
  BOOST_REQUIRE(store->add_agent_files(project, 1, {"out/", "link-to-a"}));
  auto r = store->restore(project, 1, {});
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(fs::is_symlink(proj / "link-to-a"));
  BOOST_TEST(fs::read_symlink(proj / "link-to-a").string() == "a.txt");
  BOOST_TEST(outside.read("secret.txt") == "outside\n");
  // Writing under a link out of the project is refused.
  fs::remove_all(proj / "out");
  fs::create_directory_symlink(outside.path(), proj / "out");
  proj.write("zz.txt", "z");
  auto c2 = snap();
  (void)c2;
  // A checkpoint naming out/secret.txt as a file cannot be written through
  // the link.
  test::temp_dir proj2;
  auto p2 = fs::canonical(proj2.path()).string();
  proj2.write("out/secret.txt", "was a file\n");
  snapshot_request req;
  req.project = p2;
  req.tool = "patch";
  auto s2 = store->snapshot(req);
  BOOST_REQUIRE(s2);
  fs::remove_all(proj2 / "out");
  fs::create_directory_symlink(outside.path(), proj2 / "out");
  BOOST_REQUIRE(store->add_agent_files(p2, 1, {"out/secret.txt"}));
  auto r2 = store->restore(p2, 1, {});
  BOOST_REQUIRE_MESSAGE(r2, r2.error);
  BOOST_TEST(r2->failed.size() == 1);
  BOOST_TEST(r2->failed.at(0).find("symlink") != std::string::npos,
             r2->failed.at(0));
  BOOST_TEST(outside.read("secret.txt") == "outside\n");
}

BOOST_AUTO_TEST_CASE(pruning_by_count_and_age_removes_objects) {
  file_checkpoint_limits lim;
  lim.keep = 3;
  open(lim);
  for (int i = 0; i < 5; ++i) {
    proj.write("f.txt", "version " + std::to_string(i) + "\n");
    snap();
  }
  auto l = store->list(project);
  BOOST_REQUIRE(l);
  BOOST_REQUIRE_EQUAL(l->size(), 3u);
  BOOST_TEST(l->front().number == 3);
  BOOST_TEST(l->back().number == 5);
  // The pruned versions' blobs are gone; the kept ones restore.
  auto r = store->restore(project, 3, restore_options{true, {}, false, {}});
  BOOST_REQUIRE_MESSAGE(r, r.error);
  BOOST_TEST(proj.read("f.txt") == "version 2\n");
  size_t loose = 0;
  for (auto& e : fs::recursive_directory_iterator(home / "checkpoints/store.git/objects"))
    loose += e.is_regular_file() ? 1 : 0;
  // 3 checkpoints: 3 blobs + 3 trees + 3 commits.
  BOOST_TEST(loose == 9u);
  // Age: everything but the newest goes.
  lim.max_age_ms = 1;
  open(lim);
  ::usleep(5000);
  auto n = store->prune();
  BOOST_REQUIRE_MESSAGE(n, n.error);
  BOOST_TEST(*n == 2u);
  l = store->list(project);
  BOOST_REQUIRE(l);
  BOOST_TEST(l->size() == 1u);
}

BOOST_AUTO_TEST_CASE(too_many_files_and_bad_projects_are_refused) {
  file_checkpoint_limits lim;
  lim.max_files = 5;
  open(lim);
  for (int i = 0; i < 10; ++i)
    proj.write("f" + std::to_string(i), "x");
  snapshot_request r;
  r.project = project;
  auto s = store->snapshot(r);
  BOOST_TEST(!s);
  BOOST_TEST(static_cast<int>(s.code)
             == static_cast<int>(status_code::resource_exhausted));
  BOOST_TEST(s.error.find("max_files") != std::string::npos, s.error);
  r.project = "/";
  BOOST_TEST(!store->snapshot(r));
  r.project = project + "/missing";
  BOOST_TEST(!store->snapshot(r));
  r.project = home.path();
  auto self = store->snapshot(r);
  BOOST_TEST(!self);
  BOOST_TEST(self.error.find("checkpoint store") != std::string::npos,
             self.error);
}

BOOST_AUTO_TEST_CASE(a_corrupt_store_is_reported) {
  proj.write("a.txt", "a\n");
  snap();
  // Damaged records.
  auto key_files = fs::directory_iterator(home / "checkpoints/projects");
  std::string json_path;
  for (auto& e : key_files)
    if (e.path().extension() == ".json")
      json_path = e.path().string();
  BOOST_REQUIRE(!json_path.empty());
  std::ofstream{json_path} << "{not json";
  auto l = store->list(project);
  BOOST_TEST(!l);
  BOOST_TEST(static_cast<int>(l.code)
             == static_cast<int>(status_code::data_corrupt));
  BOOST_TEST(l.error.find("damaged") != std::string::npos, l.error);
  snapshot_request r;
  r.project = project;
  BOOST_TEST(!store->snapshot(r));
  fs::remove(json_path);
  snap();
  // Damaged objects: the snapshot's tree is garbage.
  for (auto& e : fs::recursive_directory_iterator(home / "checkpoints/store.git/objects"))
    if (e.is_regular_file()) {
      fs::permissions(e.path(), fs::perms::owner_all);
      std::ofstream{e.path()} << "garbage";
    }
  open(); // a new process: nothing of the store is cached in memory
  auto rr = store->restore(project, 1, restore_options{false, {}, false, {}});
  BOOST_TEST(!rr);
  BOOST_TEST(static_cast<int>(rr.code)
             == static_cast<int>(status_code::data_corrupt));
  BOOST_TEST(proj.read("a.txt") == "a\n");
  // A store directory that is not a repository at all.
  store.reset();
  fs::remove_all(home / "checkpoints/store.git");
  fs::create_directories(home / "checkpoints/store.git");
  std::ofstream{home / "checkpoints/store.git/HEAD"} << "garbage";
  auto s = file_checkpoint_store::open(home / "checkpoints");
  BOOST_TEST(!s);
  BOOST_TEST(static_cast<int>(s.code)
             == static_cast<int>(status_code::data_corrupt));
  BOOST_TEST(s.error.find("move") != std::string::npos, s.error);
}

BOOST_AUTO_TEST_CASE(a_full_disk_fails_the_snapshot_cleanly) {
  fs::create_directories(home / "tiny");
  test::tmpfs_mount tiny{home / "tiny", 64 * 1024};
  if (!tiny.ok()) {
    BOOST_TEST_MESSAGE("full-disk case skipped: " << tiny.why());
    return;
  }
  // Incompressible: the store deflates what it keeps.
  auto noise = test::incompressible_bytes(1 << 20);
  proj.write("big.txt", noise);
  proj.write("small.txt", "small\n");
  auto s = file_checkpoint_store::open(home / "tiny/checkpoints");
  BOOST_REQUIRE_MESSAGE(s, s.error);
  snapshot_request r;
  r.project = project;
  auto out = (*s)->snapshot(r);
  BOOST_TEST(!out);
  BOOST_TEST(static_cast<int>(out.code)
             == static_cast<int>(status_code::resource_exhausted),
             out.error);
  // The project is untouched and nothing was recorded.
  BOOST_TEST(proj.read("small.txt") == "small\n");
  auto l = (*s)->list(project);
  BOOST_REQUIRE(l);
  BOOST_TEST(l->empty());
}

BOOST_AUTO_TEST_CASE(read_only_store_and_read_only_project) {
  proj.write("a.txt", "a\n");
  proj.write("sub/b.txt", "b\n");
  snap();
  proj.write("sub/b.txt", "changed\n");
  BOOST_REQUIRE(store->add_agent_files(project, 1, {"sub/b.txt"}));
  {
    test::readonly_dir ro{proj / "sub"};
    if (!ro.ok()) {
      BOOST_TEST_MESSAGE("read-only project case skipped: " << ro.why());
    } else {
      auto r = store->restore(project, 1, {});
      BOOST_REQUIRE_MESSAGE(r, r.error);
      BOOST_TEST(r->failed.size() == 1u);
      BOOST_TEST(proj.read("sub/b.txt") == "changed\n");
    }
  }
  {
    test::readonly_dir ro{home / "checkpoints"};
    if (!ro.ok()) {
      BOOST_TEST_MESSAGE("read-only store case skipped: " << ro.why());
      return;
    }
    snapshot_request r;
    r.project = project;
    auto out = store->snapshot(r);
    BOOST_TEST(!out);
    BOOST_TEST(static_cast<int>(out.code)
                 == static_cast<int>(status_code::permission_denied),
               out.error);
  }
}

BOOST_AUTO_TEST_SUITE_END()
