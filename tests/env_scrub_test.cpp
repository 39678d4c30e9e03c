#define BOOST_TEST_MODULE env_scrub
#include <boost/test/unit_test.hpp>

#include "kernels/env_scrub.hpp"

#include "base/env_filter.hpp"

#include <algorithm>
#include <map>

using namespace mibyan;

namespace {

using env_map = std::map<std::string, std::string>;

env_map to_map(const std::vector<std::string>& env) {
  env_map out;
  for (auto& e : env) {
    auto eq = e.find('=');
    BOOST_REQUIRE(eq != std::string::npos);
    BOOST_REQUIRE_MESSAGE(out.count(e.substr(0, eq)) == 0,
                          "duplicate " << e.substr(0, eq));
    out[e.substr(0, eq)] = e.substr(eq + 1);
  }
  return out;
}

bool contains(const std::vector<std::string>& xs, const std::string& x) {
  return std::find(xs.begin(), xs.end(), x) != xs.end();
}

const std::vector<std::string> sample{
  "PATH=/usr/bin:/bin",
  "HOME=/home/u",
  "MIBYAN_HOME=/home/u/.mibyan",
  "OPENAI_API_KEY=sk-123",
  "GITHUB_TOKEN=ghp_abc",
  "MIBYAN_BASE_URL=http://x",
  "MY_DIR=/data",
};

} // namespace

BOOST_AUTO_TEST_SUITE(env_scrub)

BOOST_AUTO_TEST_CASE(reference_outcome) {
  auto r = build_kernel_env(sample, {});
  auto m = to_map(r.env);
  for (auto k : {"OPENAI_API_KEY", "GITHUB_TOKEN", "MIBYAN_BASE_URL",
                 "MY_DIR"}) {
    BOOST_TEST(m.count(k) == 0u, k);
    BOOST_TEST(contains(r.dropped, k), k);
  }
  BOOST_TEST(m["PATH"] == "/usr/bin:/bin");
  BOOST_TEST(m["HOME"] == "/home/u");
  BOOST_TEST(m["MIBYAN_HOME"] == "/home/u/.mibyan");
  BOOST_TEST(r.dropped == (std::vector<std::string>{
                            "OPENAI_API_KEY", "GITHUB_TOKEN",
                            "MIBYAN_BASE_URL", "MY_DIR"}));
  BOOST_TEST(r.dropped_product
             == (std::vector<std::string>{"MIBYAN_BASE_URL"}));
  BOOST_TEST(r.refused_passthrough.empty());
}

BOOST_AUTO_TEST_CASE(passthrough_reallows_names_but_never_credentials) {
  env_scrub_options o;
  o.passthrough = {"GITHUB_TOKEN", "OPENAI_API_KEY", "MIBYAN_BASE_URL",
                   "MY_DIR", "openai_api_key", "NOT_PRESENT", ""};
  auto r = build_kernel_env(sample, o);
  auto m = to_map(r.env);
  BOOST_TEST(m["GITHUB_TOKEN"] == "ghp_abc");
  BOOST_TEST(m["MIBYAN_BASE_URL"] == "http://x");
  BOOST_TEST(m["MY_DIR"] == "/data");
  BOOST_TEST(m.count("OPENAI_API_KEY") == 0u);
  BOOST_TEST(m.count("NOT_PRESENT") == 0u);
  BOOST_TEST(r.refused_passthrough
             == (std::vector<std::string>{"OPENAI_API_KEY",
                                          "openai_api_key"}));
  BOOST_TEST(r.dropped == (std::vector<std::string>{"OPENAI_API_KEY"}));
  BOOST_TEST(r.dropped_product.empty());
}

BOOST_AUTO_TEST_CASE(every_provider_credential_is_refused) {
  for (auto name : {"OPENAI_API_KEY", "ANTHROPIC_API_KEY",
                    "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY", "GROQ_API_KEY",
                    "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY",
                    "TOGETHER_API_KEY", "XAI_API_KEY", "FIREWORKS_API_KEY",
                    "ANTHROPIC_AUTH_TOKEN", "Openai_Api_Key"}) {
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(is_provider_credential(name));
      env_scrub_options o;
      o.passthrough = {name};
      auto r = build_kernel_env({std::string{name} + "=v"}, o);
      BOOST_TEST(r.refused_passthrough
                 == (std::vector<std::string>{name}));
      BOOST_TEST(to_map(r.env).count(name) == 0u);
    }
  }
  for (auto name : {"GITHUB_TOKEN", "MY_API_KEY", "OPENAI_BASE_URL",
                    "API_KEY", "", "OPENAI"})
    BOOST_TEST(!is_provider_credential(name), name);
  auto& list = provider_credential_names();
  BOOST_TEST(std::is_sorted(list.begin(), list.end()));
  BOOST_TEST(list.size() >= 11u);
}

