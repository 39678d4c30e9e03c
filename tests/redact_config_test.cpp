// Issue 31, item 3: the values of secret keys in config.yaml (server.key,
// cluster.key, tokens in mcp_servers) are redaction literals from the
// moment the configuration is loaded, so a tool that returns the file's
// text (read_file, terminal `cat`) returns them masked.
#define BOOST_TEST_MODULE redact_config
#include <boost/test/unit_test.hpp>

#include <string>

#include "config/loader.hpp"
#include "config/secret_literals.hpp"
#include "mibyan/runtime.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;

namespace {

const std::string server_key = "srv-Key-4f9a2c71d0b38e65";
const std::string cluster_key = "clu-Key-8b1e77a03c5d92f4";
const std::string mcp_token = "mcp-Tok-19c0ffee5aa7b3d2";
const std::string header_token = "hdr-Tok-77aa01b2c3d4e5f6";

std::string config_text() {
  return "server:\n  key: " + server_key + "\n"
         "cluster:\n  key: \"" + cluster_key + "\"\n"
         "code_execution:\n  prestart_kernels: 0\n"
         "mcp_servers:\n"
         "  gh:\n    enabled: false\n    command: /bin/true\n"
         "    env:\n      GITHUB_TOKEN: " + mcp_token + "\n"
         "      LOG_LEVEL: debug-verbose-mode\n"
         "  remote:\n    enabled: false\n    url: https://mcp.example.test/\n"
         "    headers:\n      Authorization: Bearer " + header_token + "\n";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string json_quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out.push_back('\\');
    out.push_back(c);
  }
  return out + "\"";
}

} // namespace

BOOST_AUTO_TEST_CASE(secret_keys_are_collected_when_the_config_is_parsed) {
  auto r = parse_options(config_text(), "config.yaml");
  BOOST_REQUIRE_MESSAGE(r.ok(), r.error);
  std::map<std::string, std::string> got(r->secret_literals.begin(),
                                         r->secret_literals.end());
  BOOST_TEST(got["server.key"] == server_key);
  BOOST_TEST(got["cluster.key"] == cluster_key);
  BOOST_TEST(got["mcp_servers.gh.env.GITHUB_TOKEN"] == mcp_token);
  BOOST_TEST(got["mcp_servers.remote.headers.Authorization"] == header_token);
  BOOST_TEST(got.count("mcp_servers.gh.env.LOG_LEVEL") == 0u);
  BOOST_TEST(got.size() == 4u);
}

BOOST_AUTO_TEST_CASE(secret_key_names) {
  for (auto name : {"key", "api_key", "apiKey", "token", "client_secret",
                    "password", "GITHUB_TOKEN", "accessToken", "Authorization"})
    BOOST_TEST(is_secret_config_key(name), name);
  for (auto name : {"tls_key", "key_file", "api_key_env", "max_tokens",
                    "public_key", "token_budget", "author", "keys_dir"})
    BOOST_TEST(!is_secret_config_key(name), name);
}

BOOST_AUTO_TEST_CASE(read_file_of_the_config_returns_secrets_masked) {
  test::temp_dir home;
  test::temp_dir work;
  home.write("config.yaml", config_text());
  work.write("copy.yaml", config_text());
  runtime_config cfg;
  cfg.home = home.path();
  std::string err;
  auto made = runtime::create(cfg);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);
  const std::string secrets[] = {server_key, cluster_key, mcp_token,
                                 header_token};
  // config.yaml itself (refused or masked) and a copy of it (masked).
  for (auto path : {home / "config.yaml", work / "copy.yaml"}) {
    auto out = rt->call_tool({"cfg-s", "c1", "read_file",
                              "{\"path\": " + json_quoted(path) + "}",
                              work.path()});
    BOOST_TEST_CONTEXT(path << " -> " << out.result_json) {
      for (auto& s : secrets)
        BOOST_TEST(!contains(out.result_json, s));
    }
  }
  auto copy = rt->call_tool({"cfg-s2", "c2", "read_file",
                             "{\"path\": \"copy.yaml\"}", work.path()});
  BOOST_TEST(contains(copy.result_json, "[REDACTED:server.key]"),
             copy.result_json);
  BOOST_TEST(contains(copy.result_json, "[REDACTED:cluster.key]"),
             copy.result_json);
  BOOST_TEST(contains(copy.result_json, "debug-verbose-mode"),
             copy.result_json);
  // A command that prints the file: the same.
  auto cat = rt->call_tool({"cfg-s", "c3", "terminal",
                            "{\"command\": \"cat copy.yaml\"}", work.path()});
  for (auto& s : secrets)
    BOOST_TEST(!contains(cat.result_json, s), cat.result_json);
  BOOST_TEST(contains(cat.result_json, "[REDACTED:server.key]"),
             cat.result_json);
}
