// Per-user state over one PostgreSQL store (docs/storage.md, "Per-user
// state"; docs/cluster.md): two `mibyan serve` gateways, each with its OWN
// $MIBYAN_HOME (as on two machines), over one throw-away database, with the
// scripted provider behind them. What a turn writes through gateway A - a
// memory entry, a skill, an "always" grant of the command allowlist - is
// what a turn on gateway B uses: the memory is in B's system prompt, the
// skill is found by skill_view on B, the command runs on B without a
// question. A second case runs a cluster: two `serve --join` gateways and a
// worker, each on its own home; the memory a tool writes on the worker is
// in the other gateway's prompt. Skipped (exit ok, "SKIPPED (postgres)")
// where PostgreSQL cannot start, a failure under MIBYAN_REQUIRE_TEST_DATA=1.
#define BOOST_TEST_MODULE user_state_gateways
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <future>

#include "tests/support/gateway_fixture.hpp"

using namespace mibyan;
using namespace mibyan::test;
namespace fs = std::filesystem;

namespace {

struct two_homes : pg_gateways {
  std::string url;
  std::string work;

  two_homes() {
    if (!pg)
      return;
    url = pg->tcp_url(pg->fresh_database("us"));
    work = dir / "work";
    fs::create_directories(work);
  }

  std::string storage_yaml() const {
    return "storage:\n"
           "  backend: postgres\n"
           "  postgres:\n"
           "    url: \"" + url + "\"\n"
           "    pool_size: 2\n"
           "  auto_migrate: true\n";
  }

  // `mibyan serve --join JOIN` on its own home `name` (a cluster gateway).
  std::unique_ptr<node_process> start_joined(const std::string& name,
                                             const std::string& join) {
    home = dir / name;
    fs::create_directories(home);
    dir.write(name + "/config.yaml", config(storage_yaml()));
    gateway_env["MIBYAN_PG_PASSWORD"] = pg_server::password();
    return start_http_gateway(join);
  }

  // `mibyan serve` on its own home `name` over the shared database.
  std::unique_ptr<node_process> start_home(const std::string& name) {
    auto home = dir / name;
    fs::create_directories(home);
    dir.write(name + "/config.yaml",
              "storage:\n"
              "  backend: postgres\n"
              "  postgres:\n"
              "    url: \"" + url + "\"\n"
              "    pool_size: 2\n"
              "  auto_migrate: true\n"
              "approvals:\n"
              "  http: pending\n"
              "  timeout: 20\n"
              "code_execution:\n"
              "  sandbox: off\n"
              "  prestart_kernels: 0\n");
    auto n = std::make_unique<node_process>();
    n->err_path = home + "/serve.err";
    std::map<std::string, std::string> env;
    env["CUSTOM_API_KEY"] = "sk-test-1234";
    env["MIBYAN_PG_PASSWORD"] = pg_server::password();
    auto line = launch(*n,
                       {test::mibyan_binary(), "serve", "--listen",
                        "127.0.0.1:0", "--provider", "custom", "--base-url",
                        provider.url("/v1"), "--model", "m"},
                       home, env);
    const std::string ready = "mibyan serve listening on http://";
    BOOST_REQUIRE_MESSAGE(n->pid != -1 && line.rfind(ready, 0) == 0,
                          "serve did not start: " << line << " " << n->err());
    n->address = line.substr(ready.size());
    return n;
  }

  void script_call(const std::string& tool, const json::value& args) {
    provider.script_chat(completion("", tool, args.dump()));
  }

  // The tool message of chat request `body` ("" when none).
  static std::string tool_text(const json::value& body) {
    std::string out;
    auto msgs = body.find("messages");
    if (msgs == nullptr || !msgs->is_array())
      return out;
    for (auto& m : msgs->as_array())
      if (m.get_string("role", "") == "tool")
        out = m.get_string("content", "");
    return out;
  }

  static std::string system_text(const json::value& body) {
    auto msgs = body.find("messages");
    if (msgs == nullptr || !msgs->is_array())
      return {};
    for (auto& m : msgs->as_array())
      if (m.get_string("role", "") == "system")
        return m.get_string("content", "");
    return {};
  }

