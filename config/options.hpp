// File: config/options.hpp
//
// The typed configuration. Each field carries its default and its meaning;
// `$MIBYAN_HOME/config.yaml` overrides fields by the same names (sections and
// keys are spelled exactly as the members, e.g. `code_execution.timeout`).
// See docs/configuration.md for the YAML form. Plain data, no logic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "config/mcp_options.hpp"

namespace mibyan {

/// Section `model`: which LLM the agent talks to by default.
struct model_options {
  /// Provider name: openai, openrouter, anthropic, deepseek, ollama,
  /// llamacpp, lmstudio, vllm or custom. Empty means "not configured".
  std::string provider;
  /// Default model id, e.g. "gpt-4o-mini".
  std::string default_model;  // YAML key: model.default
  /// Base URL override (required for `custom`).
  std::string base_url;
  /// Provider tried when the main one fails after its retries (or with an
  /// auth / not-found error). Empty: no fallback.
  std::string fallback_provider;
  /// Model for the fallback provider ("" = the request's model).
  std::string fallback_model;
  /// Base URL of the fallback provider ("" = the provider's default).
  std::string fallback_base_url;
  /// Context window of the model in tokens; 0 = the size known for the
  /// model, else 128000 (docs/agent_loop.md, "Context compression").
  int64_t context_length = 0;
};

/// Section `agent`: the turn loop.
struct agent_options {
  /// Maximum model calls per user turn before a summary is forced.
  int64_t max_turns = 90;
  /// Attempts per provider call, the first included (1 = no retry).
  int64_t api_max_retries = 3;
  /// Append every finished turn to a trajectory JSONL file (docs/storage.md,
  /// "Trajectories").
  bool save_trajectories = false;
  /// Directory of the trajectory files ("" = the current directory).
  std::string trajectory_dir;
  /// Toolsets offered to the model when a call names none (empty = all;
  /// docs/tools.md, "Toolsets").
  std::vector<std::string> toolsets;
  /// Toolsets and tools never offered.
  std::vector<std::string> disabled_toolsets;
  std::vector<std::string> disabled_tools;
  /// Load the project's context files (AGENTS.md and the like) and
  /// $MIBYAN_HOME/SOUL.md into a new session's system prompt
  /// (docs/agent_loop.md, "Project context files"); `--no-context-files`
  /// turns it off for one command.
  bool context_files = true;
};

/// Section `context_files`: how project context files are loaded
/// (docs/agent_loop.md, "Project context files").
struct context_files_options {
  /// What a file flagged by the injection scan gets: "warn" (loaded behind
  /// a visible warning block) or "refuse" (left out, with a warning).
  std::string on_injection = "warn";
  /// Characters (Unicode code points) kept of each file; a longer one keeps
  /// its head and tail with a marker in the middle.
  int64_t max_chars = 20000;
};

/// Section `provider`: HTTP behaviour of provider connections.
struct provider_options {
  /// Seconds one provider request may take in total (streams included).
  int64_t request_timeout = 1800;
  /// Seconds a stream may stay silent before it is aborted and retried.
  int64_t stream_idle_timeout = 180;
  /// Seconds allowed for DNS, TCP and TLS setup.
  int64_t connect_timeout = 30;
  /// Largest provider response body (streamed or not) in bytes; a larger
  /// one fails the request, not retried (docs/security.md).
  int64_t max_response_bytes = int64_t{32} << 20;
};

/// Section `terminal`: the `terminal` tool and child environments.
struct terminal_options {
  /// Default foreground timeout in seconds.
  int64_t timeout = 180;
  /// Largest allowed foreground timeout in seconds.
  int64_t max_timeout = 600;
  /// Seconds between SIGTERM and SIGKILL when a command is stopped.
  int64_t kill_grace = 5;
  /// Exact names of environment variables passed to children although the
  /// secret filter would drop them. Provider credentials are never passed.
  std::vector<std::string> env_passthrough;
};

/// Section `tool_output`: size limits shared by tools.
struct tool_output_options {
  /// Characters of terminal output kept (head 40 %, tail 60 %).
  int64_t max_bytes = 50000;
  /// Largest `limit` accepted by read_file.
  int64_t max_lines = 2000;
  /// Characters of one line before read_file truncates it.
  int64_t max_line_chars = 2000;
  /// Total characters read_file returns in one call.
  int64_t read_char_budget = 100000;
};

/// Section `web`: web_search and web_extract.
struct web_options {
  /// Search backend: "" (none), "searxng", "brave" or "tavily".
  std::string search_backend;
  /// Base URL of a SearXNG instance (its /search endpoint must allow
  /// format=json).
  std::string searxng_url;
  /// Override of the Brave API endpoint (tests point it at 127.0.0.1).
  std::string brave_url = "https://api.search.brave.com/res/v1/web/search";
  /// Override of the Tavily API endpoint.
  std::string tavily_url = "https://api.tavily.com/search";
  /// Default per-page character limit of web_extract.
  int64_t extract_char_limit = 15000;
  /// Largest response body fetched, in bytes.
  int64_t max_download_bytes = 10 * 1024 * 1024;
  /// Total timeout of one HTTP fetch, in seconds.
  int64_t fetch_timeout = 30;
  /// Connect timeout, in seconds.
  int64_t connect_timeout = 10;
  /// Largest number of redirects followed.
  int64_t max_redirects = 5;
  /// User-Agent header sent by the web tools.
  std::string user_agent = "Mibyan/0.1 (+https://github.com/mibyan)";
};

/// Section `security`.
struct security_options {
  /// Allow web tools to reach private, loopback, link-local and metadata
  /// addresses. Off by default (SSRF guard).
  bool allow_private_urls = false;
  /// Exact IP addresses the web tools may reach although they are private
  /// (e.g. a trusted LAN service), even with allow_private_urls off.
  std::vector<std::string> allowed_private_addresses;
};

/// Section `code_execution`: the execute_code bridge.
struct code_execution_options {
  /// "project" (session cwd, active venv/conda python) or "strict" (private
  /// temp dir, system python).
  std::string mode = "project";
  /// Wall-clock seconds per cell.
  int64_t timeout = 300;
  /// Tool calls dispatched per cell.
  int64_t max_tool_calls = 50;
  /// Bytes of stdout shown inline (head 40 %, tail 60 %).
  int64_t max_stdout_bytes = 50000;
  /// Bytes of stderr (fd-level and Python-level together) shown.
  int64_t max_stderr_bytes = 10000;
  /// Bytes of stdout saved to the spill file.
  int64_t max_spill_bytes = 5000000;
  /// Seconds an idle kernel lives.
  int64_t kernel_idle_timeout = 1800;
  /// Live top-level kernels before the least recently used idle one goes.
  int64_t max_session_kernels = 4;
  /// Pre-started kernels kept ready for new sessions (0 disables).
  int64_t prestart_kernels = 1;
  /// Interpreter for strict mode and fallback ("" means python3 on PATH).
  std::string python;
  /// Open RPC connections per kernel; extra ones are refused with an error
  /// line and closed (docs/kernel_protocol.md §5.1).
  int64_t max_rpc_connections = 64;
  /// Longest RPC request line in bytes; a longer one closes its connection.
  int64_t max_rpc_frame_bytes = 16 * 1024 * 1024;
  /// Bytes of partial RPC lines buffered per kernel, all connections
  /// together; the connection that would pass it is closed.
  int64_t max_rpc_buffered_bytes = 64 * 1024 * 1024;
  /// Isolation of kernels (docs/security.md): "auto" runs them in a
  /// bubblewrap sandbox when user namespaces work here and otherwise falls
  /// back (one warning) to unsandboxed kernels with a hardened host;
  /// "required" refuses to start without the sandbox; "off" never uses it.
  std::string sandbox = "auto";
  /// Address-space limit of a kernel and each process it starts, in MiB
  /// (RLIMIT_AS).
  int64_t max_memory_mb = 4096;
  /// Processes and threads a kernel may add (RLIMIT_NPROC headroom over
  /// the user's current count).
  int64_t max_processes = 512;
  /// Open files per kernel process (RLIMIT_NOFILE; capped at the host's
  /// hard limit).
  int64_t max_open_files = 4096;
  /// Expose the enabled MCP servers' tools to scripts as
  /// `mibyan_tools.mcp.<server>.<tool>(**args)` (docs/mcp.md). Off by
  /// default: it widens what a script can reach.
  bool mcp_in_scripts = false;
};

/// Section `tools`: limits applied to every tool call, whatever its source.
struct tools_options {
  /// Largest arguments object (JSON text, bytes) a tool call may carry.
  int64_t max_argument_bytes = 8 * 1024 * 1024;
};

/// Section `runtime`: the actor system.
struct runtime_options {
  /// Scheduler worker threads; 0 means the number of cores (at least 2).
  int64_t scheduler_threads = 0;
  /// Threads that run blocking tool work (files, subprocesses).
  int64_t blocking_threads = 16;
  /// Microseconds the I/O thread polls, instead of sleeping, after it
  /// sent a cell to a kernel (runtime/io_loop.cpp); 0 sleeps at once.
  int64_t io_spin_us = 50;
};

/// Section `logging`.
struct logging_options {
  /// debug, info, warning or error.
  std::string level = "info";
  /// Also append log lines to this file ("" for none).
  std::string file;
};

/// Thresholds of the tool-loop guardrails, counted per turn (see
/// docs/configuration.md, `tool_loop_guardrails`).
struct guardrail_thresholds {
  /// The same call (tool + canonical arguments) failed this many times.
  int64_t identical_failure = 0;
  /// The same tool failed this many times in a row (any arguments).
  int64_t same_tool_failure = 0;
  /// A read-only tool returned the same result for the same call this many
  /// times.
  int64_t idempotent_repeat = 0;
};

/// Tool-loop guardrails of the agent loop (direct model calls only).
struct tool_loop_guardrail_options {
  /// Append warning text to results once a warn threshold is reached.
  bool warnings_enabled = true;
  /// Block repeated calls and halt the turn (exit `guardrail_halt`) once a
  /// hard-stop threshold is reached.
  bool hard_stop_enabled = false;
  guardrail_thresholds warn_after{2, 3, 2};
  guardrail_thresholds hard_stop_after{5, 8, 5};
};

/// Section `approvals`: gating of dangerous commands (docs/approvals.md).
struct approvals_options {
  /// "manual" (ask a human), "smart" (ask a reviewer model first) or "off"
  /// (approve everything but hardline and deny rules). YAML false/off read
  /// as "off"; unknown values as "manual".
  std::string mode = "manual";
  /// Seconds a human has to answer a prompt (no answer = deny).
  int64_t timeout = 60;
  /// What a context without an approval channel does with a flagged
  /// command: "deny" or "approve".
  std::string cron_mode = "deny";
  std::string single_query_mode = "deny";
  std::string unattended_mode = "deny";
  /// Consecutive smart-mode denials after which deny messages carry the
  /// breaker suffix; <= 0 disables.
  int64_t denial_breaker_threshold = 3;
  /// Globs blocking matching commands unconditionally.
  std::vector<std::string> deny;
  /// Seconds the smart-mode reviewer may take (then: escalate).
  int64_t guardian_timeout = 30;
  /// Where a front end that cannot prompt a terminal (serve) sends flagged
  /// commands: "off" (the context's default decides, as without a
  /// channel) or "pending" (they wait up to `timeout` for an answer over
  /// HTTP, docs/approvals.md "HTTP approvals").
  std::string http = "off";
  /// Set by `--yolo` (never read from YAML): approve every command that is
  /// not hardline or denied by a rule.
  bool yolo = false;
};

/// Section `clarify`: the clarify tool's questions (docs/tools.md).
struct clarify_options {
  /// Seconds the user has to answer a question (then: no answer).
  int64_t timeout = 600;
  /// "off" (a front end that cannot prompt a terminal has no clarify
  /// channel: the tool tells the model to proceed) or "pending" (questions
  /// wait up to `timeout` for an answer over HTTP, docs/serve.md).
  std::string http = "off";
};

/// Section `server`: `mibyan serve` (docs/serve.md).
struct server_options {
  /// Bearer key clients must send ("" = none; MIBYAN_SERVER_KEY wins).
  std::string key;
  /// Largest accepted request body (bytes); over it: 413.
  int64_t max_body_bytes = 4 * 1024 * 1024;
  /// Largest accepted request head (request line + headers); over it: 431.
  int64_t max_header_bytes = 16 * 1024;
  /// Agent turns running at once; over it: 429 with Retry-After.
  int64_t max_concurrent_turns = 64;
  /// Open connections at once; over it new connections are closed.
  int64_t max_connections = 4096;
  /// Open connections from one client address. Over it the oldest of that
  /// address's connections still sending its first request head is closed
  /// to make room; when there is none, the new connection is closed.
  int64_t max_connections_per_ip = 256;
  /// Messages in one chat-completions request; over it: 400
  /// too_many_messages, before anything is converted or stored.
  int64_t max_messages = 1000;
  /// Seconds without output after which a streamed response gets an SSE
  /// comment line (": keep-alive"), so proxies keep the stream open.
  int64_t keepalive_s = 15;
  /// Turn events queued for one /ui/api/live watcher that does not keep
  /// up; beyond it events are dropped and the watcher gets a "lagged"
  /// event (docs/serve.md, "Operator console").
  int64_t live_buffer_events = 1024;
  /// Seconds a client may take to send the request head / the body. Above
  /// 3/4 of max_connections, connections still waiting for their first
  /// head get at most 1 s from then on.
  int64_t header_timeout = 10;
  int64_t body_timeout = 60;
  /// Seconds an idle keep-alive connection stays open.
  int64_t idle_timeout = 60;
  /// I/O threads of the HTTP server.
  int64_t io_threads = 2;
  /// Seconds after its last turn a kept session (X-Mibyan-Session) keeps
  /// its conversation and kernels in memory; later turns reload it.
  int64_t session_idle_timeout = 1800;
  /// Extra names (host or host:port) the dashboard accepts in a request's
  /// Host header besides the listen address (and, on loopback, localhost):
  /// the names a browser uses to reach the node (DNS rebinding defence,
  /// serve/ui_auth.hpp).
  std::vector<std::string> allowed_hosts;
  /// Largest session export (GET /ui/api/sessions/{id}/export) in bytes;
  /// over it: 413.
  int64_t max_export_bytes = int64_t{64} << 20;
};

/// Section `delegation`: delegate_task subagents (docs/tools.md).
struct delegation_options {
  /// Children of one delegate_task call running at once; also the most
  /// delegate_task calls kept per assistant message.
  int64_t max_concurrent_children = 3;
  /// Iteration budget of each child turn.
  int64_t max_iterations = 50;
  /// Tools a child is never offered.
  std::vector<std::string> blocked_tools{"delegate_task", "clarify", "memory",
                                         "send_message", "cronjob"};
};

/// Section `compression`: summarising old turns near the context window
/// (docs/agent_loop.md, "Context compression").
struct compression_options {
  bool enabled = true;
  /// Fraction of the window at which to compress (at least 0.75 for a
  /// window under 512K tokens).
  double threshold = 0.50;
  /// The kept tail is this fraction of the threshold, in tokens.
  double target_ratio = 0.20;
  /// Messages at the start of the history never summarised.
  int64_t protect_first_n = 3;
  /// Messages at the end of the history never summarised.
  int64_t protect_last_n = 20;
  /// Before the summary call, the last this many tool results of the
  /// summarised middle stay whole; older ones larger than
  /// `prune_min_chars` become a one-line stub (docs/agent_loop.md,
  /// "Old tool outputs"). 0 stubs every large one.
  int64_t keep_tool_results = 6;
  /// Tool results up to this many characters are never stubbed.
  int64_t prune_min_chars = 400;
};

/// Section `memory`: the memory files (docs/tools.md, "memory").
struct memory_options {
  bool memory_enabled = true;
  bool user_profile_enabled = true;
  /// Character limits of MEMORY.md and USER.md (entries joined by "\n§\n").
  int64_t memory_char_limit = 2200;
  int64_t user_char_limit = 1375;
};

/// Section `skills` (docs/tools.md, "Skills").
struct skills_options {
  /// Extra read-only skill directories scanned after $MIBYAN_HOME/skills.
  std::vector<std::string> external_dirs;
};

/// Section `cluster`: `mibyan node` and the cluster clients
/// (docs/cluster.md).
struct cluster_options {
  /// The shared cluster key ("" = none; MIBYAN_CLUSTER_KEY wins).
  std::string key;
  /// Milliseconds between heartbeats to every member.
  int64_t heartbeat_ms = 500;
  /// Milliseconds without a heartbeat after which a member is lost.
  int64_t failure_timeout_ms = 3000;
  /// Sessions a worker hosts at most; a full worker is skipped.
  int64_t max_sessions = 256;
  /// Milliseconds a draining node waits for running calls.
  int64_t drain_timeout_ms = 30000;
  /// Largest cluster frame a peer may announce, in MiB; a longer one
  /// closes its connection before anything is allocated for it.
  int64_t max_frame_mb = 64;
  /// Allow a non-loopback listen address without TLS (warned at start).
  bool insecure = false;
  /// TLS through CAF's OpenSSL module: PEM files; all three or none.
  std::string tls_cert;
  std::string tls_key;
  std::string tls_ca;
};

/// Section `cron`: scheduled jobs (docs/cron.md).
struct cron_options {
  /// Run the scheduler in `serve` and gateway nodes.
  bool enabled = true;
  /// Runs of jobs going at once; more due jobs wait for a free slot.
  int64_t max_concurrent = 4;
  /// After downtime: "one" (a job that missed slots runs once) or "none".
  std::string catch_up = "one";
  /// Consecutive failed runs after which a job is paused (0 = never).
  int64_t max_failures = 3;
  /// Run records kept per job (older ones are deleted).
  int64_t history_keep = 100;
  /// Whether a job's own run (and any agent turn) may create, change or
  /// delete jobs through the cronjob tool.
  bool allow_agent_scheduling = false;
  /// IANA zone for new jobs without one ("" = the node's local zone);
  /// checked by the scheduler against the tz database.
  std::string default_timezone;  /// Who answers a run's flagged commands (docs/cron.md, "Running,
  /// approvals and delivery"): "cron_mode" (approvals.cron_mode decides:
  /// deny or approve) or "http" (they wait up to approvals.timeout for an
  /// answer from the dashboard when approvals.http is "pending"; otherwise
  /// cron_mode decides).
  std::string approvals = "cron_mode";
  /// Seconds one webhook delivery attempt may take.
  int64_t webhook_timeout = 10;
  /// Webhook delivery attempts in all (retries after 1, 2, 4 ... s).
  int64_t webhook_attempts = 3;
  /// Webhooks may reach private, loopback and link-local addresses (as
  /// security.allow_private_urls does for every URL).
  bool allow_private_webhooks = false;
};

/// Section `storage`: the session store's backend (docs/storage.md).
struct storage_options {
  /// "lmdb" (embedded, `$MIBYAN_HOME/sessions/`) or "postgres".
  std::string backend = "lmdb";
  /// `storage.postgres.url`: a postgresql:// URI. The password comes from
  /// MIBYAN_PG_PASSWORD or a `${VAR}` reference (environment, then .env),
  /// never from the file itself.
  std::string postgres_url;
  /// `storage.postgres.pool_size`: connections per process.
  int64_t postgres_pool_size = 4;
  /// Create or migrate the PostgreSQL schema at start-up.
  bool auto_migrate = false;
};

/// Section `checkpoints`: file checkpoints before the agent's writes and
/// destructive commands, and rollback (docs/checkpoints.md).
struct checkpoints_options {
  /// Snapshot before the first write_file/patch in a project in a turn and
  /// before destructive terminal commands (`--checkpoints` on run/chat).
  bool enabled = false;
  /// Files larger than this many MiB are left out of a snapshot.
  int64_t max_file_mb = 10;
  /// Checkpoints kept per project (older ones are pruned).
  int64_t keep = 50;
  /// Checkpoints older than this many days are pruned (0 = no age limit).
  int64_t max_age_days = 7;
  /// Files a snapshot takes at most; a larger tree is refused whole.
  int64_t max_files = 50000;
  /// When a snapshot fails: "continue" (the write goes ahead, the result
  /// carries a warning) or "block" (the tool call fails, nothing written).
  std::string on_failure = "continue";
};

/// The whole effective configuration plus where it came from.
struct options {
  model_options model;
  agent_options agent;
  provider_options provider;
  terminal_options terminal;
  tool_output_options tool_output;
  web_options web;
  security_options security;
  code_execution_options code_execution;
  runtime_options runtime;
  logging_options logging;
  server_options server;

