#define BOOST_TEST_MODULE provider_profile
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "providers/provider_profile.hpp"

using namespace mibyan;

namespace {

const char* const all_vars[] = {"OPENAI_API_KEY", "OPENROUTER_API_KEY",
                                "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY",
                                "VLLM_API_KEY", "CUSTOM_API_KEY"};

// Clears every provider variable for the test and restores them after.
struct env_fixture {
  std::map<std::string, std::optional<std::string>> saved;
  options opts;

  env_fixture() {
    for (auto name : all_vars) {
      auto v = std::getenv(name);
      saved[name] = v ? std::optional<std::string>{v} : std::nullopt;
      ::unsetenv(name);
    }
    opts.home = "/tmp/mibyan-home";
  }

  ~env_fixture() {
    for (auto& [name, v] : saved)
      if (v)
        ::setenv(name.c_str(), v->c_str(), 1);
      else
        ::unsetenv(name.c_str());
  }

  void set(const char* name, const char* value) {
    ::setenv(name, value, 1);
  }

  result<provider_endpoint> resolve(std::string provider,
                                    std::string base = {},
                                    std::string key = {}) {
    return resolve_endpoint({std::move(provider), std::move(base), "m",
                             std::move(key)},
                            opts);
  }
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

std::string header(const provider_endpoint& ep, const std::string& name,
                   bool stream = true) {
  for (auto& [k, v] : ep.headers(stream))
    if (k == name)
      return v;
  return "<none>";
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(profiles, env_fixture)

BOOST_AUTO_TEST_CASE(known_provider_table) {
  struct row {
    const char* name;
    wire_format format;
    const char* url;
    const char* var;
    bool required;
  };
  const row rows[] = {
    {"openai", wire_format::openai, "https://api.openai.com/v1",
     "OPENAI_API_KEY", true},
    {"openrouter", wire_format::openai, "https://openrouter.ai/api/v1",
     "OPENROUTER_API_KEY", true},
    {"anthropic", wire_format::anthropic, "https://api.anthropic.com/v1",
     "ANTHROPIC_API_KEY", true},
    {"deepseek", wire_format::openai, "https://api.deepseek.com/v1",
     "DEEPSEEK_API_KEY", true},
    {"ollama", wire_format::openai, "http://127.0.0.1:11434/v1", "", false},
    {"llamacpp", wire_format::openai, "http://127.0.0.1:8080/v1", "", false},
    {"lmstudio", wire_format::openai, "http://127.0.0.1:1234/v1", "", false},
    {"vllm", wire_format::openai, "http://127.0.0.1:8000/v1",
     "VLLM_API_KEY", false},
    {"custom", wire_format::openai, "", "CUSTOM_API_KEY", false},
  };
  BOOST_TEST(known_providers().size() == std::size(rows));
  for (auto& r : rows) {
    auto p = find_provider(r.name);
    BOOST_REQUIRE_MESSAGE(p != nullptr, r.name);
    BOOST_TEST((p->format == r.format));
    BOOST_TEST(std::string{p->default_base_url} == r.url);
    BOOST_TEST(std::string{p->key_env} == r.var);
    BOOST_TEST(p->key_required == r.required);
  }
  BOOST_TEST(find_provider("OpenAI") == find_provider("openai"));
  BOOST_TEST(find_provider("gemini") == nullptr);
  BOOST_TEST(find_provider("") == nullptr);
}

BOOST_AUTO_TEST_CASE(explicit_key_wins) {
  set("OPENAI_API_KEY", "sk-from-environment-1");
  opts.env_file["OPENAI_API_KEY"] = "sk-from-dotenv-00001";
  auto r = resolve("openai", "", "sk-explicit-000001");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->api_key == "sk-explicit-000001");
  BOOST_TEST(r->key_source == "explicit");
  BOOST_TEST(r->base_url == "https://api.openai.com/v1");
  BOOST_TEST(r->model == "m");
}

BOOST_AUTO_TEST_CASE(environment_before_dotenv) {
  set("OPENROUTER_API_KEY", "sk-or-environment-1");
  opts.env_file["OPENROUTER_API_KEY"] = "sk-or-dotenv-000001";
  auto r = resolve("openrouter");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->api_key == "sk-or-environment-1");
  BOOST_TEST(r->key_source
             == "environment variable OPENROUTER_API_KEY");
}

BOOST_AUTO_TEST_CASE(dotenv_when_the_environment_has_none) {
  opts.env_file["ANTHROPIC_API_KEY"] = "sk-ant-dotenv-00001";
  auto r = resolve("anthropic");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->api_key == "sk-ant-dotenv-00001");
  BOOST_TEST(r->key_source == ".env ANTHROPIC_API_KEY");
  BOOST_TEST((r->format == wire_format::anthropic));
}

