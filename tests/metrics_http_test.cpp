#define BOOST_TEST_MODULE metrics_http
#include "tests/support/paths.hpp"
#include <boost/test/unit_test.hpp>

// GET /metrics of `mibyan serve` (docs/metrics.md): a real serve child
// process with the scripted provider runs turns with a tool call and an
// execute_code cell, and the scrapes, parsed strictly
// (tests/support/prom_text.hpp), show the counters moved by exactly the
// expected amounts and never going down; who may scrape (key off
// loopback), with an in-process server bound to a non-loopback address.

#include <set>
#include <thread>

#include "base/metrics.hpp"
#include "runtime/runtime.hpp"
#include "serve/http_server.hpp"
#include "serve/metrics_route.hpp"
#include "tests/support/prom_text.hpp"
#include "tests/support/scripted_replies.hpp"
#include "tests/support/ui_client.hpp"

using namespace mibyan;
using namespace std::chrono;
using namespace mibyan::test::serving;
using mibyan::test::ui::header_of;
using mibyan::test::ui::raw_body;
namespace prom = mibyan::test::prom;

namespace {

// A chat completion with usage (11 prompt, 7 completion tokens) and,
// when `tool` is set, one call of it.
std::string completion_with_usage(const std::string& content,
                                  const std::string& tool = {},
                                  const std::string& args = {}) {
  auto body = json::parse(test::completion(content, tool, args));
  BOOST_REQUIRE(body);
  (*body.v)["usage"]["prompt_tokens"] = 11;
  (*body.v)["usage"]["completion_tokens"] = 7;
  (*body.v)["usage"]["total_tokens"] = 18;
  return body.v->dump();
}

// One scrape: status 200, the exposition Content-Type, a strict parse.
prom::document scrape(uint16_t port, const std::string& headers = {}) {
  auto r = http(port, "GET", "/metrics", {}, headers);
  BOOST_REQUIRE_MESSAGE(status_of(r) == 200, r);
  BOOST_CHECK_EQUAL(header_of(r, "content-type"),
                    "text/plain; version=0.0.4; charset=utf-8");
  auto text = raw_body(r);
  auto doc = prom::parse(text);
  BOOST_REQUIRE_MESSAGE(doc.error.empty(), doc.error << "\n" << text);
  // Stable output: families in name order.
  for (size_t i = 1; i < doc.families.size(); ++i)
    BOOST_CHECK_LT(doc.families[i - 1].name, doc.families[i].name);
  return doc;
}

double at(const prom::document& d, const std::string& key) {
  auto it = d.values.find(key);
  return it == d.values.end() ? 0.0 : it->second;
}

// The sum of the samples of `name` whose labels include `match`.
double sum_of(const prom::document& d, const std::string& name,
              const std::map<std::string, std::string>& match = {}) {
  double s = 0;
  for (auto& f : d.families)
    for (auto& x : f.samples) {
      if (x.name != name)
        continue;
      bool ok = true;
      for (auto& [k, v] : match)
        ok = ok && x.labels.count(k) && x.labels.at(k) == v;
      if (ok)
        s += x.value;
    }
  return s;
}

// Every counter sample and histogram bucket/count of `before` is in
// `after` with a value at least as large.
void check_monotonic(const prom::document& before,
                     const prom::document& after) {
  for (auto& f : before.families) {
    if (f.type != "counter" && f.type != "histogram")
      continue;
    for (auto& s : f.samples) {
      if (s.name == f.name + "_sum")
        continue;
      auto key = prom::series_key(s.name, s.labels);
      auto it = after.values.find(key);
      BOOST_CHECK_MESSAGE(it != after.values.end(), key << " disappeared");
      if (it != after.values.end())
        BOOST_CHECK_MESSAGE(it->second >= s.value,
                            key << " went down: " << s.value << " -> "
                                << it->second);
    }
  }
}

std::string chat(const std::string& prompt) {
  return R"({"model":"m","messages":[{"role":"user","content":")" + prompt
         + R"("}]})";
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(metrics_http, fixture)

