#define BOOST_TEST_MODULE destructive_command
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "approvals/destructive.hpp"

using mibyan::approvals::classify_destructive;

namespace {

std::vector<std::string> targets(const std::string& cmd) {
  return classify_destructive(cmd).targets;
}

} // namespace

BOOST_AUTO_TEST_CASE(plain_commands_are_not_destructive) {
  for (auto cmd : {"ls -la", "cat a.txt", "echo hi >> log.txt",
                   "make -j2 2>/dev/null", "grep -r x . > /dev/null",
                   "git status", "git checkout main", "git stash list",
                   "sed 's/a/b/' file.txt", "cmd 2>&1", "echo x >&2",
                   "git reset HEAD~1", "find . -name '*.o'", ""}) {
    auto r = classify_destructive(cmd);
    BOOST_TEST(!r.destructive, cmd);
    BOOST_TEST(r.reasons.empty(), cmd);
  }
}

BOOST_AUTO_TEST_CASE(rm_mv_and_friends) {
  auto r = classify_destructive("rm -rf build/out a.txt");
  BOOST_TEST(r.destructive);
  BOOST_TEST(r.reasons == std::vector<std::string>{"rm"});
  BOOST_TEST(r.targets == (std::vector<std::string>{"build/out", "a.txt"}));
  BOOST_TEST(!r.whole_tree);
  BOOST_TEST(targets("mv old.txt new.txt")
             == (std::vector<std::string>{"old.txt", "new.txt"}));
  BOOST_TEST(targets("/bin/rm -- -weird") == std::vector<std::string>{"-weird"});
  BOOST_TEST(targets("truncate -s 0 log.txt")
             == std::vector<std::string>{"log.txt"});
  BOOST_TEST(classify_destructive("rmdir empty").destructive);
  BOOST_TEST(classify_destructive("unlink f").destructive);
}

BOOST_AUTO_TEST_CASE(wrappers_and_nesting_are_seen_through) {
  BOOST_TEST(targets("sudo -u root rm x") == std::vector<std::string>{"x"});
  BOOST_TEST(targets("env A=1 nice -n 5 rm y") == std::vector<std::string>{"y"});
  BOOST_TEST(targets("timeout 10 rm z") == std::vector<std::string>{"z"});
  BOOST_TEST(targets("cd src && rm a.c; ls")
             == std::vector<std::string>{"a.c"});
  BOOST_TEST(targets("bash -c 'rm inner.txt'")
             == std::vector<std::string>{"inner.txt"});
  BOOST_TEST(targets("echo $(rm sub.txt)")
             == std::vector<std::string>{"sub.txt"});
  BOOST_TEST(targets("X=1 mv a b") == (std::vector<std::string>{"a", "b"}));
}

BOOST_AUTO_TEST_CASE(sed_in_place) {
  auto r = classify_destructive("sed -i 's/a/b/' one.txt two.txt");
  BOOST_TEST(r.destructive);
  BOOST_TEST(r.reasons == std::vector<std::string>{"sed -i"});
  BOOST_TEST(r.targets == (std::vector<std::string>{"one.txt", "two.txt"}));
  BOOST_TEST(targets("sed -i.bak -e 's/a/b/' f.txt")
             == std::vector<std::string>{"f.txt"});
  BOOST_TEST(targets("sed --in-place 's/x/y/' g.txt")
             == std::vector<std::string>{"g.txt"});
  BOOST_TEST(targets("sed -ni 's/x/y/p' h.txt")
             == std::vector<std::string>{"h.txt"});
  BOOST_TEST(!classify_destructive("sed -n 's/x/y/p' h.txt").destructive);
  BOOST_TEST(targets("perl -pi -e 's/a/b/' p.txt")
             == std::vector<std::string>{"p.txt"});
}

BOOST_AUTO_TEST_CASE(redirections) {
  auto r = classify_destructive("echo hi > out.txt");
  BOOST_TEST(r.destructive);
  BOOST_TEST(r.reasons == std::vector<std::string>{"> redirection"});
  BOOST_TEST(r.targets == std::vector<std::string>{"out.txt"});
  BOOST_TEST(targets("cmd 2> err.log") == std::vector<std::string>{"err.log"});
  BOOST_TEST(targets("cmd >| forced.txt")
             == std::vector<std::string>{"forced.txt"});
  BOOST_TEST(targets("cmd >& both.txt") == std::vector<std::string>{"both.txt"});
  BOOST_TEST(!classify_destructive("cmd >> appended.txt").destructive);
  BOOST_TEST(!classify_destructive("cmd > /dev/null").destructive);
  auto v = classify_destructive("echo x > \"$OUT\"");
  BOOST_TEST(v.destructive);
  BOOST_TEST(v.whole_tree);
  BOOST_TEST(v.targets.empty());
}

BOOST_AUTO_TEST_CASE(git_commands) {
  auto r = classify_destructive("git checkout -- src/a.c b.c");
  BOOST_TEST(r.reasons == std::vector<std::string>{"git checkout --"});
  BOOST_TEST(r.targets == (std::vector<std::string>{"src/a.c", "b.c"}));
  auto h = classify_destructive("git reset --hard HEAD");
  BOOST_TEST(h.destructive);
  BOOST_TEST(h.whole_tree);
  BOOST_TEST(h.reasons == std::vector<std::string>{"git reset --hard"});
  BOOST_TEST(classify_destructive("git -c x=y reset --hard").destructive);
  BOOST_TEST(classify_destructive("git clean -fdx").whole_tree);
  BOOST_TEST(!classify_destructive("git clean -n").destructive);
  BOOST_TEST(targets("git restore x.txt") == std::vector<std::string>{"x.txt"});
  BOOST_TEST(classify_destructive("git checkout .").whole_tree);
  BOOST_TEST(classify_destructive("git stash").destructive);
}

BOOST_AUTO_TEST_CASE(computed_targets_and_hostile_input) {
  auto r = classify_destructive("rm -rf $DIR/*");
  BOOST_TEST(r.destructive);
  BOOST_TEST(r.whole_tree);
  auto g = classify_destructive("rm *.tmp");
  BOOST_TEST(g.targets == std::vector<std::string>{"*.tmp"});
  // Deep nesting and a huge input end with whole_tree, never a crash.
  std::string deep = "rm x";
  for (int i = 0; i < 40; ++i)
    deep = "bash -c " + std::string{"'"} + deep + "'";
  (void)classify_destructive(deep);
  std::string nest = "rm a";
  for (int i = 0; i < 20; ++i)
    nest = "echo $(" + nest + ")";
  auto n = classify_destructive(nest);
  BOOST_TEST(n.destructive);
  BOOST_TEST(n.whole_tree);
  std::string huge(600 * 1024, 'a');
  auto big = classify_destructive("rm " + huge);
  BOOST_TEST(big.destructive);
  BOOST_TEST(big.whole_tree);
  std::string garbage = "\x01\xff'\"$(`(((";
  (void)classify_destructive(garbage);
}
