// The `mibyan` command: a thin front on the runtime library.
#include <cstring>
#include <iostream>

#include <malloc.h>
#include <string>
#include <vector>

#include "base/host_hardening.hpp"
#include "cli/commands.hpp"

namespace {

void usage(std::ostream& out) {
  out << "Mibyan: a runtime for tool-using LLM agents.\n\n"
         "usage: mibyan [--log-level L] [--log-file F] [--yolo] COMMAND ...\n\n"
         "commands:\n"
         "  tool NAME 'ARGS_JSON'   run one tool call and print its result\n"
         "  tool --stdin            run one call per input line, in order\n"
         "  tool --list             list the tools with their JSON schemas\n"
         "  config check            validate $MIBYAN_HOME/config.yaml\n"
         "  config show             print the effective configuration\n"
         "  run [--provider P] [--model M] [--session ID] PROMPT\n"
         "                          run one agent turn, print the answer\n"
         "  chat [--provider P] [--model M] [--session ID]\n"
         "                          converse, one turn per input line\n"
         "  sessions list|show ID|search QUERY|delete ID [--json]\n"
         "                          inspect stored conversations\n"
         "  serve [--listen HOST:PORT] [--provider P] [--model M]\n"
         "                          serve the agent over an OpenAI-compatible\n"
         "                          HTTP API (docs/serve.md)\n"
         "  dashboard [--listen HOST:PORT] [--connect HOST:PORT]\n"
         "                          the web dashboard at /ui/ over this\n"
         "                          $MIBYAN_HOME (default 127.0.0.1:9119)\n"
         "  batch PROMPTS.jsonl --run-name R [--workers N] [--resume]\n"
         "                          run many prompts, merge trajectories\n"
         "                          (docs/batch.md)\n"
         "  store migrate [--url URL]\n"
         "  store copy --from lmdb:PATH|postgres:URL --to lmdb:PATH|postgres:URL\n"
         "                          PostgreSQL schema and moving sessions\n"
         "                          between backends (docs/storage.md)\n"
         "  cron list|show ID|history ID|pause ID|resume ID|remove ID [--json]\n"
         "  cron add --schedule S --prompt P [--deliver T]... [--json]\n"
         "  cron edit ID [FLAGS] / cron run ID\n"
         "                          scheduled jobs; `mibyan cron --help` has\n"
         "                          the flags (docs/cron.md)\n"
         "  cron run                run the job scheduler in the foreground\n"
         "  acp [--provider P] [--model M]\n"
         "                          serve the agent to an editor over the Agent\n"
         "                          Client Protocol on stdio (docs/acp.md)\n"
         "  mcp list [--json]       the MCP servers, their state and tools\n"
         "  mcp test NAME           connect to one MCP server, list, ping\n"
         "  mcp serve               serve Mibyan's tools over MCP (stdio, or\n"
         "                          Streamable HTTP with --listen HOST:PORT)\n"
         "  mcp login NAME [--port N] [--no-browser]\n"
         "                          authorize an HTTP MCP server (OAuth)\n"
         "  mcp logout NAME         forget an MCP server's OAuth tokens\n"
         "  node --listen HOST:PORT [--join HOST:PORT] [--role R] [--workdir D]\n"
         "                          run a cluster member (docs/cluster.md)\n"
         "  nodes --connect HOST:PORT [--json]\n"
         "                          list the members of a cluster\n"
         "  checkpoints list|diff N|restore N [--file PATH] [--all]\n"
         "                          file checkpoints and rollback\n"
         "                          (docs/checkpoints.md)\n"
         "  version                 print the version\n";
}

// Runs `command`; its exit status (2 for an unknown command).
int dispatch(const std::string& command,
             const std::vector<std::string>& rest,
             const mibyan::cli::global_flags& flags) {
  if (command == "tool")
    return mibyan::cli::tool_command(rest, flags);
  if (command == "config")
    return mibyan::cli::config_command(rest, flags);
  if (command == "sessions")
    return mibyan::cli::sessions_command(rest, flags);
  if (command == "run")
    return mibyan::cli::run_command(rest, flags);
  if (command == "chat")
    return mibyan::cli::chat_command(rest, flags);
  if (command == "serve")
    return mibyan::cli::serve_command(rest, flags);
  if (command == "dashboard")
    return mibyan::cli::dashboard_command(rest, flags);
  if (command == "batch")
    return mibyan::cli::batch_command(rest, flags);
  if (command == "acp")
    return mibyan::cli::acp_command(rest, flags);
  if (command == "mcp")
    return mibyan::cli::mcp_command(rest, flags);
  if (command == "node")
    return mibyan::cli::node_command(rest, flags);
  if (command == "nodes")
    return mibyan::cli::nodes_command(rest, flags);
  if (command == "checkpoints")
    return mibyan::cli::checkpoints_command(rest, flags);
  if (command == "cron")
    return mibyan::cli::cron_command(rest, flags);
  if (command == "store")
    return mibyan::cli::store_command(rest, flags);
  if (command == "version" || command == "--version") {
    std::cout << "mibyan 0.1.0\n";
    return 0;
  }
  std::cerr << "mibyan: unknown command '" << command << "'\n";
  usage(std::cerr);
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  // Large buffers (model answers, turn results) are mapped and returned to
  // the system when freed; without a fixed threshold glibc raises it after
  // the first big free and later copies stay resident in the arenas.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  mibyan::cli::global_flags flags;
  std::vector<std::string> args(argv + 1, argv + argc);
  // Wipe a key given on the command line from /proc/PID/cmdline (the copy
  // in `args` is what the commands use); docs/security.md.
  for (int a = 1; a + 1 < argc; ++a)
    if (std::strcmp(argv[a], "--api-key") == 0)
      std::memset(argv[a + 1], 'x', std::strlen(argv[a + 1]));
  size_t i = 0;
  for (; i < args.size(); ++i) {
    if ((args[i] == "--log-file" || args[i] == "--log-level")
        && i + 1 < args.size()) {
      (args[i] == "--log-file" ? flags.log_file : flags.log_level)
        = args[i + 1];
      ++i;
    } else if (args[i] == "--yolo") {
      flags.yolo = true;
    } else if (args[i] == "-h" || args[i] == "--help") {
      usage(std::cout);
      return 0;
    } else {
      break;
    }
  }
  if (i >= args.size()) {
    usage(std::cerr);
    return 2;
  }
  auto command = args[i];
  std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1,
                                args.end());
  int code = dispatch(command, rest, flags);
  // A SIGTERM or SIGQUIT that stopped the command ends the process by
  // that signal, not by the command's status (base/host_hardening.hpp).
  mibyan::finish_termination();
  return code;
}
