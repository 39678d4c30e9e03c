// File: base/runtime_metrics.hpp
//
// The series Mibyan exports (docs/metrics.md lists each one), with one
// function per event so that every code path counts in exactly one place.
// Names, help texts, label sets and bucket bounds live in
// base/runtime_metrics.cpp and nowhere else.
//
// Threads: every function may be called from any thread; none blocks
// (a labelled series is found in a sharded table under a short lock, the
// increments are atomic). Label values outside the bounded sets documented
// below become "other".
#pragma once

#include <cstdint>
#include <string_view>

#include "base/metrics.hpp"

namespace mibyan::metrics {

/// A turn of a conversation ended. `outcome`: ok, partial, failed,
/// interrupted, not_started; `exit`: the turn_exit name (agent/turn_result).
void count_turn(std::string_view outcome, std::string_view exit,
                double seconds);

/// A turn ended without a result (it could not start, or its conversation
/// failed): counted as outcome "not_started", exit "none", no latency.
void count_turn_not_started();

/// A tool ran. `tool`: a registered tool name, or "other" for a name the
/// registry does not know; `outcome`: ok, error, timeout, interrupted,
/// cancelled.
void count_tool_call(std::string_view tool, std::string_view outcome,
                     double seconds);

/// A model call ended (after its retries and fallbacks) on `provider`.
/// `outcome`: ok, error, cancelled.
void count_provider_call(std::string_view provider, std::string_view outcome,
                         double seconds);
/// One attempt of a model call failed; `cls` is the failure class
/// (providers/retry_policy.hpp, to_string(failure_class)).
void count_provider_error(std::string_view provider, std::string_view cls);
/// A failed attempt is retried on the same provider.
void count_provider_retry(std::string_view provider, std::string_view cls);
/// A model call gives `provider` up and falls back to the next endpoint.
void count_provider_fallback(std::string_view provider);
/// Tokens a model call reported.
void count_tokens(std::string_view provider, std::string_view model,
                  int64_t input, int64_t output, int64_t cache_read,
                  int64_t cache_write, int64_t reasoning);

/// An approval decision on a flagged or blocked command. `decision`: once,
/// session, always, deny, timeout (a person's answer, on any channel:
/// terminal, HTTP), cancelled (the call ended while asking), no_channel
/// (denied: nobody can answer), reviewer_approve, reviewer_deny (smart
/// mode), context_approve (a context that approves flagged commands),
/// hardline, deny_rule, sudo_stdin (blocked before asking).
void count_approval(std::string_view decision);

/// A Python kernel (execute_code) is alive while one of these lives; its
/// construction also counts a kernel start.
class live_kernel {
public:
  live_kernel();
  ~live_kernel();
  live_kernel(const live_kernel&) = delete;
  live_kernel& operator=(const live_kernel&) = delete;
};

/// The kernel sandbox: `setting` is code_execution.sandbox (auto,
/// required, off); `kernels` is what started kernels use (bwrap, none;
/// "unknown" before the first kernel).
void note_sandbox(std::string_view setting, std::string_view kernels);

/// One LMDB write transaction committed (mdb_txn_commit) in `seconds`.
void observe_store_commit(double seconds);

/// One HTTP request answered by `mibyan serve`. `route`: health, metrics,
/// models, chat, sessions, approvals, clarifications, responses, ui_api,
/// ui, other; `status`: the HTTP status code.
void count_http_request(std::string_view route, int status, double seconds);
/// The route class of a request path (see count_http_request).
std::string_view http_route_class(std::string_view path);
/// An HTTP connection of `mibyan serve`, open while this lives.
gauge& http_connections_open();

/// Gauges read at scrape time; the composition roots attach callbacks
/// (runtime: store, MCP; cluster node: members).
callback_family& store_used_bytes();
callback_family& store_file_bytes();
callback_family& cluster_members();
callback_family& mcp_servers();

/// Registers every series, so that a scrape lists all of them (HELP and
/// TYPE) before their first event. Idempotent.
void register_all();

} // namespace mibyan::metrics
