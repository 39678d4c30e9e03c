// File: tests/support/provider_fixture.hpp
//
// The provider actor (actors/provider.hpp) against the scripted HTTP
// server, for provider_actor_test: its own actor system, the provider keys
// of the environment saved and cleared, JSON and SSE scripts, endpoints and
// settings with fast retries, one request run from a scoped actor that is
// also the delta sink, and OpenAI and Anthropic stream builders.
// Header-only; include once, after <boost/test/unit_test.hpp>.
#pragma once

#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "actors/provider.hpp"
#include "base/http_client.hpp"
#include "base/json.hpp"
#include "messages/type_ids.hpp"
#include "tests/support/http_server.hpp"

namespace mibyan::test::provider_cases {

using namespace std::chrono;

struct delta {
  std::string request_id;
  std::string kind;
  std::string text;
};

struct outcome {
  std::optional<chat_response> resp;
  caf::error err;
  std::vector<delta> deltas;
  double secs = 0;

  std::string text(const std::string& kind) const {
    std::string out;
    for (auto& d : deltas)
      if (d.kind == kind)
        out += d.text;
    return out;
  }
};

inline std::string error_text(const caf::error& err) {
  if (!err)
    return "(no error)"; // context() of an empty error is invalid
  auto& ctx = err.context();
  if (!ctx.empty() && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return caf::to_string(err);
}

inline bool is_ec(const caf::error& err, ec code) {
  return err && err.category() == caf::atom("mibyan")
         && err.code() == static_cast<uint8_t>(code);
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

inline std::string sse(const std::string& json_text) {
  return "data: " + json_text + "\n\n";
}

inline std::string anthropic_event(const std::string& name,
                                   const std::string& json_text) {
  return "event: " + name + "\ndata: " + json_text + "\n\n";
}

const char* const provider_vars[] = {"OPENAI_API_KEY", "OPENROUTER_API_KEY",
                                     "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY",
                                     "VLLM_API_KEY", "CUSTOM_API_KEY"};

struct provider_fixture {
  test::http_server server;
  caf::actor_system_config cfg;
  std::unique_ptr<caf::actor_system> sys;
  std::shared_ptr<http_client> http = std::make_shared<http_client>();
  std::vector<provider_actor> actors;
  std::map<std::string, std::optional<std::string>> saved_env;

  provider_fixture() {
    cfg.add_message_types<caf::id_block::mibyan>();
    cfg.set("scheduler.max-threads", size_t{2});
    cfg.set("scheduler.policy", caf::atom("sharing"));
    sys = std::make_unique<caf::actor_system>(cfg);
    for (auto name : provider_vars) {
      auto v = std::getenv(name);
      saved_env[name] = v ? std::optional<std::string>{v} : std::nullopt;
      ::unsetenv(name);
    }
  }

  ~provider_fixture() {
    for (auto& a : actors)
      caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    actors.clear();
    sys.reset();
    http.reset();
    for (auto& [name, v] : saved_env)
      if (v)
        ::setenv(name.c_str(), v->c_str(), 1);
      else
        ::unsetenv(name.c_str());
  }

  // -- server scripting ------------------------------------------------------

  void script_json(const std::string& path, int status,
                   const std::string& body, int times = 1,
                   json::value headers = json::value::make_object(),
                   int delay_ms = 0) {
    json::value s;
    s["path"] = path;
    s["status"] = status;
    s["body"] = body;
    s["times"] = times;
    s["headers"] = std::move(headers);
    if (delay_ms > 0)
      s["delay_ms"] = delay_ms;
    server.script(s.dump());
  }

  void script_stream(const std::string& path,
                     const std::vector<std::string>& chunks,
                     int chunk_ms = 0, int times = 1) {
    json::value s;
    s["path"] = path;
    s["status"] = 200;
    auto arr = json::value::make_array();
    for (auto& c : chunks)
      arr.push_back(c);
    s["chunks"] = std::move(arr);
    s["chunk_ms"] = chunk_ms;
    s["times"] = times;
    s["headers"]["Content-Type"] = "text/event-stream";
    server.script(s.dump());
  }

  json::value requests() {
    auto parsed = json::parse(server.requests());
    BOOST_REQUIRE(parsed);
    return *parsed.v;
  }

  // -- actors ----------------------------------------------------------------

  result<provider_endpoint>
  endpoint(const std::string& provider, const std::string& path,
           const std::string& key = "sk-test-0123456789",
           const std::string& model = "test-model") {
    options opts;
    return resolve_endpoint({provider, server.url(path), model, key}, opts);
  }

  provider_settings settings(result<provider_endpoint> main) {
    provider_settings s;
    s.main = std::move(main);
    s.retry.max_attempts = 3;
    s.retry.backoff_scale = 0.01;
    s.random = [] { return 0.5; };
    s.request_timeout = seconds{20};
    s.stream_idle_timeout = seconds{10};
    s.connect_timeout = seconds{5};
    return s;
  }

  provider_actor spawn(provider_settings s) {
    auto a = spawn_provider(*sys, http, std::move(s));
    actors.push_back(a);
    return a;
  }

  provider_actor spawn_custom() {
    return spawn(settings(endpoint("custom", "/v1")));
  }

  static chat_request make_request(const std::string& id, bool stream) {
    chat_request req;
    req.request_id = id;
    req.stream = stream;
    req.messages.push_back(chat_message{"system", "You are terse."});
    req.messages.push_back(chat_message{"user", "Say hello."});
    return req;
  }

  // Runs one request from a scoped actor that is also the delta sink, so
  // every delta is in its mailbox before the response (same sender).
  outcome run(provider_actor p, chat_request req) {
    caf::scoped_actor self{*sys};
    req.sink = caf::actor_cast<caf::actor>(self.ptr());
    outcome out;
    auto t0 = steady_clock::now();
    self->request(p, seconds{30}, complete_atom_v, std::move(req))
      .receive([&](chat_response& r) { out.resp = std::move(r); },
               [&](caf::error& e) { out.err = std::move(e); });
    out.secs = duration<double>(steady_clock::now() - t0).count();
    drain(self, out.deltas);
    return out;
  }

  static void drain(caf::scoped_actor& self, std::vector<delta>& into) {
    bool more = true;
    while (more)
      self->receive(
        [&](delta_atom, const std::string& id, const std::string& kind,
            const std::string& text) { into.push_back({id, kind, text}); },
        caf::after(milliseconds{0}) >> [&] { more = false; });
  }
};

// An OpenAI chunk with `delta` and optional finish reason / usage.
inline std::string oa_chunk(const std::string& delta_json,
                            const std::string& finish = "null",
                            const std::string& usage = "") {
  std::string s = R"({"id":"c1","object":"chat.completion.chunk",)"
                  R"("model":"test-model","choices":[{"index":0,"delta":)"
                  + delta_json + R"(,"finish_reason":)" + finish + "}]";
  if (!usage.empty())
    s += R"(,"usage":)" + usage;
  return sse(s + "}");
}

const char* const ok_body
  = R"({"id":"x","object":"chat.completion","model":"test-model",)"
    R"("choices":[{"index":0,"message":{"role":"assistant",)"
    R"("content":"Hello there"},"finish_reason":"stop"}],)"
    R"("usage":{"prompt_tokens":12,"completion_tokens":3,)"
    R"("total_tokens":15}})";

inline std::vector<std::string> text_stream(const std::string& text) {
  std::vector<std::string> chunks;
  chunks.push_back(oa_chunk(R"({"role":"assistant","content":""})"));
  for (char c : text)
    chunks.push_back(oa_chunk(R"({"content":")" + std::string(1, c)
                              + R"("})"));
  chunks.push_back(oa_chunk("{}", R"("stop")",
                            R"({"prompt_tokens":5,"completion_tokens":2})"));
  chunks.push_back(sse("[DONE]"));
  return chunks;
}


} // namespace mibyan::test::provider_cases
