// File: tests/support/background_fixture.hpp
//
// The CLI against the scripted provider for agent_background_test: scripts
// that answer the request whose body holds a "match" text (optionally held
// at a gate until released), `mibyan run` and `mibyan chat` children with
// their output in files under the home, the provider's request log read
// back (user texts, tool results), and the store's background children.
// Header-only; include once, after <boost/test/unit_test.hpp>. Waits are
// bounded polls.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/json.hpp"
#include "storage/session_store.hpp"
#include "tests/support/cli_child.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/process.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

struct background_fixture {
  static bool contains(const std::string& s, const std::string& part) {
    return s.find(part) != std::string::npos;
  }

  http_server server;
  temp_dir home;

  process_options env() {
    auto o = cli_options(home.path(), 90);
    return o;
  }

  // Queues `body` for the next request whose body contains `match`.
  void script(const std::string& match, const std::string& body,
              const std::string& hold = {}, int status = 200, int times = 1) {
    json::value s;
    s["path"] = "/v1/chat/completions";
    s["status"] = status;
    s["times"] = times;
    s["body"] = body;
    s["match"] = match;
    if (!hold.empty())
      s["hold"] = hold;
    server.script(s.dump());
  }

  void release(const std::string& gate) {
    json::value g;
    g["gate"] = gate;
    server.control("POST", "/__release", g.dump());
  }

  std::vector<std::string> args(const std::string& command) {
    return {command, "--provider", "custom", "--base-url", server.url("/v1"),
            "--model", "m"};
  }

  std::vector<std::string> run_args(const std::string& session,
                                    const std::string& prompt) {
    auto a = args("run");
    a.insert(a.end(), {"--session", session, prompt});
    return a;
  }

  std::vector<json::value> requests() { return request_bodies(server); }

  // The requests whose messages contain `part`, in order.
  std::vector<json::value> requests_with(const std::string& part) {
    std::vector<json::value> out;
    for (auto& r : requests())
      if (contains(r["messages"].dump(), part))
        out.push_back(r);
    return out;
  }

  template <class F>
  bool wait_for(F cond, int seconds = 30) {
    auto until = std::chrono::steady_clock::now()
                 + std::chrono::seconds{seconds};
    while (std::chrono::steady_clock::now() < until) {
      if (cond())
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds{20});
    }
    return cond();
  }

  void write_config(const std::string& yaml) {
    std::ofstream(home / "config.yaml") << yaml;
  }

  std::shared_ptr<session_store> open_store() {
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    so.read_only = true;
    auto s = session_store::open(so);
    BOOST_REQUIRE_MESSAGE(s, s.error);
    return std::shared_ptr<session_store>(std::move(*s));
  }

  // Background children of `parent` in the store.
  std::vector<session_info> background_children(const std::string& parent) {
    std::vector<session_info> out;
    session_store_options so;
    so.dir = session_store::default_dir(home.path());
    so.read_only = true;
    auto opened = session_store::open(so);
    if (!opened) // not created yet
      return out;
    auto& store = *opened;
    auto kids = store->list_children(parent);
    if (!kids)
      return out;
    for (auto& k : *kids)
      if (auto info = store->get_session(k);
          info && contains(info->metadata_json, "\"background_task\":true"))
        out.push_back(*info);
    return out;
  }

  // The user-role messages of request `r` as text, in order.
  static std::vector<std::string> user_texts(json::value& r) {
    std::vector<std::string> out;
    for (auto& m : r["messages"].as_array())
      if (m.get_string("role") == "user")
        out.push_back(m.get_string("content"));
    return out;
  }

  // The content of the last tool message answering `call_id` in request
  // `r` (the scripted provider numbers every message's calls from call_1).
  static std::string tool_result(json::value& r, const std::string& call_id) {
    std::string out;
    for (auto& m : r["messages"].as_array())
      if (m.get_string("role") == "tool"
          && m.get_string("tool_call_id") == call_id)
        out = m.get_string("content");
    return out;
  }

  // The results of the last assistant message's tool calls, in call
  // order (the runtime renames call ids that repeat in a history).
  static std::vector<std::string> last_results(json::value& r) {
    std::vector<std::string> out;
    for (auto& m : r["messages"].as_array()) {
      auto role = m.get_string("role");
      if (role == "assistant" && m.find("tool_calls") != nullptr
          && m["tool_calls"].is_array() && m["tool_calls"].size() > 0)
        out.clear();
      else if (role == "tool")
        out.push_back(m.get_string("content"));
    }
    return out;
  }

  static std::string last_result(json::value& r, size_t i = 0) {
    auto all = last_results(r);
    return i < all.size() ? all[i] : std::string{};
  }

  // The request's last user message: the new prompt, with the notices
  // delivered before it (the request joins consecutive user messages).
  static std::string last_user(json::value& r) {
    auto u = user_texts(r);
    return u.empty() ? std::string{} : u.back();
  }

  // A started chat: stdin is a pipe, output goes to files in home.
  struct chat_proc {
    pid_t pid = -1;
    int in = -1;
    ~chat_proc() {
      if (in >= 0)
        ::close(in);
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
    }
  };

  void spawn(const std::vector<std::string>& argv, chat_proc& c,
             const std::string& tag) {
    c.pid = spawn_cli(argv, home.path(), home / (tag + ".out"),
                            home / (tag + ".err"), &c.in);
  }

  void send_line(chat_proc& c, const std::string& line) {
    auto data = line + "\n";
    BOOST_REQUIRE_EQUAL(::write(c.in, data.data(), data.size()),
                        static_cast<ssize_t>(data.size()));
  }

  std::string output(const std::string& tag) {
    return slurp(home / (tag + ".out"));
  }

  bool wait_output(const std::string& tag, const std::string& part) {
    return wait_for([&] { return contains(output(tag), part); });
  }

  int finish(chat_proc& c) {
    ::close(c.in);
    c.in = -1;
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    c.pid = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
};

} // namespace mibyan::test