BOOST_AUTO_TEST_CASE(placeholders_are_skipped) {
  set("DEEPSEEK_API_KEY", "your-api-key-here");
  opts.env_file["DEEPSEEK_API_KEY"] = "sk-deepseek-real-01";
  auto r = resolve("deepseek");
  BOOST_REQUIRE(r.ok());
  BOOST_TEST(r->api_key == "sk-deepseek-real-01");
  opts.env_file["DEEPSEEK_API_KEY"] = "short";
  auto bad = resolve("deepseek");
  BOOST_TEST(!bad.ok());
  BOOST_TEST(contains(bad.error, "placeholder"));
  BOOST_TEST((bad.code == status_code::config_invalid));
  BOOST_TEST(!bad.value); // no endpoint, so no key to send
}

BOOST_AUTO_TEST_CASE(missing_key_names_the_variable_and_dotenv) {
  for (auto name : {"openai", "openrouter", "anthropic", "deepseek"}) {
    auto r = resolve(name);
    BOOST_TEST(!r.ok());
    BOOST_TEST((r.code == status_code::config_invalid));
    auto var = std::string{find_provider(name)->key_env};
    BOOST_TEST_MESSAGE(r.error);
    BOOST_TEST(contains(r.error, var));
    BOOST_TEST(contains(r.error, "/tmp/mibyan-home/.env"));
    BOOST_TEST(contains(r.error, name));
  }
}

BOOST_AUTO_TEST_CASE(another_providers_key_is_not_borrowed) {
  set("OPENAI_API_KEY", "sk-openai-000000001");
  set("OPENROUTER_API_KEY", "sk-or-0000000000001");
  auto r = resolve("anthropic");
  BOOST_TEST(!r.ok());
  BOOST_TEST(contains(r.error, "ANTHROPIC_API_KEY"));
  BOOST_TEST(!r.value);
}

BOOST_AUTO_TEST_CASE(cloud_key_only_goes_to_the_exact_default_host) {
  set("OPENAI_API_KEY", "sk-openai-000000001");
  for (auto url : {"https://api.openai.com.evil.example/v1",
                   "https://evil.example/api.openai.com/v1",
                   "https://xapi.openai.com/v1",
                   "http://api.openai.com/v1",
                   "https://api.openai.com:8443/v1",
                   "http://127.0.0.1:9999/v1"}) {
    auto r = resolve("openai", url);
    BOOST_TEST_MESSAGE(url << ": " << r.error);
    BOOST_TEST(!r.ok());
    BOOST_TEST(!r.value);
    BOOST_TEST(contains(r.error, "only ever sent to api.openai.com"));
  }
  // Credentials in the URL are refused outright.
  auto creds = resolve("openai", "https://api.openai.com@evil.example/v1");
  BOOST_TEST(!creds.ok());
  BOOST_TEST(!creds.value);
  // Same host in other spellings is fine.
  for (auto url : {"https://API.OpenAI.com/v1/",
                   "https://api.openai.com:443/v1",
                   "https://api.openai.com./v1"}) {
    auto r = resolve("openai", url);
    BOOST_TEST_MESSAGE(url << ": " << r.error);
    BOOST_REQUIRE(r.ok());
    BOOST_TEST(r->api_key == "sk-openai-000000001");
  }
  // An explicit key may go anywhere the user points it.
  auto ex = resolve("openai", "http://127.0.0.1:9999/v1", "sk-explicit-01");
  BOOST_REQUIRE(ex.ok());
  BOOST_TEST(ex->api_key == "sk-explicit-01");
}