  /// `$MIBYAN_HOME`, absolute.
  std::string home;
  /// Path of the config file that was read ("" when none existed).
  std::string config_path;
  /// Variables from `$MIBYAN_HOME/.env` (secrets). Never logged unmasked.
  std::map<std::string, std::string> env_file;
  /// The values of secret keys in config.yaml ("section.key", value):
  /// server.key, cluster.key and every *key/*token/*secret/*password
  /// (config/secret_literals.hpp). The runtime's redactor replaces them
  /// wherever they occur. Never logged.
  std::vector<std::pair<std::string, std::string>> secret_literals;
  tools_options tools;

  /// Returns the value of a secret: the process environment first, then
  /// `.env`. Empty when unset.
  std::string secret(const std::string& name) const;

  tool_loop_guardrail_options tool_loop_guardrails;
  approvals_options approvals;
  clarify_options clarify;
  /// Top-level `command_allowlist`: pattern keys approved permanently
  /// (docs/approvals.md).
  std::vector<std::string> command_allowlist;
  /// Top-level `mcp_servers`: the MCP servers to connect to, sorted by
  /// name (docs/mcp.md).
  std::vector<mcp_server_options> mcp_servers;
  delegation_options delegation;
  compression_options compression;
  context_files_options context_files;
  memory_options memory;
  skills_options skills;
  cluster_options cluster;
  cron_options cron;
  storage_options storage;
  checkpoints_options checkpoints;
};

} // namespace mibyan
