// The execute_code sandbox and the user's credential files (issue 31,
// items 2 and 5): a script in project mode cannot read the credential
// stores the file tools refuse (base/credential_paths.hpp), and with the
// working directory at $HOME it cannot change shell start-up files or
// ~/.ssh/authorized_keys, nor is it approved as isolated.
//
// The fake $HOME lives under /var/tmp, not /tmp: the sandbox's /tmp is a
// fresh tmpfs, which would hide a home under /tmp whatever the policy.
#define BOOST_TEST_MODULE sandbox_credentials
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include <sys/stat.h>

#include "base/json.hpp"
#include "base/sandbox.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
namespace fs = std::filesystem;

namespace {

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// A directory under /var/tmp, removed with its contents.
struct var_tmp_dir {
  std::string path;
  var_tmp_dir() {
    std::string tmpl = "/var/tmp/mibyan-cred-test-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("mkdtemp failed for " + tmpl);
    path = tmpl;
  }
  ~var_tmp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& rel, const std::string& content) const {
    auto full = path + "/" + rel;
    fs::create_directories(fs::path(full).parent_path());
    std::ofstream out(full, std::ios::binary | std::ios::trunc);
    out << content;
    return full;
  }
};

const char* const key_text = "KEYBODY-ed25519-do-not-leak";
const char* const aws_text = "aws_secret_access_key = AWSBODY-do-not-leak";
const char* const netrc_text = "machine example.com login u password "
                               "NETRCBODY-do-not-leak";

struct fixture {
  var_tmp_dir root;
  std::string home;      // the fake $HOME
  std::string project;   // $HOME/project
  test::temp_dir mibyan_home;
  std::string saved_home;
  bool had_home = false;
  std::unique_ptr<runtime> rt;

  fixture() {
    if (const char* h = std::getenv("HOME")) {
      had_home = true;
      saved_home = h;
    }
    home = root.path + "/home";
    project = home + "/project";
    root.write("home/.ssh/id_ed25519", std::string{key_text} + "\n");
    root.write("home/.ssh/authorized_keys", "ssh-ed25519 AAAA original\n");
    root.write("home/.aws/credentials",
               std::string{"[default]\n"} + aws_text + "\n");
    root.write("home/.netrc", std::string{netrc_text} + "\n");
    root.write("home/.bashrc", "# original bashrc\n");
    root.write("home/project/readme.txt", "project file\n");
    ::setenv("HOME", home.c_str(), 1);
  }

  ~fixture() {
    rt.reset();
    if (had_home)
      ::setenv("HOME", saved_home.c_str(), 1);
    else
      ::unsetenv("HOME");
  }

