#include "base/runtime_metrics.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>

namespace mibyan::metrics {

namespace {

registry& reg() { return registry::global(); }

// Seconds: tools and provider calls (1 ms .. 10 min).
const std::vector<double>& call_buckets() {
  static const std::vector<double> b{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                     0.1,   0.25,   0.5,   1,    2.5,   5,
                                     10,    30,     60,    120,  300,   600};
  return b;
}

// Seconds: whole turns (10 ms .. 30 min).
const std::vector<double>& turn_buckets() {
  static const std::vector<double> b{0.01, 0.05, 0.1, 0.25, 0.5, 1,   2.5, 5,
                                     10,   30,   60,  120,  300, 600, 1800};
  return b;
}

// Seconds: LMDB commits (fsync) and HTTP requests (50 us .. 10 s).
const std::vector<double>& short_buckets() {
  static const std::vector<double> b{0.00005, 0.0001, 0.00025, 0.0005,
                                     0.001,   0.0025, 0.005,   0.01,
                                     0.025,   0.05,   0.1,     0.25,
                                     0.5,     1,      2.5,     10};
  return b;
}

template <size_t N>
std::string_view one_of(std::string_view v, const std::string_view (&set)[N]) {
  return std::find(std::begin(set), std::end(set), v) != std::end(set)
           ? v
           : std::string_view{"other"};
}

constexpr std::string_view turn_outcomes[] = {"ok", "partial", "failed",
                                              "interrupted", "not_started"};
constexpr std::string_view turn_exits[] = {
  "completed",          "interrupted_by_user",      "budget_exhausted",
  "max_iterations_reached", "guardrail_halt",       "empty_response_exhausted",
  "invalid_tool_calls", "truncated",                "provider_error",
  "error",              "none"};
constexpr std::string_view tool_outcomes[] = {"ok", "error", "timeout",
                                              "interrupted", "cancelled"};
constexpr std::string_view provider_outcomes[] = {"ok", "error",
                                                  "cancelled"};
constexpr std::string_view approval_decisions[] = {
  "once",        "session",          "always",        "deny",
  "timeout",     "cancelled",        "no_channel",    "reviewer_approve",
  "reviewer_deny", "context_approve", "hardline",     "deny_rule",
  "sudo_stdin"};
constexpr std::string_view http_routes[] = {
  "health",    "metrics",        "models",    "chat",  "sessions",
  "approvals", "clarifications", "responses", "ui_api", "ui"};

counter_family& turns() {
  static auto& f = reg().counter(
    "mibyan_turns_total",
    "Turns of conversations that ended, by outcome and exit reason.",
    {"outcome", "exit"});
  return f;
}

histogram_family& turn_seconds() {
  static auto& f = reg().histogram(
    "mibyan_turn_duration_seconds",
    "Wall-clock time of a turn, from its start to its answer, by outcome.",
    {"outcome"}, turn_buckets());
  return f;
}

counter_family& tool_calls() {
  static auto& f = reg().counter(
    "mibyan_tool_calls_total", "Tool calls that ran, by tool and outcome.",
    {"tool", "outcome"});
  return f;
}

histogram_family& tool_seconds() {
  static auto& f = reg().histogram(
    "mibyan_tool_duration_seconds", "Time a tool call ran, by tool.",
    {"tool"}, call_buckets());
  return f;
}

counter_family& provider_calls() {
  static auto& f = reg().counter(
    "mibyan_provider_calls_total",
    "Model calls that ended (after retries and fallbacks), by the provider "
    "that answered last and outcome.",
    {"provider", "outcome"});
  return f;
}

histogram_family& provider_seconds() {
  static auto& f = reg().histogram(
    "mibyan_provider_call_duration_seconds",
    "Time of a model call including retries and fallbacks, by provider.",
    {"provider"}, call_buckets());
  return f;
}

counter_family& provider_errors() {
  static auto& f = reg().counter(
    "mibyan_provider_errors_total",
    "Failed attempts of model calls, by provider and failure class.",
    {"provider", "class"});
  return f;
}

counter_family& provider_retries() {
  static auto& f = reg().counter(
    "mibyan_provider_retries_total",
    "Failed attempts retried on the same provider, by provider and "
    "failure class.",
    {"provider", "class"});
  return f;
}

counter_family& provider_fallbacks() {
  static auto& f = reg().counter(
    "mibyan_provider_fallbacks_total",
    "Model calls that gave a provider up for the next fallback endpoint.",
    {"provider"});
  return f;
}

counter_family& tokens() {
  static auto& f = reg().counter(
    "mibyan_tokens_total",
    "Tokens reported by providers, by provider, model and kind (input, "
    "output, cache_read, cache_write, reasoning).",
    {"provider", "model", "kind"}, 1000);
  return f;
}

counter_family& approvals() {
  static auto& f = reg().counter(
    "mibyan_approvals_total",
    "Decisions on commands that needed approval or were blocked, by "
    "decision.",
    {"decision"});
  return f;
}

gauge& kernels_alive() {
  static auto& g = reg()
                     .gauge("mibyan_kernels_alive",
                            "Python kernels (execute_code) running now.")
                     .with({});
  return g;
}

counter& kernels_started() {
  static auto& c = reg()
                     .counter("mibyan_kernels_started_total",
                              "Python kernels (execute_code) started.")
                     .with({});
  return c;
}

histogram& store_commit() {
  static auto& h = reg()
                     .histogram("mibyan_store_commit_duration_seconds",
                                "Time of one LMDB write-transaction commit "
                                "of the session store (with its fsync).",
                                {}, short_buckets())
                     .with({});
  return h;
}

counter_family& http_requests() {
  static auto& f = reg().counter(
    "mibyan_http_requests_total",
    "HTTP requests answered by mibyan serve, by route class and status.",
    {"route", "status"});
  return f;
}

histogram_family& http_seconds() {
  static auto& f = reg().histogram(
    "mibyan_http_request_duration_seconds",
    "Time from a request's head to the end of its response, by route "
    "class.",
    {"route"}, short_buckets());
  return f;
}

// The sandbox state: indexes into the value sets below.
constexpr std::string_view sandbox_settings[] = {"auto", "required", "off"};
constexpr std::string_view sandbox_kernels[] = {"bwrap", "none"};
struct sandbox_state {
  std::mutex mtx;
  std::string setting; // "" = not known yet
  std::string kernels; // "" = unknown
};

// Leaked: a scrape may run while the process exits.
sandbox_state& sandbox_now() {
  static auto* s = new sandbox_state;
  return *s;
}

callback_family& sandbox_info() {
  static auto& f = reg().callback_gauge(
    "mibyan_sandbox_info",
    "The kernel sandbox: code_execution.sandbox and what started kernels "
    "use (bwrap, none; unknown before the first kernel). Always 1.",
    {"setting", "kernels"});
  // For the life of the process: the family lives in the never-destroyed
  // registry, so the handle may detach at exit. (A heap handle nobody
  // points to would be a leak to LeakSanitizer.)
  static callback_family::handle hook =
    f.attach([](sample_sink& out) {
      auto& s = sandbox_now();
      std::lock_guard<std::mutex> g{s.mtx};
      if (s.setting.empty())
        return;
      out.add({s.setting, s.kernels.empty() ? std::string_view{"unknown"}
                                            : std::string_view{s.kernels}},
              1);
    });
  (void)hook;
  return f;
}

gauge& start_time() {
  static auto& g = [&]() -> gauge& {
    auto& x = reg()
                .gauge("mibyan_process_start_time_seconds",
                       "Start of the process (Unix time): counters reset "
                       "only when this changes.")
                .with({});
    x.set(std::chrono::duration<double>(
            std::chrono::system_clock::now().time_since_epoch())
            .count());
    return x;
  }();
  return g;
}

} // namespace

void count_turn(std::string_view outcome, std::string_view exit,
                double seconds) {
  outcome = one_of(outcome, turn_outcomes);
  turns().with({outcome, one_of(exit, turn_exits)}).inc();
  turn_seconds().with({outcome}).observe(seconds);
}

void count_turn_not_started() {
  turns().with({"not_started", "none"}).inc();
}

void count_tool_call(std::string_view tool, std::string_view outcome,
                     double seconds) {
  tool_calls().with({tool, one_of(outcome, tool_outcomes)}).inc();
  tool_seconds().with({tool}).observe(seconds);
}

void count_provider_call(std::string_view provider, std::string_view outcome,
                         double seconds) {
  provider_calls().with({provider, one_of(outcome, provider_outcomes)}).inc();
  provider_seconds().with({provider}).observe(seconds);
}

void count_provider_error(std::string_view provider, std::string_view cls) {
  provider_errors().with({provider, cls}).inc();
}

void count_provider_retry(std::string_view provider, std::string_view cls) {
  provider_retries().with({provider, cls}).inc();
}

void count_provider_fallback(std::string_view provider) {
  provider_fallbacks().with({provider}).inc();
}

void count_tokens(std::string_view provider, std::string_view model,
                  int64_t input, int64_t output, int64_t cache_read,
                  int64_t cache_write, int64_t reasoning) {
  auto add = [&](std::string_view kind, int64_t n) {
    if (n > 0)
      tokens().with({provider, model, kind}).inc(static_cast<uint64_t>(n));
  };
  add("input", input);
  add("output", output);
  add("cache_read", cache_read);
  add("cache_write", cache_write);
  add("reasoning", reasoning);
}

void count_approval(std::string_view decision) {
  approvals().with({one_of(decision, approval_decisions)}).inc();
}

live_kernel::live_kernel() {
  kernels_started().inc();
  kernels_alive().inc();
}

live_kernel::~live_kernel() { kernels_alive().dec(); }

void note_sandbox(std::string_view setting, std::string_view kernels) {
  sandbox_info();
  auto& s = sandbox_now();
  std::lock_guard<std::mutex> g{s.mtx};
  if (!setting.empty())
    s.setting = std::string{one_of(setting, sandbox_settings)};
  if (!kernels.empty())
    s.kernels = std::string{one_of(kernels, sandbox_kernels)};
}

void observe_store_commit(double seconds) { store_commit().observe(seconds); }

void count_http_request(std::string_view route, int status, double seconds) {
  route = one_of(route, http_routes);
  char code[8];
  int s = status >= 100 && status <= 599 ? status : 0;
  std::snprintf(code, sizeof code, "%d", s);
  http_requests().with({route, s == 0 ? "other" : code}).inc();
  http_seconds().with({route}).observe(seconds);
}

std::string_view http_route_class(std::string_view path) {
  auto starts = [&](std::string_view p) {
    return path.size() >= p.size() && path.substr(0, p.size()) == p
           && (path.size() == p.size() || path[p.size()] == '/'
               || path[p.size()] == '?');
  };
  if (starts("/health"))
    return "health";
  if (starts("/metrics"))
    return "metrics";
  if (starts("/v1/models"))
    return "models";
  if (starts("/v1/chat/completions"))
    return "chat";
  if (starts("/v1/sessions"))
    return "sessions";
  if (starts("/v1/approvals"))
    return "approvals";
  if (starts("/v1/clarifications"))
    return "clarifications";
  if (starts("/v1/responses"))
    return "responses";
  if (starts("/ui/api"))
    return "ui_api";
  if (starts("/ui"))
    return "ui";
  return "other";
}

gauge& http_connections_open() {
  static auto& g = reg()
                     .gauge("mibyan_http_connections_open",
                            "HTTP connections of mibyan serve open now.")
                     .with({});
  return g;
}

callback_family& store_used_bytes() {
  static auto& f = reg().callback_gauge(
    "mibyan_store_used_bytes",
    "Bytes the session store's data take now (pages in use less the free "
    "list), summed over the stores open in this process.");
  return f;
}

callback_family& store_file_bytes() {
  static auto& f = reg().callback_gauge(
    "mibyan_store_file_bytes",
    "Bytes the session store's data file occupies on disk, summed over "
    "the stores open in this process.");
  return f;
}

callback_family& cluster_members() {
  static auto& f = reg().callback_gauge(
    "mibyan_cluster_members",
    "Members of the cluster as this node sees them (itself included), by "
    "state (up, suspect, draining, lost, left).",
    {"state"});
  return f;
}

callback_family& mcp_servers() {
  static auto& f = reg().callback_gauge(
    "mibyan_mcp_servers",
    "Configured MCP servers by connection state (idle, connecting, "
    "connected, failed, closed).",
    {"state"});
  return f;
}

void register_all() {
  static std::once_flag once;
  std::call_once(once, [] {
    start_time();
    turns();
    turn_seconds();
    tool_calls();
    tool_seconds();
    provider_calls();
    provider_seconds();
    provider_errors();
    provider_retries();
    provider_fallbacks();
    tokens();
    approvals();
    kernels_alive();
    kernels_started();
    sandbox_info();
    store_commit();
    http_requests();
    http_seconds();
    http_connections_open();
    store_used_bytes();
    store_file_bytes();
    cluster_members();
    mcp_servers();
  });
}

} // namespace mibyan::metrics
