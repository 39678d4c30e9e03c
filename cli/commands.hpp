// File: cli/commands.hpp
//
// The `mibyan` subcommands. Each returns the process exit code:
// 0 success, 1 runtime failure, 2 usage or configuration error.
#pragma once

#include "storage/session_id.hpp"

#include <string>
#include <vector>

namespace mibyan {
struct options;
struct turn_call;
}

namespace mibyan::cli {

/// Global flags, parsed before the subcommand.
struct global_flags {
  std::string log_file;
  std::string log_level;
  /// --yolo: approve every command that is not hardline or denied by a
  /// rule (docs/approvals.md).
  bool yolo = false;
};

int tool_command(const std::vector<std::string>& args,
                 const global_flags& flags);
int config_command(const std::vector<std::string>& args,
                   const global_flags& flags);
int sessions_command(const std::vector<std::string>& args,
                     const global_flags& flags);
int run_command(const std::vector<std::string>& args,
                const global_flags& flags);
int chat_command(const std::vector<std::string>& args,
                 const global_flags& flags);
int serve_command(const std::vector<std::string>& args,
                  const global_flags& flags);
/// `mibyan dashboard`: the server of `serve` with its /ui/ pages, on
/// 127.0.0.1:9119 by default (docs/serve.md "Dashboard").
int dashboard_command(const std::vector<std::string>& args,
                      const global_flags& flags);
int batch_command(const std::vector<std::string>& args,
                  const global_flags& flags);
/// `mibyan acp`: the Agent Client Protocol agent on stdio (docs/acp.md).
int acp_command(const std::vector<std::string>& args,
                const global_flags& flags);
/// `mibyan mcp list [--json]` / `mibyan mcp test NAME` (docs/mcp.md).
int mcp_command(const std::vector<std::string>& args,
                const global_flags& flags);
/// `mibyan mcp serve` (cli/mcp_serve_command.cpp, docs/mcp.md).
int mcp_serve_command(const std::vector<std::string>& args,
                      const global_flags& flags);
/// `mibyan node` and `mibyan nodes` (docs/cluster.md).
int node_command(const std::vector<std::string>& args,
                 const global_flags& flags);
int nodes_command(const std::vector<std::string>& args,
                  const global_flags& flags);
/// For `serve` and `node` (gateways): opens the configured session store
/// once when it is a database (storage.backend: postgres), so a wrong or
/// unreachable URL, a refused login or a schema the binary cannot use ends
/// the start with one line naming the problem (the caller exits 2). True
/// for LMDB without opening it.
bool check_store_at_startup(const options& opts, const std::string& me);
/// `mibyan store migrate|copy` (docs/storage.md, "PostgreSQL").
int store_command(const std::vector<std::string>& args,
                  const global_flags& flags);
/// `mibyan cron list|show|add|edit|pause|resume|run ID|remove|history`
/// (docs/cron.md); `cron run` without an id is cron_run_command.
int cron_command(const std::vector<std::string>& args,
                 const global_flags& flags);
/// `mibyan checkpoints list|diff N|restore N|prune` (docs/checkpoints.md).
int checkpoints_command(const std::vector<std::string>& args,
                        const global_flags& flags);
/// `mibyan cron run`: the scheduler in the foreground (docs/cron.md).
int cron_run_command(const std::vector<std::string>& args,
                     const global_flags& flags);


/// Splits "a, b,c" into {"a", "b", "c"}, dropping empty items.
std::vector<std::string> split_list(const std::string& s);

/// Returns whether `flag` is one of the agent flags shared by `run` and
/// `chat`: --provider --model --base-url --api-key --session (--resume is
/// the same) --toolsets --max-iterations.
bool is_agent_flag(const std::string& flag);

/// Prints the "warning: ..." lines of a turn's "context" event (the
/// system prompt's notice, runtime/session_prompt.hpp) to stderr as
/// "<who>: warning: ...".
void print_context_warnings(const std::string& notice, const char* who);

/// Applies agent flag `flag` with `value` to `call`. Returns an error
/// message ("" on success), e.g. for a bad --max-iterations.
std::string apply_agent_flag(const std::string& flag, const std::string& value,
                             turn_call& call);

bool load_config_or_report(const global_flags& flags, options& out);

} // namespace mibyan::cli