BOOST_AUTO_TEST_CASE(secret_block_applies_to_upper_cased_names) {
  std::vector<std::string> in;
  for (auto n : {"AWS_SECRET_ACCESS_KEY", "DB_PASSWORD", "SENTRY_DSN",
                 "SLACK_WEBHOOK_URL", "MY_CREDS", "X_BEARER", "APIKEY_FOO",
                 "HOME_TOKEN", "PATH_SECRET", "user_auth", "TMP_PASSWD",
                 "GOOGLE_APPLICATION_CREDENTIALS", "lc_key"})
    in.push_back(std::string{n} + "=v");
  auto r = build_kernel_env(in, {});
  BOOST_TEST(r.dropped.size() == in.size());
  auto m = to_map(r.env);
  for (auto& e : in)
    BOOST_TEST(m.count(e.substr(0, e.find('='))) == 0u, e);
}

BOOST_AUTO_TEST_CASE(safe_prefixes_keep_and_pass_alone_is_not_blocked) {
  std::vector<std::string> in{
    "PATHEXT=.EXE",     "USERNAME=u",       "TERM_PROGRAM=x",
    "LANG=C.UTF-8",     "LC_ALL=C",         "TMPDIR=/tmp",
    "TEMP=/t",          "TMP=/t",           "SHELL=/bin/sh",
    "LOGNAME=u",        "XDG_RUNTIME_DIR=/r", "VIRTUAL_ENV=/v",
    "CONDA_PREFIX=/c",  "USER=u",           "TERM=xterm",
    // Dropped by rule 5 (no safe prefix), not by the secret block:
    "PASSPORT_DIR=/p",  "MY_PASS=1",        "EDITOR=vi",
    "path=/lower",      "TZ=UTC",           "PYTHONHOME=/x",
  };
  auto r = build_kernel_env(in, {});
  auto m = to_map(r.env);
  for (size_t i = 0; i < 15; ++i) {
    auto name = in[i].substr(0, in[i].find('='));
    BOOST_TEST(m.count(name) == 1u, name);
  }
  BOOST_TEST(r.dropped == (std::vector<std::string>{
                            "PASSPORT_DIR", "MY_PASS", "EDITOR", "path",
                            "TZ", "PYTHONHOME"}));
  // PASS alone is not a secret marker: passthrough is honoured.
  env_scrub_options o;
  o.passthrough = {"MY_PASS"};
  BOOST_TEST(to_map(build_kernel_env(in, o).env)["MY_PASS"] == "1");
}

BOOST_AUTO_TEST_CASE(only_exact_product_names_survive) {
  std::vector<std::string> in{
    "MIBYAN_HOME=/h",   "MIBYAN_PROFILE=p", "MIBYAN_CONFIG=/c",
    "MIBYAN_ENV=dev",   "MIBYAN_HOME2=/x",  "MIBYAN_KANBAN_DB=/k",
    "MIBYAN_RPC_TOKEN=stale", "MIBYAN_KERNEL_SENTINEL=stale",
    "MIBYAN_API_KEY=k", "mibyan_home=/l",
  };
  auto r = build_kernel_env(in, {});
  auto m = to_map(r.env);
  for (auto k : {"MIBYAN_HOME", "MIBYAN_PROFILE", "MIBYAN_CONFIG",
                 "MIBYAN_ENV"})
    BOOST_TEST(m.count(k) == 1u, k);
  BOOST_TEST(r.dropped_product
             == (std::vector<std::string>{
                  "MIBYAN_HOME2", "MIBYAN_KANBAN_DB", "MIBYAN_RPC_TOKEN",
                  "MIBYAN_KERNEL_SENTINEL", "MIBYAN_API_KEY"}));
  BOOST_TEST(contains(r.dropped, "mibyan_home"));
  BOOST_TEST(m.count("MIBYAN_RPC_TOKEN") == 0u);
  BOOST_TEST(m.count("MIBYAN_KERNEL_SENTINEL") == 0u);
}

