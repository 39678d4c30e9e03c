// `mibyan acp` end to end (docs/acp.md): the official ACP TypeScript client
// library (@agentclientprotocol/sdk, tests/node/acp_client.mjs) drives a
// real `mibyan acp` process whose model is the scripted provider; the bad
// input cases write raw lines to the process's stdin.
#define BOOST_TEST_MODULE acp
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/json.hpp"
#include "base/subprocess.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/mcp_servers.hpp"
#include "tests/support/missing_peer.hpp"
#include "tests/support/paths.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

using namespace mibyan;
using namespace std::chrono;
namespace fs = std::filesystem;

namespace {

// node and the npm peers (scripts/install-test-deps.sh): 77 without them.
struct npm_presence {
  npm_presence() {
    std::string missing;
    if (find_executable("node").empty())
      missing = "node is not on PATH";
    else if (!fs::exists(test::test_source_dir()
                         + "/node/node_modules/@agentclientprotocol/sdk"))
      missing = "@agentclientprotocol/sdk is not installed in "
                "tests/node/node_modules";
    if (missing.empty())
      return;
    test::exit_missing_peer(missing + "; run scripts/install-test-deps.sh");
  }
};
BOOST_TEST_GLOBAL_FIXTURE(npm_presence);

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// A completion with one tool call of id `id`, or a text answer.
std::string tool_reply(const std::string& id, const std::string& name,
                       const std::string& args) {
  auto body = json::parse(test::completion("", name, args));
  auto& call = (*body.v)["choices"].as_array()[0]["message"]["tool_calls"]
                 .as_array()[0];
  call["id"] = id;
  return body.v->dump();
}

json::value args_of(std::initializer_list<std::pair<const char*, json::value>>
                      members) {
  json::value a;
  for (auto& [k, v] : members)
    a[k] = v;
  return a;
}

struct fixture {
  test::http_server server;
  test::temp_dir home;
  test::temp_dir work;

  fixture() {
    home.write("config.yaml", "approvals:\n  timeout: 3\n");
  }

  std::vector<std::string> acp_args() {
    return {"--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m"};
  }

  // Runs tests/node/acp_client.mjs SCENARIO; its facts.
  json::value client(const std::string& scenario,
                     std::map<std::string, std::string> env = {}) {
    test::process_options o;
    o.env["MIBYAN_HOME"] = home.path();
    o.env["MIBYAN_BIN"] = test::mibyan_binary();
    json::value args = json::value::make_array();
    for (auto& a : acp_args())
      args.push_back(a);
    o.env["ACP_ARGS"] = args.dump();
    o.env["ACP_CWD"] = work.path();
    o.env["ACP_MCP_ENTRY"] = test::mcp_package_entry("server-everything");
    for (auto& [k, v] : env)
      o.env[k] = v;
    o.unset = {"OPENAI_API_KEY", "CUSTOM_API_KEY", "MIBYAN_LOG_LEVEL"};
    // The agent's own working directory is not the sessions' (the
    // session's cwd must come from session/new).
    o.cwd = home.path();
    o.timeout_seconds = 200;
    auto r = test::run_process({"node", test::test_source_dir()
                                          + "/node/acp_client.mjs",
                                scenario},
                               o);
    BOOST_TEST_MESSAGE("acp_client " << scenario << " stderr:\n" << r.err);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0,
                          "acp_client " + scenario + " failed: " + r.err);
    auto nl = r.out.find_last_of('\n', r.out.size() - 2);
    auto last = r.out.substr(nl == std::string::npos ? 0 : nl + 1);
    auto facts = json::parse(last);
    BOOST_REQUIRE_MESSAGE(facts && facts.v->is_object(),
                          "no facts from acp_client: " + r.out);
    BOOST_CHECK_EQUAL(facts.v->get_int("exitCode", -1), 0);
    BOOST_CHECK_GT(facts.v->get_int("stdoutLines", 0), 0);
    return *facts.v;
  }
};