BOOST_AUTO_TEST_CASE(custom_and_local_endpoints_never_get_cloud_keys) {
  set("OPENAI_API_KEY", "sk-openai-000000001");
  set("ANTHROPIC_API_KEY", "sk-ant-00000000001");
  opts.env_file["OPENROUTER_API_KEY"] = "sk-or-0000000000001";
  auto custom = resolve("custom", "http://127.0.0.1:9999/v1");
  BOOST_REQUIRE(custom.ok());
  BOOST_TEST(custom->api_key.empty());
  BOOST_TEST(header(*custom, "Authorization") == "<none>");
  for (auto name : {"ollama", "llamacpp", "lmstudio", "vllm"}) {
    auto r = resolve(name);
    BOOST_REQUIRE(r.ok());
    BOOST_TEST(r->api_key.empty());
  }
  set("CUSTOM_API_KEY", "sk-custom-00000001");
  auto own = resolve("custom", "http://127.0.0.1:9999/v1");
  BOOST_REQUIRE(own.ok());
  BOOST_TEST(own->api_key == "sk-custom-00000001");
  set("VLLM_API_KEY", "vllm-token-000001");
  auto vllm = resolve("vllm");
  BOOST_REQUIRE(vllm.ok());
  BOOST_TEST(vllm->api_key == "vllm-token-000001");
  auto ex = resolve("ollama", "", "local-token-0001");
  BOOST_REQUIRE(ex.ok());
  BOOST_TEST(ex->api_key == "local-token-0001");
}

BOOST_AUTO_TEST_CASE(base_url_rules) {
  auto custom = resolve("custom");
  BOOST_TEST(!custom.ok());
  BOOST_TEST(contains(custom.error, "model.base_url"));
  auto bad = resolve("custom", "ftp://127.0.0.1/v1");
  BOOST_TEST(!bad.ok());
  BOOST_TEST(contains(bad.error, "Invalid base URL"));
  BOOST_TEST(!resolve("custom", "not a url").ok());
  auto trimmed = resolve("ollama", "http://10.0.0.5:11434/v1///");
  BOOST_REQUIRE(trimmed.ok());
  BOOST_TEST(trimmed->base_url == "http://10.0.0.5:11434/v1");
  BOOST_TEST(trimmed->request_url()
             == "http://10.0.0.5:11434/v1/chat/completions");
}

BOOST_AUTO_TEST_CASE(unknown_and_missing_provider) {
  auto unknown = resolve("gemini");
  BOOST_TEST(!unknown.ok());
  BOOST_TEST(contains(unknown.error, "Unknown provider 'gemini'"));
  BOOST_TEST(contains(unknown.error, "openrouter"));
  auto none = resolve("");
  BOOST_TEST(!none.ok());
  BOOST_TEST(none.error == no_provider_help());
  auto help = no_provider_help();
  for (auto part : {"model.provider", "provider: openai", "OPENAI_API_KEY",
                    "provider: openrouter", "OPENROUTER_API_KEY",
                    "provider: anthropic", "ANTHROPIC_API_KEY",
                    "provider: ollama", "11434", "provider: llamacpp",
                    "8080", ".env", "--api-key", "model.base_url"})
    BOOST_TEST(contains(help, part), part);
}