BOOST_AUTO_TEST_CASE(turns_with_tools_move_the_counters_by_exactly_that) {
  auto file = home.write("note.txt", "a note for the metrics test\n");
  auto sp = start("code_execution:\n  prestart_kernels: 0\n",
                  {"--toolsets", "file,code_execution"});
  auto s0 = scrape(sp->port);
  // Nothing ran yet: no kernel, no turn.
  BOOST_CHECK_EQUAL(at(s0, "mibyan_kernels_started_total{}"), 0);
  BOOST_CHECK_EQUAL(sum_of(s0, "mibyan_turns_total"), 0);

  // Turn 1: read_file, then the answer. Turn 2: execute_code, then the
  // answer. Each model call reports 11 + 7 tokens.
  json::value rf;
  rf["path"] = file;
  script(completion_with_usage("", "read_file", rf.dump()));
  script(completion_with_usage("done one"));
  json::value ec;
  ec["code"] = "print(6 * 7)";
  script(completion_with_usage("", "execute_code", ec.dump()));
  script(completion_with_usage("done two"));
  auto r1 = http(sp->port, "POST", "/v1/chat/completions", chat("one"));
  BOOST_REQUIRE_MESSAGE(status_of(r1) == 200, r1);
  BOOST_CHECK(contains(r1, "done one"));
  auto r2 = http(sp->port, "POST", "/v1/chat/completions", chat("two"));
  BOOST_REQUIRE_MESSAGE(status_of(r2) == 200, r2);
  BOOST_CHECK(contains(r2, "done two"));
  // The tool results reached the model.
  auto reqs = provider_requests();
  BOOST_REQUIRE_EQUAL(reqs.size(), 4u);
  BOOST_CHECK(contains(reqs[1].dump(), "a note for the metrics test"));
  BOOST_CHECK(contains(reqs[3].dump(), "42"));

  auto s1 = scrape(sp->port);
  check_monotonic(s0, s1);
  auto delta = [&](const std::string& key) { return at(s1, key) - at(s0, key); };
  BOOST_CHECK_EQUAL(delta(R"(mibyan_turns_total{exit="completed",outcome="ok"})"), 2);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_turns_total") - sum_of(s0, "mibyan_turns_total"), 2);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_turn_duration_seconds_count{outcome="ok"})"), 2);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tool_calls_total{outcome="ok",tool="read_file"})"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tool_calls_total{outcome="ok",tool="execute_code"})"), 1);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_tool_calls_total") - sum_of(s0, "mibyan_tool_calls_total"), 2);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tool_duration_seconds_count{tool="read_file"})"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tool_duration_seconds_count{tool="execute_code"})"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_provider_calls_total{outcome="ok",provider="custom"})"), 4);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_provider_call_duration_seconds_count{provider="custom"})"), 4);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_provider_errors_total"), 0);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_provider_retries_total"), 0);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tokens_total{kind="input",model="m",provider="custom"})"), 44);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tokens_total{kind="output",model="m",provider="custom"})"), 28);
  BOOST_CHECK_EQUAL(delta("mibyan_kernels_started_total{}"), 1);
  BOOST_CHECK_LE(at(s1, "mibyan_kernels_alive{}"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_http_requests_total{route="chat",status="200"})"), 2);
  // The first scrape was counted once it was answered.
  BOOST_CHECK_EQUAL(delta(R"(mibyan_http_requests_total{route="metrics",status="200"})"), 1);
  BOOST_CHECK_GE(at(s1, "mibyan_http_connections_open{}"), 1);
  // No command needed approval (the sandboxed kernel is approved as such).
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_approvals_total"), 0);
  // The sandbox the kernel used, as an info gauge.
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_sandbox_info", {{"setting", "auto"}}), 1);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_sandbox_info"), 1);
  // The store committed the sessions and has pages in use.
  BOOST_CHECK_GT(delta("mibyan_store_commit_duration_seconds_count{}"), 0);
  BOOST_CHECK_GT(at(s1, "mibyan_store_used_bytes{}"), 0);
  BOOST_CHECK_GT(at(s1, "mibyan_store_file_bytes{}"), 0);
  // A serve without a cluster or MCP servers: the families, no samples.
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_cluster_members"), 0);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_mcp_servers"), 0);

  // Turn 3: the provider refuses (400, not retried): a failed turn, a
  // failed model call, one error, no retry.
  provider.script(R"({"path":"/v1/chat/completions","status":400,)"
                  R"("body":"{\"error\":{\"message\":\"bad request\"}}"})");
  auto r3 = http(sp->port, "POST", "/v1/chat/completions", chat("three"));
  BOOST_CHECK_GE(status_of(r3), 400);
  auto s2 = scrape(sp->port);
  check_monotonic(s1, s2);
  auto delta2 = [&](const std::string& key) { return at(s2, key) - at(s1, key); };
  BOOST_CHECK_EQUAL(sum_of(s2, "mibyan_turns_total", {{"outcome", "failed"}})
                      - sum_of(s1, "mibyan_turns_total", {{"outcome", "failed"}}),
                    1);
  BOOST_CHECK_EQUAL(delta2(R"(mibyan_provider_calls_total{outcome="error",provider="custom"})"), 1);
  BOOST_CHECK_EQUAL(sum_of(s2, "mibyan_provider_errors_total", {{"provider", "custom"}}), 1);
  BOOST_CHECK_EQUAL(sum_of(s2, "mibyan_provider_retries_total"), 0);
  BOOST_CHECK_EQUAL(sum_of(s2, "mibyan_tool_calls_total") - sum_of(s1, "mibyan_tool_calls_total"), 0);
  BOOST_CHECK_EQUAL(delta2(R"(mibyan_http_requests_total{route="metrics",status="200"})"), 1);

  // Bad requests are counted by route and status too, and /health is open.
  check_error(http(sp->port, "GET", "/nowhere"), 404, "not_found");
  check_error(http(sp->port, "POST", "/metrics"), 405, "method_not_allowed");
  auto h = http(sp->port, "GET", "/health");
  BOOST_CHECK_EQUAL(status_of(h), 200);
  auto s3 = scrape(sp->port);
  check_monotonic(s2, s3);
  BOOST_CHECK_EQUAL(at(s3, R"(mibyan_http_requests_total{route="other",status="404"})")
                      - at(s2, R"(mibyan_http_requests_total{route="other",status="404"})"),
                    1);
  BOOST_CHECK_EQUAL(at(s3, R"(mibyan_http_requests_total{route="metrics",status="405"})")
                      - at(s2, R"(mibyan_http_requests_total{route="metrics",status="405"})"),
                    1);
  BOOST_CHECK_EQUAL(at(s3, R"(mibyan_http_requests_total{route="health",status="200"})")
                      - at(s2, R"(mibyan_http_requests_total{route="health",status="200"})"),
                    1);
  // No label names a session.
  for (auto& f : s3.families)
    for (auto& x : f.samples)
      for (auto& [k, v] : x.labels)
        BOOST_CHECK_MESSAGE(!contains(k, "session") && !contains(v, "@"),
                            x.name << " " << k << "=" << v);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(approvals_answered_over_http_count_by_decision) {
  // approvals.http: pending (docs/approvals.md): a flagged command waits
  // in GET /v1/approvals; the answers posted there count as decisions.
  test::temp_dir work;
  cwd = work.path();
  auto sp = start("approvals:\n  http: pending\n  timeout: 60\n");
  auto s0 = scrape(sp->port);
  for (std::string choice : {"once", "deny"}) {
    work.write("out/artifact.o", "object code\n");
    json::value a;
    a["command"] = "rm -rf ./out";
    a["workdir"] = work.path();
    script(test::completion("", "terminal", a.dump()));
    script(test::completion("finished " + choice));
    std::string turn;
    std::thread t{[&] {
      turn = http(sp->port, "POST", "/v1/chat/completions", chat(choice));
    }};
    std::string id;
    auto deadline = steady_clock::now() + seconds{60};
    while (id.empty() && steady_clock::now() < deadline) {
      auto data = body_of(http(sp->port, "GET", "/v1/approvals"))["data"];
      if (data.is_array() && data.size() == 1)
        id = data.as_array()[0].get_string("id", "");
      else
        std::this_thread::sleep_for(milliseconds{20});
    }
    BOOST_CHECK(!id.empty());
    auto r = http(sp->port, "POST", "/v1/approvals/" + id,
                  R"({"choice":")" + choice + R"("})");
    BOOST_CHECK_EQUAL(status_of(r), 200);
    t.join();
    BOOST_CHECK_MESSAGE(status_of(turn) == 200 && contains(turn, "finished"),
                        turn);
  }
  auto s1 = scrape(sp->port);
  check_monotonic(s0, s1);
  auto delta = [&](const std::string& key) { return at(s1, key) - at(s0, key); };
  BOOST_CHECK_EQUAL(delta(R"(mibyan_approvals_total{decision="once"})"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_approvals_total{decision="deny"})"), 1);
  BOOST_CHECK_EQUAL(sum_of(s1, "mibyan_approvals_total")
                      - sum_of(s0, "mibyan_approvals_total"),
                    2);
  // The approved command ran; the denied one answered with its denial.
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tool_calls_total{outcome="ok",tool="terminal"})"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_tool_calls_total{outcome="error",tool="terminal"})"), 1);
  BOOST_CHECK_EQUAL(delta(R"(mibyan_http_requests_total{route="approvals",status="200"})")
                      >= 2,
                    true);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(mcp_servers_show_by_state) {
  // A configured MCP server whose command does not exist: the runtime's
  // scrape-time gauge shows one server, failed.
  auto sp = start("mcp_servers:\n  broken:\n    command: "
                  "/nonexistent/mibyan-mcp-server\n    connect_timeout: 2\n");
  prom::document doc;
  auto deadline = steady_clock::now() + seconds{30};
  do {
    doc = scrape(sp->port);
    if (at(doc, R"(mibyan_mcp_servers{state="failed"})") == 1)
      break;
    std::this_thread::sleep_for(milliseconds{50});
  } while (steady_clock::now() < deadline);
  BOOST_CHECK_EQUAL(at(doc, R"(mibyan_mcp_servers{state="failed"})"), 1);
  BOOST_CHECK_EQUAL(sum_of(doc, "mibyan_mcp_servers"), 1);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(a_keyed_serve_needs_the_bearer_for_metrics) {
  key = "metrics-test-key-123";
  auto sp = start();
  check_error(http(sp->port, "GET", "/metrics"), 401, "invalid_api_key");
  check_error(http(sp->port, "GET", "/metrics", {},
                   "Authorization: Bearer metrics-test-key-124\r\n"),
              401, "invalid_api_key");
  auto doc = scrape(sp->port, "Authorization: bearer " + key + "\r\n");
  BOOST_CHECK(!doc.families.empty());
  // /health stays open.
  BOOST_CHECK_EQUAL(status_of(http(sp->port, "GET", "/health")), 200);
  BOOST_CHECK_EQUAL(sp->stop(), 0);
}

BOOST_AUTO_TEST_CASE(metrics_off_loopback_need_a_key) {
  // An in-process server bound to every address (not loopback): without
  // a key /metrics is refused (403), /health is open; with a key the
  // bearer opens it. The CLI refuses such a bind without a key anyway
  // (cli/serve_command.cpp); this is the server's own guard.
  options opts;
  opts.home = home.path();
  opts.code_execution.prestart_kernels = 0;
  std::string err;
  auto made = create_runtime(opts);
  BOOST_REQUIRE_MESSAGE(made, made.error);
  auto rt = std::move(*made);
  for (std::string k : {std::string{}, std::string{"in-process-key"}}) {
    http_server_settings st;
    st.host = "0.0.0.0";
    st.port = 0;
    st.key = k;
    st.limits = opts.server;
    st.model_id = "m";
    st.new_session_id = [] { return std::string{"s"}; };
    auto started = http_server::start(*rt, st);
    BOOST_REQUIRE_MESSAGE(started.ok(), started.error);
    auto server = std::move(*started);
    auto port = server->port();
    BOOST_CHECK_EQUAL(status_of(http(port, "GET", "/health")), 200);
    if (k.empty()) {
      check_error(http(port, "GET", "/metrics"), 403, "metrics_need_key");
    } else {
      check_error(http(port, "GET", "/metrics"), 401, "invalid_api_key");
      auto doc = scrape(port, "Authorization: Bearer " + k + "\r\n");
      BOOST_CHECK(!doc.families.empty());
    }
    server->shutdown(seconds{5});
  }
  // Which binds count as loopback.
  for (auto h : {"127.0.0.1", "127.1.2.3", "::1", "localhost",
                 "::ffff:127.0.0.1"})
    BOOST_CHECK_MESSAGE(serve::loopback_bind(h), h);
  for (auto h : {"0.0.0.0", "::", "10.0.0.1", "192.168.1.1", "example.com",
                 ""})
    BOOST_CHECK_MESSAGE(!serve::loopback_bind(h), h);
  // On loopback without a key the scrape is open.
  auto r = serve::metrics_response("127.0.0.1", "", "");
  BOOST_CHECK_EQUAL(r.status, 200);
  BOOST_CHECK(contains(r.body, "# TYPE mibyan_turns_total counter"));
}

BOOST_AUTO_TEST_SUITE_END()