// The updates of `list` (an array of update objects) for tool call `id`.
std::vector<json::value> for_call(const json::value& list,
                                  const std::string& id) {
  std::vector<json::value> out;
  if (list.is_array())
    for (auto& u : list.as_array())
      if (u.get_string("toolCallId") == id)
        out.push_back(u);
  return out;
}

std::string content_text(const json::value& update) {
  std::string out;
  if (auto c = update.find("content"); c != nullptr && c->is_array())
    for (auto& item : c->as_array())
      if (item.get_string("type") == "content")
        if (auto b = item.find("content"))
          out += b->get_string("text");
  return out;
}

const json::value* diff_of(const json::value& update) {
  if (auto c = update.find("content"); c != nullptr && c->is_array())
    for (auto& item : c->as_array())
      if (item.get_string("type") == "diff")
        return &item;
  return nullptr;
}

std::vector<std::string> offered_tools(const json::value& request) {
  std::vector<std::string> out;
  if (auto t = request.find("tools"); t != nullptr && t->is_array())
    for (auto& spec : t->as_array())
      if (auto f = spec.find("function"))
        out.push_back(f->get_string("name"));
  return out;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

BOOST_FIXTURE_TEST_CASE(edit_through_the_client_then_load, fixture) {
  work.write("notes.txt", "hello from the disk\nsecond line\n");
  work.write("main.py", "print('disk')\n");
  server.script_chat(tool_reply("call_read", "read_file",
                                args_of({{"path", "notes.txt"}}).dump()));
  server.script_chat(tool_reply("call_exec", "execute_code",
                                args_of({{"code", "print(6*7)"}}).dump()));
  server.script_chat(tool_reply(
    "call_patch", "patch",
    args_of({{"path", "notes.txt"},
             {"old_string", "hello from the buffer"},
             {"new_string", "hello from mibyan"}})
      .dump()));
  server.script_chat(tool_reply(
    "call_write", "write_file",
    args_of({{"path", "fresh.txt"}, {"content", "new file\n"}}).dump()));
  server.script_chat(tool_reply(
    "call_py", "write_file",
    args_of({{"path", "main.py"}, {"content", "print('new')\n"}}).dump()));
  server.script_chat(tool_reply(
    "call_todo", "todo",
    R"({"todos":[{"id":"1","content":"check the edit","status":"in_progress"}]})"));
  server.script_chat(test::completion("all done"));
  auto f = client("edit");

  BOOST_CHECK_EQUAL(f.get_int("protocolVersion", 0), 1);
  auto& caps = f["agentCapabilities"];
  BOOST_CHECK(caps.get_bool("loadSession", false));
  BOOST_CHECK(caps["promptCapabilities"].get_bool("embeddedContext", false));
  BOOST_CHECK(!caps["promptCapabilities"].get_bool("image", true));
  BOOST_CHECK_EQUAL(f["agentInfo"].get_string("name"), "mibyan");
  BOOST_CHECK_EQUAL(f.get_string("stopReason"), "end_turn");
  BOOST_CHECK(contains(f.get_string("answer"), "all done"));
  BOOST_CHECK_EQUAL(f["commands"].size(), 1u);

  // execute_code: a tool call of kind execute whose update shows 42.
  auto exec_start = for_call(f["toolCalls"], "call_exec");
  BOOST_REQUIRE_EQUAL(exec_start.size(), 1u);
  BOOST_CHECK_EQUAL(exec_start[0].get_string("kind"), "execute");
  BOOST_CHECK_EQUAL(exec_start[0].get_string("status"), "in_progress");
  auto exec_end = for_call(f["toolUpdates"], "call_exec");
  BOOST_REQUIRE_EQUAL(exec_end.size(), 1u);
  BOOST_CHECK_EQUAL(exec_end[0].get_string("status"), "completed");
  BOOST_CHECK(contains(content_text(exec_end[0]), "42"));

  // patch: read from the editor's buffer (not the disk), written through
  // fs/write_text_file, reported as a diff.
  auto file = work / "notes.txt";
  auto patch_start = for_call(f["toolCalls"], "call_patch");
  BOOST_REQUIRE_EQUAL(patch_start.size(), 1u);
  BOOST_CHECK_EQUAL(patch_start[0].get_string("kind"), "edit");
  BOOST_CHECK_EQUAL(patch_start[0]["locations"].size(), 1u);
  auto patch_end = for_call(f["toolUpdates"], "call_patch");
  BOOST_REQUIRE_EQUAL(patch_end.size(), 1u);
  BOOST_CHECK_EQUAL(patch_end[0].get_string("status"), "completed");
  auto diff = diff_of(patch_end[0]);
  BOOST_REQUIRE(diff != nullptr);
  BOOST_CHECK_EQUAL(diff->get_string("path"), file);
  BOOST_CHECK_EQUAL(diff->get_string("oldText"),
                    "hello from the buffer\nsecond line\n");
  BOOST_CHECK_EQUAL(diff->get_string("newText"),
                    "hello from mibyan\nsecond line\n");
  bool read_it = false;
  for (auto& p : f["reads"].as_array())
    read_it = read_it || p.as_string() == file;
  BOOST_CHECK(read_it);
  BOOST_REQUIRE_EQUAL(f["writes"].size(), 3u);
  BOOST_CHECK_EQUAL(f["writes"].as_array()[0].get_string("content"),
                    "hello from mibyan\nsecond line\n");
  BOOST_CHECK_EQUAL(test::slurp(file), "hello from mibyan\nsecond line\n");

  // read_file: the model got the buffer's text, not the disk's.
  auto read_end = for_call(f["toolUpdates"], "call_read");
  BOOST_REQUIRE_EQUAL(read_end.size(), 1u);
  BOOST_CHECK_EQUAL(read_end[0].get_string("status"), "completed");
  auto after_read = test::request_bodies(server).at(1).dump();
  BOOST_CHECK(contains(after_read, "hello from the buffer"));
  BOOST_CHECK(!contains(after_read, "hello from the disk"));

  // write_file of a new file: through the client, a diff without old text.
  auto write_end = for_call(f["toolUpdates"], "call_write");
  BOOST_REQUIRE_EQUAL(write_end.size(), 1u);
  BOOST_CHECK_EQUAL(write_end[0].get_string("status"), "completed");
  auto wdiff = diff_of(write_end[0]);
  BOOST_REQUIRE(wdiff != nullptr);
  BOOST_CHECK_EQUAL(wdiff->get_string("path"), work / "fresh.txt");
  auto old_text = wdiff->find("oldText");
  BOOST_CHECK(old_text != nullptr && old_text->is_null());
  BOOST_CHECK_EQUAL(wdiff->get_string("newText"), "new file\n");
  BOOST_CHECK_EQUAL(f["writes"].as_array()[1].get_string("path"),
                    work / "fresh.txt");
  BOOST_CHECK_EQUAL(test::slurp(work / "fresh.txt"), "new file\n");
  // write_file over an open buffer: the diff's old text is the buffer's.
  auto py_end = for_call(f["toolUpdates"], "call_py");
  BOOST_REQUIRE_EQUAL(py_end.size(), 1u);
  auto pdiff = diff_of(py_end[0]);
  BOOST_REQUIRE(pdiff != nullptr);
  BOOST_CHECK_EQUAL(pdiff->get_string("oldText"), "print('buffer')\n");
  BOOST_CHECK_EQUAL(pdiff->get_string("newText"), "print('new')\n");
  BOOST_CHECK_EQUAL(test::slurp(work / "main.py"), "print('new')\n");

  // todo: a plan.
  BOOST_REQUIRE_GE(f["plans"].size(), 1u);
  auto& entry = f["plans"].as_array().back()["entries"].as_array().at(0);
  BOOST_CHECK_EQUAL(entry.get_string("content"), "check the edit");
  BOOST_CHECK_EQUAL(entry.get_string("status"), "in_progress");

  // The prompt's blocks reached the model: the text and the embedded
  // resource as context.
  auto reqs = test::request_bodies(server);
  BOOST_REQUIRE_GE(reqs.size(), 7u);
  auto first = reqs[0].dump();
  BOOST_CHECK(contains(first, "compute and edit notes.txt"));
  BOOST_CHECK(contains(first, "<context uri=\\\"file://"));
  BOOST_CHECK(contains(first, "context text"));

  // session/load in a new agent process replays the history.
  auto sid = f.get_string("sessionId");
  BOOST_REQUIRE(!sid.empty());
  server.script_chat(test::completion("loaded answer"));
  auto l = client("load", {{"ACP_SESSION", sid}});
  auto& replayed = l["replayed"];
  std::string users, agent;
  for (auto& u : replayed.as_array()) {
    if (u.get_string("sessionUpdate") == "user_message_chunk")
      users += u["content"].get_string("text");
    if (u.get_string("sessionUpdate") == "agent_message_chunk")
      agent += u["content"].get_string("text");
  }
  BOOST_CHECK(contains(users, "compute and edit notes.txt"));
  BOOST_CHECK(contains(agent, "all done"));
  BOOST_CHECK_EQUAL(for_call(replayed, "call_exec").size(), 2u);
  auto replayed_patch = for_call(replayed, "call_patch");
  BOOST_REQUIRE_EQUAL(replayed_patch.size(), 2u);
  BOOST_CHECK_EQUAL(replayed_patch[1].get_string("status"), "completed");
  BOOST_CHECK_EQUAL(l.get_string("stopReason"), "end_turn");
  BOOST_CHECK_EQUAL(l.get_int("loadMissing", 0), -32002);
  // The loaded session's turn continued the stored conversation.
  reqs = test::request_bodies(server);
  BOOST_CHECK(contains(reqs.back().dump(), "compute and edit notes.txt"));
}

BOOST_FIXTURE_TEST_CASE(permission_allow_once_then_reject, fixture) {
  fs::create_directories(work / "build-a");
  fs::create_directories(work / "build-b");
  server.script_chat(tool_reply("call_a", "terminal",
                                args_of({{"command", "rm -rf ./build-a"}})
                                  .dump()));
  server.script_chat(tool_reply("call_b", "terminal",
                                args_of({{"command", "rm -rf ./build-b"}})
                                  .dump()));
  // The answer streams: reasoning, then text, in pieces.
  json::value sse;
  sse["path"] = "/v1/chat/completions";
  sse["status"] = 200;
  sse["headers"]["Content-Type"] = "text/event-stream";
  sse["chunks"] = json::value::make_array();
  auto delta = [&](const char* key, const char* part) {
    json::value d;
    json::value ch;
    ch["index"] = 0;
    ch["delta"][key] = part;
    d["choices"] = json::value::make_array();
    d["choices"].push_back(std::move(ch));
    sse["chunks"].push_back("data: " + d.dump() + "\n\n");
  };
  delta("reasoning_content", "Both dirs ");
  delta("reasoning_content", "were handled.");
  delta("content", "Cleaned ");
  delta("content", "up.");
  sse["chunks"].push_back(R"(data: {"choices":[{"index":0,"delta":{},)"
                          R"("finish_reason":"stop"}]})" "\n\ndata: [DONE]\n\n");
  server.script(sse.dump());
  auto f = client("permission",
                  {{"ACP_PERMISSIONS", "allow_once,reject_once"}});
  BOOST_CHECK_EQUAL(f.get_string("stopReason"), "end_turn");
  BOOST_CHECK_EQUAL(f.get_string("thoughts"), "Both dirs were handled.");
  BOOST_CHECK_EQUAL(f.get_string("answer"), "Cleaned up.");
  auto& perms = f["permissions"];
  BOOST_REQUIRE_EQUAL(perms.size(), 2u);
  auto& p0 = perms.as_array()[0];
  BOOST_CHECK_EQUAL(p0["toolCall"].get_string("toolCallId"), "call_a");
  BOOST_CHECK(contains(p0["toolCall"]["rawInput"].get_string("command"),
                       "rm -rf ./build-a"));
  std::vector<std::string> kinds;
  for (auto& o : p0["options"].as_array())
    kinds.push_back(o.get_string("kind"));
  BOOST_CHECK(has(kinds, "allow_once"));
  BOOST_CHECK(has(kinds, "allow_always"));
  BOOST_CHECK(has(kinds, "reject_once"));
  BOOST_CHECK(has(kinds, "reject_always"));
  BOOST_CHECK(!fs::exists(work / "build-a"));
  BOOST_CHECK(fs::exists(work / "build-b"));
  auto a = for_call(f["toolUpdates"], "call_a");
  auto b = for_call(f["toolUpdates"], "call_b");
  BOOST_REQUIRE_EQUAL(a.size(), 1u);
  BOOST_REQUIRE_EQUAL(b.size(), 1u);
  BOOST_CHECK_EQUAL(a[0].get_string("status"), "completed");
  BOOST_CHECK_EQUAL(b[0].get_string("status"), "failed");
}

BOOST_FIXTURE_TEST_CASE(cancel_mid_turn_and_pending_permission, fixture) {
  fs::create_directories(work / "build-c");
  server.script_chat(tool_reply("call_sleep", "terminal",
                                args_of({{"command", "sleep 120"}}).dump()));
  server.script_chat(tool_reply("call_c", "terminal",
                                args_of({{"command", "rm -rf ./build-c"}})
                                  .dump()));
  // Replies for turns that would go on after a missed cancel.
  server.script_chat(test::completion("not cancelled"), 4);
  auto f = client("cancel", {{"ACP_PERMISSIONS", "never"}});
  BOOST_CHECK_EQUAL(f.get_string("stopReason"), "cancelled");
  BOOST_CHECK_EQUAL(f.get_string("stopReason2"), "cancelled");
  BOOST_CHECK_GE(f.get_int("cancelledPermissions", 0), 1);
  BOOST_CHECK(fs::exists(work / "build-c"));
}

BOOST_FIXTURE_TEST_CASE(unanswered_permission_times_out_as_deny, fixture) {
  fs::create_directories(work / "build-d");
  server.script_chat(tool_reply("call_d", "terminal",
                                args_of({{"command", "rm -rf ./build-d"}})
                                  .dump()));
  server.script_chat(test::completion("gave up"));
  auto f = client("timeout", {{"ACP_PERMISSIONS", "never"}});
  BOOST_CHECK_EQUAL(f.get_string("stopReason"), "end_turn");
  BOOST_CHECK(fs::exists(work / "build-d"));
  auto d = for_call(f["toolUpdates"], "call_d");
  BOOST_REQUIRE_EQUAL(d.size(), 1u);
  BOOST_CHECK_EQUAL(d[0].get_string("status"), "failed");
  BOOST_CHECK_GE(f.get_int("cancelledPermissions", 0), 1);
}

BOOST_FIXTURE_TEST_CASE(client_mcp_server_is_the_sessions_own, fixture) {
  if (!fs::exists(test::mcp_package_entry("server-everything"))) {
    BOOST_TEST_MESSAGE("server-everything missing: skipped");
    return;
  }
  test::everything_http_server remote{"streamableHttp"};
  BOOST_REQUIRE(!remote.url().empty());
  server.script_chat(tool_reply("call_echo", "mcp__everything__echo",
                                args_of({{"message", "ping-acp"}}).dump()));
  server.script_chat(tool_reply("call_remote", "mcp__remote__echo",
                                args_of({{"message", "over-http"}}).dump()));
  server.script_chat(test::completion("echoed"));
  server.script_chat(test::completion("plain answer"));
  auto f = client("mcp", {{"ACP_MCP_HTTP", remote.url()}});
  BOOST_CHECK_EQUAL(f.get_string("stopReason"), "end_turn");
  BOOST_CHECK_EQUAL(f.get_string("stopReason2"), "end_turn");
  auto e = for_call(f["toolUpdates"], "call_echo");
  BOOST_REQUIRE_EQUAL(e.size(), 1u);
  BOOST_CHECK_EQUAL(e[0].get_string("status"), "completed");
  BOOST_CHECK(contains(e[0].dump(), "ping-acp"));
  auto r = for_call(f["toolUpdates"], "call_remote");
  BOOST_REQUIRE_EQUAL(r.size(), 1u);
  BOOST_CHECK_EQUAL(r[0].get_string("status"), "completed");
  BOOST_CHECK(contains(r[0].dump(), "over-http"));
  BOOST_CHECK_EQUAL(f.get_int("sse", 0), -32602);
  auto reqs = test::request_bodies(server);
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  BOOST_CHECK(has(offered_tools(reqs[0]), "mcp__everything__echo"));
  BOOST_CHECK(has(offered_tools(reqs[0]), "mcp__remote__echo"));
  BOOST_CHECK(!has(offered_tools(reqs[3]), "mcp__everything__echo"));
  BOOST_CHECK(!has(offered_tools(reqs[3]), "mcp__remote__echo"));
  BOOST_CHECK(has(offered_tools(reqs[3]), "read_file"));
}

BOOST_FIXTURE_TEST_CASE(modes_commands_and_bad_params, fixture) {
  fs::create_directories(work / "build-e");
  server.script_chat(tool_reply("call_e", "terminal",
                                args_of({{"command", "rm -rf ./build-e"}})
                                  .dump()));
  server.script_chat(test::completion("cleaned"));
  auto f = client("modes");
  BOOST_REQUIRE_EQUAL(f["modeUpdates"].size(), 1u);
  BOOST_CHECK_EQUAL(f["modeUpdates"].as_array()[0].get_string("currentModeId"),
                    "yolo");
  BOOST_CHECK_EQUAL(f["modes"].get_string("currentModeId"), "ask");
  BOOST_CHECK(contains(f.get_string("help"), "/yolo"));
  BOOST_CHECK_EQUAL(f.get_string("helpStop"), "end_turn");
  BOOST_CHECK_EQUAL(f.get_int("badMode", 0), -32602);
  BOOST_CHECK_EQUAL(f.get_int("image", 0), -32602);
  BOOST_CHECK_EQUAL(f.get_int("relativeCwd", 0), -32602);
  BOOST_CHECK_EQUAL(f.get_string("yoloStop"), "end_turn");
  BOOST_CHECK_EQUAL(f["permissions"].size(), 0u);
  BOOST_CHECK(!fs::exists(work / "build-e"));
  BOOST_CHECK(f.get_bool("closeCap", false));
  BOOST_CHECK_EQUAL(f.get_int("afterClose", 0), -32002);
  BOOST_CHECK(f.get_bool("closedTwice", false));
  // /help was answered by the agent: no model call for it.
  BOOST_CHECK_EQUAL(test::request_bodies(server).size(), 2u);
}

// ---------------------------------------------------------------------------
// Raw pipes: what an SDK would never send.

namespace {

struct raw_agent {
  pid_t pid = -1;
  int in = -1;  // its stdin
  int out = -1; // its stdout
  std::string buf;

  raw_agent(const std::string& home, const std::vector<std::string>& extra) {
    int a[2], b[2];
    BOOST_REQUIRE(::pipe2(a, O_CLOEXEC) == 0 && ::pipe2(b, O_CLOEXEC) == 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(a[0], 0);
      ::dup2(b[1], 1);
      int err = ::open((home + "/agent.err").c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(err, 2);
      ::chdir(home.c_str());
      std::vector<std::string> args{"acp"};
      args.insert(args.end(), extra.begin(), extra.end());
      test::exec_cli(home, args);
    }
    ::close(a[0]);
    ::close(b[1]);
    in = a[1];
    out = b[0];
  }
  ~raw_agent() {
    if (in >= 0)
      ::close(in);
    if (pid > 0 && ::waitpid(pid, nullptr, WNOHANG) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out >= 0)
      ::close(out);
  }

  void send(const std::string& text) {
    size_t off = 0;
    while (off < text.size()) {
      auto n = ::write(in, text.data() + off, text.size() - off);
      BOOST_REQUIRE(n > 0);
      off += static_cast<size_t>(n);
    }
  }
  void close_input() {
    ::close(in);
    in = -1;
  }

  // The next line of its stdout (parsed), within 60 s.
  json::value next() {
    auto deadline = steady_clock::now() + seconds(60);
    for (;;) {
      auto nl = buf.find('\n');
      if (nl != std::string::npos) {
        auto line = buf.substr(0, nl);
        buf.erase(0, nl + 1);
        auto parsed = json::parse(line);
        BOOST_REQUIRE_MESSAGE(parsed, "stdout line is no JSON: " + line);
        BOOST_CHECK_EQUAL(parsed.v->get_string("jsonrpc"), "2.0");
        return *parsed.v;
      }
      auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
      BOOST_REQUIRE_MESSAGE(left.count() > 0, "no line from the agent");
      pollfd p{out, POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(left.count()));
      char chunk[65536];
      auto n = ::read(out, chunk, sizeof chunk);
      BOOST_REQUIRE_MESSAGE(n > 0, "the agent closed its stdout");
      buf.append(chunk, static_cast<size_t>(n));
    }
  }
  // The next message that is not a session/update notification.
  json::value next_reply() {
    for (;;) {
      auto m = next();
      if (m.get_string("method") != "session/update")
        return m;
    }
  }

  // Waits (at most 60 s) for the exit; its code (-1 if none).
  int wait_exit() {
    for (int i = 0; i < 3000; ++i) {
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st);
      }
      std::this_thread::sleep_for(milliseconds(20));
    }
    return -1;
  }
};

int64_t error_code(const json::value& m) {
  auto e = m.find("error");
  return e != nullptr && e->is_object() ? e->get_int("code", 0) : 0;
}

const char* init_line =
  R"({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}})"
  "\n";

} // namespace