  // GET /v1/approvals on `address` until it lists one; its id.
  std::string wait_approval(const std::string& address) {
    for (int i = 0; i < 1500; ++i) {
      auto r = http_request(address, "GET /v1/approvals HTTP/1.1\r\nHost: "
                                     "x\r\nConnection: close\r\n\r\n");
      auto b = http_body(r);
      if (b.is_object() && b["data"].is_array() && b["data"].size() > 0)
        return b["data"].as_array()[0].get_string("id", "");
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    BOOST_FAIL("no approval was asked on " << address);
    return {};
  }
};

} // namespace

BOOST_FIXTURE_TEST_CASE(memory_skills_and_allowlist_follow_the_user_across_gateways,
                        two_homes) {
  if (!pg)
    return;
  auto a = start_home("home-a");
  auto b = start_home("home-b");

  // 1. Through A: a memory entry.
  json::value mem;
  mem["action"] = "add";
  mem["target"] = "user";
  mem["content"] = "The user's cat is named PIXEL.";
  script_call("memory", mem);
  provider.script_chat(completion("Noted."));
  auto r1 = http_chat(a->address, "on-a-1", "remember my cat");
  BOOST_REQUIRE_MESSAGE(contains(r1, "Noted."), r1);
  BOOST_CHECK(contains(tool_text(chat_requests().back()), "\"success\":true"));
  // Not a file of A's home: the shared store has it.
  BOOST_CHECK(!fs::exists(dir / "home-a/memories/USER.md"));

  // 2. Through A: a skill.
  json::value sk;
  sk["action"] = "create";
  sk["name"] = "pixel-care";
  sk["category"] = "pets";
  sk["content"] = "---\nname: pixel-care\ndescription: Caring for PIXEL\n"
                  "---\nFeed PIXEL at SEVEN.\n";
  script_call("skill_manage", sk);
  provider.script_chat(completion("Skill saved."));
  auto r2 = http_chat(a->address, "on-a-2", "save a skill");
  BOOST_REQUIRE_MESSAGE(contains(r2, "Skill saved."), r2);
  BOOST_CHECK(contains(tool_text(chat_requests().back()), "created"));

  // 3. Through A: "always" for a recursive delete.
  fs::create_directories(work + "/first");
  json::value cmd;
  cmd["command"] = "rm -rf ./first";
  cmd["workdir"] = work;
  script_call("terminal", cmd);
  provider.script_chat(completion("First gone."));
  auto pending = std::async(std::launch::async, [&] {
    return http_chat(a->address, "on-a-3", "delete first");
  });
  auto id = wait_approval(a->address);
  auto answered = http_request(
    a->address, "POST /v1/approvals/" + id
                  + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-"
                    "Type: application/json\r\nContent-Length: 19\r\n\r\n"
                    R"({"choice":"always"})");
  BOOST_CHECK_MESSAGE(contains(answered, " 200 "), answered);
  auto r3 = pending.get();
  BOOST_CHECK_MESSAGE(contains(r3, "First gone."), r3);
  BOOST_CHECK(!fs::exists(work + "/first"));
  // The grant went to the store, not to A's config.yaml.
  BOOST_CHECK(!contains(dir.read("home-a/config.yaml"), "command_allowlist"));

  // 4. On B, a new session: the memory is in its system prompt, and the
  // skill A made is there.
  json::value view;
  view["name"] = "pixel-care";
  script_call("skill_view", view);
  provider.script_chat(completion("I know PIXEL."));
  auto r4 = http_chat(b->address, "on-b-1", "what do you know?");
  BOOST_REQUIRE_MESSAGE(contains(r4, "I know PIXEL."), r4 << b->err());
  auto reqs = chat_requests();
  BOOST_REQUIRE_GE(reqs.size(), 2u);
  auto sys = system_text(reqs[reqs.size() - 2]);
  BOOST_CHECK_MESSAGE(contains(sys, "The user's cat is named PIXEL."), sys);
  auto viewed = tool_text(reqs.back());
  BOOST_CHECK_MESSAGE(contains(viewed, "Feed PIXEL at SEVEN."), viewed);

  // 5. On B: the same kind of command runs without a question (the
  // allowlist A's "always" wrote). Without it B would ask, and the
  // approval would time out as denied.
  fs::create_directories(work + "/second");
  cmd["command"] = "rm -rf ./second";
  script_call("terminal", cmd);
  provider.script_chat(completion("Second gone."));
  auto r5 = http_chat(b->address, "on-b-2", "delete second");
  BOOST_CHECK_MESSAGE(contains(r5, "Second gone."), r5);
  BOOST_CHECK(!fs::exists(work + "/second"));

  BOOST_CHECK_EQUAL(a->stop(), 0);
  BOOST_CHECK_EQUAL(b->stop(), 0);
}

// In a cluster: the gateways' turns run their tools on a worker with a home
// of its own. A memory written by a turn through gateway A (the tool runs
// on the worker) is in the system prompt gateway B builds for a new
// session.
BOOST_FIXTURE_TEST_CASE(a_memory_written_on_a_worker_reaches_another_gateway,
                        two_homes) {
  if (!pg)
    return;
  auto worker = start({"--role", "worker"}, storage_yaml(),
                      {{"MIBYAN_PG_PASSWORD", pg_server::password()}});
  BOOST_REQUIRE(worker->pid != -1);
  auto a = start_joined("gw-a", worker->address);
  auto b = start_joined("gw-b", worker->address);
  {
    auto probe = connect(worker->address);
    wait_members(*probe, 3);
  }
  json::value mem;
  mem["action"] = "add";
  mem["target"] = "memory";
  mem["content"] = "Deploys go out on FRIDAY.";
  script_call("memory", mem);
  provider.script_chat(completion("Noted."));
  auto r1 = http_chat(a->address, "cl-a-1", "remember deploy day");
  BOOST_REQUIRE_MESSAGE(contains(r1, "Noted."), r1 << a->err());
  BOOST_CHECK(contains(tool_text(chat_requests().back()), "\"success\":true"));
  provider.script_chat(completion("Friday."));
  auto r2 = http_chat(b->address, "cl-b-1", "when do deploys go out?");
  BOOST_REQUIRE_MESSAGE(contains(r2, "Friday."), r2 << b->err());
  auto sys = system_text(chat_requests().back());
  BOOST_CHECK_MESSAGE(contains(sys, "Deploys go out on FRIDAY."), sys);
  for (auto* g : {a.get(), b.get(), worker.get()})
    BOOST_CHECK_EQUAL(g->stop(), 0);
}
