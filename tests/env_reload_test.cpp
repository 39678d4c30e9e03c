// $MIBYAN_HOME/.env is read again at the start of every turn
// (docs/configuration.md): a key added while the runtime runs is used by
// the next turn, without a restart.
#define BOOST_TEST_MODULE env_reload
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <string>

#include "config/env_reload.hpp"
#include "tests/support/agent_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test;

namespace {

std::string last_authorization(http_server& server) {
  auto parsed = json::parse(server.requests());
  BOOST_REQUIRE(parsed);
  std::string out;
  for (auto& r : parsed.v->as_array())
    if (contains(r["path"].as_string(), "/chat/completions"))
      for (auto& [k, v] : r["headers"].as_object())
        if (k == "Authorization" || k == "authorization")
          out = v.as_string();
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(env_reload, agent_fixture)

BOOST_AUTO_TEST_CASE(key_added_mid_session_works_on_the_next_turn) {
  ::unsetenv("MIBYAN_ENV");
  start(base_options());
  auto c = call("hello", "env-1");
  c.provider.api_key.clear(); // provider custom: CUSTOM_API_KEY, optional
  script(chat_completion("no key yet"));
  auto res = run(c);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "no key yet");
  BOOST_CHECK_EQUAL(last_authorization(server), "");
  // The user adds the key to .env while the runtime runs.
  {
    std::ofstream env(home.path() + "/.env");
    env << "CUSTOM_API_KEY=sk-added-later-0001\n";
  }
  script(chat_completion("now it works"));
  res = run(c);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "now it works");
  BOOST_CHECK_EQUAL(last_authorization(server), "Bearer sk-added-later-0001");
  // A changed key is picked up too.
  {
    std::ofstream env(home.path() + "/.env");
    env << "CUSTOM_API_KEY=sk-rotated-key-0002\n";
  }
  script(chat_completion("still works"));
  res = run(c);
  BOOST_CHECK_EQUAL(res["final_response"].as_string(), "still works");
  BOOST_CHECK_EQUAL(last_authorization(server), "Bearer sk-rotated-key-0002");
}

// The redactor follows the reload (docs/security.md, "Secret redaction"):
// a secret added to .env mid-session is redacted from the next turn's tool
// output.
BOOST_AUTO_TEST_CASE(key_added_mid_session_is_redacted_on_the_next_turn) {
  ::unsetenv("MIBYAN_ENV");
  ::unsetenv("WIDGET_SERVICE_TOKEN");
  start(base_options());
  temp_dir work;
  const std::string value = "plainvalue7f3k2q9zz";
  auto file = work.path() + "/notes.txt";
  { std::ofstream(file) << "the widget value is " << value << " today\n"; }
  auto read_it = [&](const std::string& id) {
    script(chat_completion("", {{id, "terminal", one_arg("command", "cat " + file)}}));
    script(chat_completion("read"));
    auto res = run(call("read the notes", "env-redact"));
    for (auto& m : res["messages"].as_array())
      if (m.get_string("tool_call_id") == id && m.get_string("role") == "tool")
        return m["content"].as_string();
    BOOST_FAIL("no tool result");
    return std::string{};
  };
  // Not a secret yet: shown as is.
  BOOST_CHECK(contains(read_it("call_1"), value));
  {
    std::ofstream env(home.path() + "/.env");
    env << "WIDGET_SERVICE_TOKEN=" << value << "\n";
  }
  auto second = read_it("call_2");
  BOOST_CHECK_MESSAGE(!contains(second, value), second);
  BOOST_CHECK_MESSAGE(contains(second, "[REDACTED:WIDGET_SERVICE_TOKEN]"),
                      second);
}

BOOST_AUTO_TEST_CASE(reload_reads_and_clears) {
  ::unsetenv("MIBYAN_ENV");
  options o;
  o.home = home.path();
  o.env_file["OLD"] = "1";
  BOOST_CHECK(reload_env_file(o).ok());
  BOOST_CHECK(o.env_file.empty()); // no file: nothing
  {
    std::ofstream env(home.path() + "/.env");
    env << "# comment\nexport A_KEY='v1'\nnot a line\n";
  }
  BOOST_CHECK(reload_env_file(o).ok());
  BOOST_CHECK_EQUAL(o.env_file.size(), 1u);
  BOOST_CHECK_EQUAL(o.env_file["A_KEY"], "v1");
}

BOOST_AUTO_TEST_SUITE_END()
