#define BOOST_TEST_MODULE agent_batch_plan
#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

#include "agent/batch_plan.hpp"

using namespace mibyan;

namespace {

tool_call tc(std::string name, std::string args = "{}") {
  return tool_call{"id", std::move(name), std::move(args)};
}

tool_call read(std::string path) {
  return tc("read_file", R"({"path":")" + path + R"("})");
}

tool_call write(std::string path) {
  return tc("write_file", R"({"path":")" + path + R"(","content":"x"})");
}

batch_plan_options opts() {
  batch_plan_options o;
  o.cwd = "/work/project";
  return o;
}

using segs = std::vector<batch_segment>;

batch_segment par(std::vector<size_t> xs) { return {std::move(xs), true}; }
batch_segment seq(std::vector<size_t> xs) { return {std::move(xs), false}; }

std::string show(const segs& xs) {
  std::string out;
  for (auto& s : xs) {
    out += s.parallel ? "P[" : "S[";
    for (auto i : s.calls)
      out += std::to_string(i) + ",";
    out += "] ";
  }
  return out;
}

void check(const std::vector<tool_call>& calls, const segs& expected,
           const batch_plan_options& o = opts()) {
  auto got = plan_batch(calls, o);
  BOOST_TEST((got == expected), "got " << show(got) << " expected "
                                       << show(expected));
  // Model order is preserved: the concatenation is 0..n-1.
  size_t next = 0;
  for (auto& s : got)
    for (auto i : s.calls)
      BOOST_TEST(i == next++);
  BOOST_TEST(next == calls.size());
}

} // namespace

BOOST_AUTO_TEST_CASE(empty_and_single_batches) {
  check({}, {});
  check({read("a")}, {seq({0})});
  check({tc("terminal")}, {seq({0})});
}

BOOST_AUTO_TEST_CASE(read_only_tools_run_in_parallel) {
  check({tc("web_search", R"({"query":"a"})"),
         tc("web_extract", R"({"urls":["u"]})"), read("a.txt"),
         tc("search_files", R"({"pattern":"x","path":"src"})")},
        {par({0, 1, 2, 3})});
}

BOOST_AUTO_TEST_CASE(barriers_split_parallel_runs) {
  check({read("a"), read("b"), tc("terminal", R"({"command":"make"})"),
         read("c"), read("d")},
        {par({0, 1}), seq({2}), par({3, 4})});
}

BOOST_AUTO_TEST_CASE(short_runs_are_demoted_and_merged) {
  check({read("a"), tc("terminal"), read("b"), tc("memory"), read("c"),
         read("d")},
        {seq({0, 1, 2, 3}), par({4, 5})});
  check({tc("terminal"), tc("todo"), tc("execute_code")}, {seq({0, 1, 2})});
}

BOOST_AUTO_TEST_CASE(clarify_and_non_object_arguments_are_barriers) {
  check({read("a"), tc("clarify", R"({"question":"?"})"), read("b")},
        {seq({0, 1, 2})});
  check({read("a"), tc("web_search", "[1,2]"), read("b"), read("c")},
        {seq({0, 1}), par({2, 3})});
  check({read("a"), tc("web_search", "{bad json"), read("b"), read("c")},
        {seq({0, 1}), par({2, 3})});
}

BOOST_AUTO_TEST_CASE(writers_on_distinct_paths_run_in_parallel) {
  check({write("a.txt"), write("b.txt"), write("/tmp/c.txt")},
        {par({0, 1, 2})});
}

BOOST_AUTO_TEST_CASE(same_path_forces_a_new_run) {
  check({write("a.txt"), write("a.txt")}, {seq({0, 1})});
  check({write("a.txt"), read("b.txt"), write("./a.txt"), read("c.txt")},
        {par({0, 1}), par({2, 3})});
  // Normalisation: relative, absolute and dotted forms are the same file.
  check({write("a.txt"), write("/work/project/sub/../a.txt")},
        {seq({0, 1})});
}

BOOST_AUTO_TEST_CASE(readers_may_share_writers_may_not) {
  check({read("a.txt"), read("a.txt"), read("./a.txt")}, {par({0, 1, 2})});
  check({read("a.txt"), write("a.txt")}, {seq({0, 1})});
  check({write("a.txt"), read("a.txt")}, {seq({0, 1})});
}

BOOST_AUTO_TEST_CASE(overlap_is_a_component_prefix_either_way) {
  check({tc("search_files", R"({"pattern":"x","path":"src"})"),
         write("src/main.cpp")},
        {seq({0, 1})});
  check({write("src/main.cpp"),
         tc("search_files", R"({"pattern":"x","path":"src"})")},
        {seq({0, 1})});
  // "src2" is not under "src".
  check({tc("search_files", R"({"pattern":"x","path":"src"})"),
         write("src2/main.cpp")},
        {par({0, 1})});
  // search_files without a path reserves the working directory.
  check({tc("search_files", R"({"pattern":"x"})"), write("deep/file.txt")},
        {seq({0, 1})});
  check({tc("search_files", R"({"pattern":"x"})"), write("/elsewhere/f")},
        {par({0, 1})});
}