BOOST_AUTO_TEST_CASE(headers_per_wire_format) {
  auto oa = resolve("openai", "", "sk-explicit-000001");
  BOOST_REQUIRE(oa.ok());
  BOOST_TEST(header(*oa, "Authorization")
             == "Bearer sk-explicit-000001");
  BOOST_TEST(header(*oa, "x-api-key") == "<none>");
  BOOST_TEST(header(*oa, "Accept") == "text/event-stream");
  BOOST_TEST(header(*oa, "Accept", false) == "application/json");
  BOOST_TEST(header(*oa, "Content-Type") == "application/json");
  BOOST_TEST(oa->request_url()
             == "https://api.openai.com/v1/chat/completions");
  auto an = resolve("anthropic", "", "sk-ant-explicit-01");
  BOOST_REQUIRE(an.ok());
  BOOST_TEST(header(*an, "x-api-key") == "sk-ant-explicit-01");
  BOOST_TEST(header(*an, "anthropic-version") == "2023-06-01");
  BOOST_TEST(header(*an, "Authorization") == "<none>");
  BOOST_TEST(contains(header(*an, "anthropic-beta"),
                      "fine-grained-tool-streaming"));
  BOOST_TEST(an->request_url()
             == "https://api.anthropic.com/v1/messages");
  auto compat = resolve("anthropic", "http://127.0.0.1:9/v1", "k-000000001");
  BOOST_REQUIRE(compat.ok());
  BOOST_TEST(header(*compat, "anthropic-beta") == "<none>");
  auto local = resolve("ollama");
  BOOST_REQUIRE(local.ok());
  BOOST_TEST(header(*local, "Authorization") == "<none>");
}

BOOST_AUTO_TEST_CASE(main_and_fallback_from_options) {
  opts.model.provider = "openai";
  opts.model.default_model = "gpt-4o-mini";
  set("OPENAI_API_KEY", "sk-openai-000000001");
  auto m = resolve_main_endpoint(opts);
  BOOST_REQUIRE(m.ok());
  BOOST_TEST(m->model == "gpt-4o-mini");
  auto cli = resolve_main_endpoint(opts, "sk-cli-0000000001");
  BOOST_REQUIRE(cli.ok());
  BOOST_TEST(cli->api_key == "sk-cli-0000000001");
  auto none = resolve_fallback_endpoint(opts);
  BOOST_TEST(!none.ok());
  BOOST_TEST((none.code == status_code::not_found));
  opts.model.fallback_provider = "ollama";
  opts.model.fallback_model = "qwen2.5";
  opts.model.fallback_base_url = "http://127.0.0.1:11434/v1";
  auto fb = resolve_fallback_endpoint(opts);
  BOOST_REQUIRE(fb.ok());
  BOOST_TEST(fb->provider == "ollama");
  BOOST_TEST(fb->model == "qwen2.5");
  BOOST_TEST(fb->api_key.empty());
}

BOOST_AUTO_TEST_CASE(default_host_and_plausible_keys) {
  auto oa = *find_provider("openai");
  BOOST_TEST(is_default_host(oa, "https://api.openai.com/v1"));
  BOOST_TEST(!is_default_host(oa, "https://api.openai.com.evil/v1"));
  BOOST_TEST(!is_default_host(oa, "garbage"));
  BOOST_TEST(!is_default_host(*find_provider("custom"),
                              "http://127.0.0.1/v1"));
  BOOST_TEST(plausible_key("sk-proj-abcdefgh1234"));
  BOOST_TEST(!plausible_key(""));
  BOOST_TEST(!plausible_key("sk-1234"));
  BOOST_TEST(!plausible_key("<your key>"));
  BOOST_TEST(!plausible_key("sk-xxxxxxxxxxxxxxxx"));
  BOOST_TEST(!plausible_key("changeme-please"));
  BOOST_TEST(!plausible_key("sk-abc def-12345"));
}

BOOST_AUTO_TEST_SUITE_END()