  void start(bool unattended_approves) {
    options opts;
    opts.home = mibyan_home.path();
    opts.code_execution.prestart_kernels = 0;
    opts.code_execution.sandbox = "required";
    if (unattended_approves)
      opts.approvals.unattended_mode = "approve";
    std::string err;
    auto made = create_runtime(opts);
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  json::value exec(const std::string& code, const std::string& cwd,
                   const std::string& session = "s1") {
    json::value args;
    args["code"] = code;
    auto out = rt->call_tool({session, "call", "execute_code", args.dump(),
                              cwd});
    auto parsed = json::parse(out.result_json);
    BOOST_REQUIRE_MESSAGE(parsed, out.result_json);
    return *parsed.v;
  }

  std::string out(const std::string& code, const std::string& cwd) {
    auto r = exec(code, cwd);
    return r.get_string("output") + r.get_string("error");
  }
};

// Reads each file (and through a terminal() call too) and prints what it
// got; an unreadable or empty file prints "none".
std::string read_code(const std::string& home) {
  return "import os\n"
         "from mibyan_tools import terminal\n"
         "for p in ['" + home + "/.ssh/id_ed25519', '" + home
         + "/.aws/credentials', '" + home + "/.netrc']:\n"
           "    try:\n"
           "        got = open(p).read()\n"
           "    except OSError as e:\n"
           "        got = ''\n"
           "    print('file', p.rsplit('/', 1)[1], repr(got) if got else "
           "'none')\n"
           "    t = terminal('cat ' + p + ' 2>/dev/null')['output']\n"
           "    print('term', p.rsplit('/', 1)[1], repr(t) if t.strip() else "
           "'none')\n";
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string{std::istreambuf_iterator<char>(in), {}};
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(sandbox_credentials, fixture)

BOOST_AUTO_TEST_CASE(scripts_cannot_read_credential_files) {
  BOOST_REQUIRE_MESSAGE(probe_sandbox().available, probe_sandbox().reason);
  start(true);
  for (auto* cwd : {&project, &home}) {
    auto o = out(read_code(home), *cwd);
    BOOST_TEST_MESSAGE(o);
    BOOST_TEST(!contains(o, "KEYBODY"), o);
    BOOST_TEST(!contains(o, "AWSBODY"), o);
    BOOST_TEST(!contains(o, "NETRCBODY"), o);
    // Every one of the six reads came back empty.
    size_t none = 0;
    for (size_t p = o.find("none"); p != std::string::npos;
         p = o.find("none", p + 1))
      ++none;
    BOOST_TEST(none == 6u, o);
    // The rest of the home stays readable.
    BOOST_TEST(out("print(open('" + project + "/readme.txt').read())", *cwd)
               == "project file\n\n");
  }
}

BOOST_AUTO_TEST_CASE(working_at_home_keeps_startup_files_read_only) {
  BOOST_REQUIRE_MESSAGE(probe_sandbox().available, probe_sandbox().reason);
  start(true);
  auto code =
    "import os\n"
    "from mibyan_tools import terminal\n"
    "def attempt(label, fn):\n"
    "    try:\n"
    "        fn()\n"
    "        print(label, 'wrote')\n"
    "    except OSError as e:\n"
    "        print(label, 'refused')\n"
    "def append(p):\n"
    "    with open(p, 'a') as f:\n"
    "        f.write('evil\\n')\n"
    "attempt('keys', lambda: append('" + home + "/.ssh/authorized_keys'))\n"
    "attempt('bashrc', lambda: append('" + home + "/.bashrc'))\n"
    "attempt('profile', lambda: append('" + home + "/.bash_profile'))\n"
    "attempt('rename', lambda: os.rename('" + home + "/.bashrc', '" + home
    + "/x'))\n"
    "attempt('project', lambda: append('" + project + "/new.txt'))\n"
    "print(terminal('echo evil >> ~/.bashrc; echo evil >> "
    "~/.ssh/authorized_keys')['exit_code'])\n";
  auto r = exec(code, home);
  auto o = r.get_string("output") + r.get_string("error");
  BOOST_TEST_MESSAGE(o);
  // The kernel's first answer warns about working at the home.
  BOOST_TEST(contains(r.get_string("note"), "home directory"), r.dump());
  BOOST_TEST(contains(o, "bashrc refused"), o);
  BOOST_TEST(contains(o, "profile refused"), o);
  BOOST_TEST(contains(o, "rename refused"), o);
  BOOST_TEST(contains(o, "project wrote"), o);
  // The host's files are what they were; nothing new in the home.
  BOOST_TEST(slurp(home + "/.ssh/authorized_keys")
             == "ssh-ed25519 AAAA original\n");
  BOOST_TEST(slurp(home + "/.bashrc") == "# original bashrc\n");
  BOOST_TEST(!fs::exists(home + "/.bash_profile"));
  BOOST_TEST(!fs::exists(home + "/x"));
  BOOST_TEST(slurp(project + "/new.txt") == "evil\n");
}

BOOST_AUTO_TEST_CASE(a_script_at_home_is_not_approved_as_isolated) {
  BOOST_REQUIRE_MESSAGE(probe_sandbox().available, probe_sandbox().reason);
  // No approval channel, the default unattended policy (deny).
  start(false);
  BOOST_TEST(workdir_contains_home(home));
  BOOST_TEST(workdir_contains_home("/"));
  BOOST_TEST(!workdir_contains_home(project));
  auto r = exec("print('ran')", project);
  BOOST_TEST(r.get_string("output") == "ran\n", r.dump());
  r = exec("print('ran')", home, "s2");
  BOOST_TEST(r.get_string("status") == "blocked", r.dump());
  BOOST_TEST(r.get_string("output").empty(), r.dump());
}

BOOST_AUTO_TEST_SUITE_END()