BOOST_FIXTURE_TEST_CASE(bad_input_gets_errors_and_the_agent_lives, fixture) {
  raw_agent agent{home.path(), acp_args()};
  agent.send("this is not json\n");
  auto m = agent.next();
  BOOST_CHECK_EQUAL(error_code(m), -32700);
  BOOST_CHECK(m["id"].is_null());

  agent.send(R"({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/","mcpServers":[]}})"
             "\n");
  m = agent.next();
  BOOST_CHECK_EQUAL(error_code(m), -32600);
  BOOST_CHECK_EQUAL(m.get_int("id", 0), 1);

  agent.send("[1,2]\n");
  BOOST_CHECK_EQUAL(error_code(agent.next()), -32600);

  agent.send(R"({"jsonrpc":"2.0","id":{"x":1},"method":"initialize"})" "\n");
  BOOST_CHECK_EQUAL(error_code(agent.next()), -32600);

  agent.send(init_line);
  m = agent.next();
  BOOST_CHECK_EQUAL(m.get_string("id"), "init");
  BOOST_CHECK_EQUAL(m["result"].get_int("protocolVersion", 0), 1);

  agent.send(R"({"jsonrpc":"2.0","id":2,"method":"no/such/method","params":{}})"
             "\n");
  m = agent.next();
  BOOST_CHECK_EQUAL(error_code(m), -32601);
  BOOST_CHECK_EQUAL(m.get_int("id", 0), 2);

  // A 9 MiB line: over the 8 MiB cap, discarded as it arrives.
  std::string huge = R"({"jsonrpc":"2.0","id":3,"method":"x","params":{"p":")"
                     + std::string(9u << 20, 'a') + "\"}}\n";
  std::thread writer([&] { agent.send(huge); });
  m = agent.next();
  writer.join();
  BOOST_CHECK_EQUAL(error_code(m), -32600);
  BOOST_CHECK(contains(m.dump(), "limit"));

  // A reply to a request the agent never sent: ignored.
  agent.send(R"({"jsonrpc":"2.0","id":777,"result":{}})" "\n");
  agent.send(R"({"jsonrpc":"2.0","id":4,"method":"session/prompt","params":{"sessionId":"nope","prompt":[{"type":"text","text":"x"}]}})"
             "\n");
  m = agent.next();
  BOOST_CHECK_EQUAL(m.get_int("id", 0), 4);
  BOOST_CHECK_EQUAL(error_code(m), -32002);

  agent.send(R"({"jsonrpc":"2.0","id":5,"method":"initialize","params":{}})"
             "\n");
  BOOST_CHECK_EQUAL(error_code(agent.next()), -32602);

  // At most 1024 open sessions: the next one is refused, a closed one
  // frees its place.
  auto new_session = [&](int id) {
    json::value p;
    p["cwd"] = work.path();
    p["mcpServers"] = json::value::make_array();
    json::value req;
    req["jsonrpc"] = "2.0";
    req["id"] = id;
    req["method"] = "session/new";
    req["params"] = p;
    return req.dump() + "\n";
  };
  std::string first;
  for (int batch = 0; batch < 1024 / 32; ++batch) {
    std::string lines;
    for (int i = 0; i < 32; ++i)
      lines += new_session(1000 + batch * 32 + i);
    agent.send(lines);
    for (int i = 0; i < 32; ++i) {
      auto r = agent.next_reply();
      BOOST_REQUIRE_MESSAGE(r.find("result") != nullptr, r.dump());
      if (first.empty())
        first = r["result"].get_string("sessionId");
    }
  }
  agent.send(new_session(3000));
  m = agent.next_reply();
  BOOST_CHECK_EQUAL(error_code(m), -32603);
  BOOST_CHECK(contains(m.dump(), "too many open sessions"));
  agent.send(R"({"jsonrpc":"2.0","id":3001,"method":"session/close","params":{"sessionId":")"
             + first + "\"}}\n");
  BOOST_CHECK(agent.next_reply().find("result") != nullptr);
  agent.send(new_session(3002));
  BOOST_CHECK(agent.next_reply().find("result") != nullptr);

  agent.close_input();
  BOOST_CHECK_EQUAL(agent.wait_exit(), 0);
}