// Issue 14 item 4: the kernel and its scripts' terminal calls apply one
// allow-list (base/env_filter.hpp), credential-shaped values included.
BOOST_AUTO_TEST_CASE(kernel_and_script_terminal_share_the_allow_list) {
  std::vector<std::string> in{
    "PATH=/usr/bin",  "HOME=/home/u",       "GH_PAT=abc",
    "PGPASS=pw",      "SENTRY_DSN=https://k@s/1",
    "AWS_SESSION_EXPIRATION=soon",          "DATABASE_URL=postgres://a:b@h/d",
    "XDG_DATA_URL=https://user:pw@host/x",  "LANG=C.UTF-8",
    "TERM_HELPER=ghp_0123456789abcdefghijABCDEFGHIJ012345",
    "MIBYAN_HOME=/m", "EDITOR=vi"};
  auto kernel = build_kernel_env(in, {});
  std::vector<std::string> inherited;
  for (auto& e : kernel.env)
    if (std::find(in.begin(), in.end(), e) != in.end())
      inherited.push_back(e);
  auto terminal = allowlist_environment(in, {});
  BOOST_TEST(inherited == terminal, boost::test_tools::per_element());
  BOOST_TEST(terminal == (std::vector<std::string>{
                           "PATH=/usr/bin", "HOME=/home/u", "LANG=C.UTF-8",
                           "MIBYAN_HOME=/m"}),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(kernel_variables_are_injected_and_win) {
  env_scrub_options o;
  o.staging_dir = "/tmp/mibyan_kernel_abc";
  o.rpc_socket = "/tmp/mibyan_kernel_abc/rpc.sock";
  o.rpc_token = "tok";
  o.sentinel_fd = 4;
  o.stub_path = "/tmp/mibyan_kernel_abc/mibyan_tools.py";
  o.watchdog_fd = 3;
  o.rpc_timeout = 120;
  o.timezone = "Europe/Berlin";
  o.passthrough = {"MIBYAN_RPC_SOCKET"};
  std::vector<std::string> in{"PATH=/bin", "MIBYAN_RPC_SOCKET=/old",
                              "PYTHONPATH=/a:/b"};
  auto r = build_kernel_env(in, o);
  auto m = to_map(r.env);
  BOOST_TEST(m["MIBYAN_RPC_SOCKET"] == o.rpc_socket);
  BOOST_TEST(m["MIBYAN_RPC_TOKEN"] == "tok");
  BOOST_TEST(m["MIBYAN_RPC_TIMEOUT"] == "120.000");
  BOOST_TEST(m["MIBYAN_KERNEL_SENTINEL_FD"] == "4");
  // The sentinel itself is never in the environment.
  BOOST_TEST(m.count("MIBYAN_KERNEL_SENTINEL") == 0u);
  BOOST_TEST(m["MIBYAN_KERNEL_STUB"] == o.stub_path);
  BOOST_TEST(m["MIBYAN_KERNEL_WATCHDOG_FD"] == "3");
  BOOST_TEST(m["PYTHONDONTWRITEBYTECODE"] == "1");
  BOOST_TEST(m["PYTHONIOENCODING"] == "utf-8");
  BOOST_TEST(m["PYTHONUTF8"] == "1");
  BOOST_TEST(m["TZ"] == "Europe/Berlin");
  BOOST_TEST(m["PYTHONPATH"] == "/tmp/mibyan_kernel_abc:/a:/b");
  BOOST_TEST(r.env.front() == "PATH=/bin");
  BOOST_TEST(r.env.back() == "PYTHONPATH=/tmp/mibyan_kernel_abc:/a:/b");
}

BOOST_AUTO_TEST_CASE(optional_injections_are_omitted_when_unset) {
  auto r = build_kernel_env({"PATH=/bin"}, {});
  auto m = to_map(r.env);
  for (auto k : {"MIBYAN_RPC_SOCKET", "MIBYAN_RPC_TOKEN",
                 "MIBYAN_RPC_TIMEOUT", "MIBYAN_KERNEL_SENTINEL_FD",
                 "MIBYAN_KERNEL_STUB", "MIBYAN_KERNEL_WATCHDOG_FD", "TZ",
                 "PYTHONPATH"})
    BOOST_TEST(m.count(k) == 0u, k);
  BOOST_TEST(m["PYTHONUTF8"] == "1");
  BOOST_TEST(m.size() == 4u);
}

BOOST_AUTO_TEST_CASE(pythonpath_drops_runtime_entries) {
  env_scrub_options o;
  o.staging_dir = "/tmp/mibyan_kernel_new";
  o.runtime_paths = {"/opt/mibyan/lib"};
  auto r = build_kernel_env(
    {"PYTHONPATH=/tmp/mibyan_kernel_new/::/user/a:/tmp/mibyan_kernel_old:"
     "/opt/mibyan/lib/:/user/b:/x/mibyan_kernel_y/"},
    o);
  BOOST_TEST(to_map(r.env)["PYTHONPATH"]
             == "/tmp/mibyan_kernel_new:/user/a:/user/b");
  env_scrub_options none;
  auto s = build_kernel_env({"PYTHONPATH=/u"}, none);
  BOOST_TEST(to_map(s.env)["PYTHONPATH"] == "/u");
}

BOOST_AUTO_TEST_CASE(malformed_and_repeated_entries) {
  auto r = build_kernel_env({"NOEQUALS", "=value", "", "HOME=/first",
                             "HOME=/second", "PATH=", "LANG=a=b"},
                            {});
  auto m = to_map(r.env);
  BOOST_TEST(m["HOME"] == "/first");
  BOOST_TEST(m["PATH"] == "");
  BOOST_TEST(m["LANG"] == "a=b");
  BOOST_TEST(m.count("NOEQUALS") == 0u);
  BOOST_TEST(r.dropped.empty());
  BOOST_TEST(build_kernel_env({}, {}).dropped.empty());
}

BOOST_AUTO_TEST_SUITE_END()