BOOST_AUTO_TEST_CASE(file_tools_without_a_path_are_barriers) {
  check({read("a"), tc("write_file", R"({"content":"x"})"), read("b"),
         read("c")},
        {seq({0, 1}), par({2, 3})});
  check({read("a"), tc("read_file", R"({"path":""})"), read("b"),
         read("c")},
        {seq({0, 1}), par({2, 3})});
  check({read("a"), tc("read_file", R"({"path":7})"), read("b"), read("c")},
        {seq({0, 1}), par({2, 3})});
  check({read("a"), tc("patch", R"({"old_string":"a"})"), read("b"),
         read("c")},
        {seq({0, 1}), par({2, 3})});
}

BOOST_AUTO_TEST_CASE(patch_in_replace_mode_reserves_its_path) {
  check({tc("patch", R"({"path":"a.py","old_string":"x","new_string":"y"})"),
         tc("patch", R"({"path":"b.py","old_string":"x","new_string":"y"})")},
        {par({0, 1})});
  check({tc("patch", R"({"path":"a.py","old_string":"x","new_string":"y"})"),
         read("a.py")},
        {seq({0, 1})});
}

BOOST_AUTO_TEST_CASE(v4a_patches_reserve_every_named_path) {
  std::string p = "*** Begin Patch\n*** Update File: src/a.py\n@@\n-x\n+y\n"
                  "*** Move to: src/moved.py\n*** Add File: docs/new.md\n+hi\n"
                  "*** Delete File: old.txt\n*** Move File: m1 -> m2\n"
                  "*** End Patch\n";
  auto paths = v4a_patch_paths(p);
  std::vector<std::string> expected{"src/a.py", "src/moved.py", "docs/new.md",
                                    "old.txt", "m1", "m2"};
  BOOST_TEST(paths == expected, boost::test_tools::per_element());
  auto args = std::string{R"({"mode":"patch","patch":")"};
  for (char c : p)
    args += c == '\n' ? std::string{"\\n"} : std::string(1, c);
  args += "\"}";
  check({tc("patch", args), read("docs/new.md")}, {seq({0, 1})});
  check({tc("patch", args), read("m2")}, {seq({0, 1})});
  check({tc("patch", args), read("other.md")}, {par({0, 1})});
  // A V4A patch naming no file is a barrier.
  check({read("a"), tc("patch", R"({"mode":"patch","patch":"junk"})"),
         read("b")},
        {seq({0, 1, 2})});
  check({read("a"), tc("patch", R"({"mode":"patch"})"), read("b")},
        {seq({0, 1, 2})});
}

BOOST_AUTO_TEST_CASE(custom_predicate_and_resolver) {
  auto o = opts();
  o.parallel_safe = [](std::string_view name) {
    return name.substr(0, 9) == "mcp__kb__";
  };
  check({tc("mcp__kb__search"), tc("mcp__kb__get"), tc("web_search")},
        {par({0, 1}), seq({2})}, o);
  // A resolver that maps every path to the same file serialises writers.
  o.resolve = [](std::string_view) { return std::string{"/same"}; };
  check({write("a"), write("b")}, {seq({0, 1})}, o);
}

BOOST_AUTO_TEST_CASE(paths_overlap_rules) {
  BOOST_TEST(paths_overlap("/a", "/a"));
  BOOST_TEST(paths_overlap("/a", "/a/b"));
  BOOST_TEST(paths_overlap("/a/b", "/a"));
  BOOST_TEST(!paths_overlap("/a/b", "/a/bc"));
  BOOST_TEST(!paths_overlap("/a/bc", "/a/b"));
  BOOST_TEST(paths_overlap("/", "/anything"));
  BOOST_TEST(!paths_overlap("/x", "/y"));
}

BOOST_AUTO_TEST_CASE(default_parallel_safe_set) {
  for (auto n : {"read_file", "search_files", "session_search", "skill_view",
                 "skills_list", "vision_analyze", "web_extract", "web_search"})
    BOOST_TEST(default_parallel_safe(n), n);
  for (auto n : {"terminal", "process", "memory", "todo", "delegate_task",
                 "execute_code", "browser_navigate", "clarify", "write_file",
                 "patch", ""})
    BOOST_TEST(!default_parallel_safe(n), n);
}

BOOST_AUTO_TEST_CASE(large_batches_keep_order) {
  std::vector<tool_call> calls;
  for (int i = 0; i < 50; ++i)
    calls.push_back(i % 7 == 3 ? tc("terminal")
                               : read("f" + std::to_string(i)));
  auto got = plan_batch(calls, opts());
  size_t next = 0;
  for (auto& s : got) {
    if (s.parallel)
      BOOST_TEST(s.calls.size() >= 2u);
    for (auto i : s.calls)
      BOOST_TEST(i == next++);
  }
  BOOST_TEST(next == calls.size());
  for (size_t k = 1; k < got.size(); ++k)
    BOOST_TEST(!(got[k].parallel == false && got[k - 1].parallel == false));
}