BOOST_FIXTURE_TEST_CASE(disconnect_mid_turn_exits_cleanly, fixture) {
  // The model answers after a minute: the client is gone long before.
  server.script_chat(test::completion("too late"), 1, 60000);
  raw_agent agent{home.path(), acp_args()};
  agent.send(init_line);
  BOOST_CHECK(agent.next().find("result") != nullptr);
  json::value p;
  p["cwd"] = work.path();
  p["mcpServers"] = json::value::make_array();
  json::value req;
  req["jsonrpc"] = "2.0";
  req["id"] = 1;
  req["method"] = "session/new";
  req["params"] = p;
  agent.send(req.dump() + "\n");
  auto created = agent.next_reply();
  auto sid = created["result"].get_string("sessionId");
  BOOST_REQUIRE(!sid.empty());
  agent.send(R"({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":")"
             + sid + R"(","prompt":[{"type":"text","text":"hello"}]}})" "\n");
  // The turn is waiting on the provider.
  for (int i = 0; i < 3000 && test::request_bodies(server).empty(); ++i)
    std::this_thread::sleep_for(milliseconds(20));
  BOOST_REQUIRE_EQUAL(test::request_bodies(server).size(), 1u);
  agent.close_input();
  BOOST_CHECK_EQUAL(agent.wait_exit(), 0);
  // The log says why.
  BOOST_CHECK(contains(test::slurp(home / "logs/acp.log"),
                       "the client closed the connection"));
}
