// `mibyan acp`: the agent as an Agent Client Protocol server on stdin and
// stdout, for editors (docs/acp.md).
//
// stdout carries only protocol messages: the protocol writes go to a
// private duplicate of fd 1, and fd 1 itself is pointed at stderr before
// the runtime starts, so nothing else in the process (a library, a child
// that inherits it) can put a stray byte between two messages. Log lines go
// to $MIBYAN_HOME/logs/acp.log.
#include "cli/commands.hpp"
#include "cli/terminal_output.hpp"

#include <condition_variable>
#include <csignal>
#include <iostream>
#include <mutex>

#include <fcntl.h>
#include <unistd.h>

#include "acp/acp_agent.hpp"
#include "acp/acp_connection.hpp"
#include "base/log.hpp"
#include "config/options.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void usage() {
  std::cerr
    << "usage: mibyan acp [--provider P] [--model M] [--base-url URL]\n"
       "                  [--toolsets a,b]\n"
       "  Serves the agent to an editor over the Agent Client Protocol on\n"
       "  stdin/stdout (docs/acp.md). Logs go to $MIBYAN_HOME/logs/acp.log.\n";
}

} // namespace

int acp_command(const std::vector<std::string>& args,
                const global_flags& flags) {
  std::string provider, model, base_url, toolsets;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size())
        return false;
      out = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      usage();
      return 0;
    }
    bool ok = true;
    if (a == "--provider")
      ok = value(provider);
    else if (a == "--model")
      ok = value(model);
    else if (a == "--base-url")
      ok = value(base_url);
    else if (a == "--toolsets")
      ok = value(toolsets);
    else {
      std::cerr << "mibyan acp: unknown argument " << a << "\n";
      usage();
      return 2;
    }
    if (!ok) {
      std::cerr << "mibyan acp: " << a << " needs a value\n";
      return 2;
    }
  }
  // The protocol's own descriptor; fd 1 becomes a second stderr.
  int proto = ::fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (proto < 0 || ::dup2(2, 1) < 0) {
    std::cerr << "mibyan acp: cannot set up stdout\n";
    return 1;
  }
  std::signal(SIGPIPE, SIG_IGN);
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  route_logs_to_file(flags, opts, "acp");
  if (!provider.empty())
    opts.model.provider = provider;
  if (!model.empty())
    opts.model.default_model = model;
  if (!base_url.empty())
    opts.model.base_url = base_url;
  if (!toolsets.empty())
    opts.agent.toolsets = split_list(toolsets);
  std::string error;
  auto made = create_runtime(std::move(opts));
  if (!made) {
    MIBYAN_LOG(error, "acp", "cannot start the runtime: " << made.error);
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  // Sessions get channels of their own (acp/acp_agent.hpp); anything else
  // is unattended.
  rt->set_approval_context(approval_context::unattended);
  int code = 0;
  {
    acp_connection conn{0, proto};
    acp_agent agent{*rt, conn};
    std::mutex mtx;
    std::condition_variable cv;
    bool closed = false;
    acp_connection::handlers h;
    h.on_request = [&agent](const json::value& id, const std::string& method,
                            const json::value& params) {
      agent.on_request(id, method, params);
    };
    h.on_notification = [&agent](const std::string& method,
                                 const json::value& params) {
      agent.on_notification(method, params);
    };
    h.on_closed = [&] {
      agent.on_closed();
      std::lock_guard<std::mutex> guard{mtx};
      closed = true;
      cv.notify_all();
    };
    MIBYAN_LOG(info, "acp", "serving the Agent Client Protocol on stdio");
    conn.start(std::move(h));
    {
      std::unique_lock<std::mutex> lock{mtx};
      cv.wait(lock, [&] { return closed; });
    }
    agent.shutdown();
    // The runtime goes first: a turn still running answers its callbacks
    // (which use the agent and the connection) while it shuts down.
    rt.reset();
    conn.close();
    conn.join();
    if (conn.bad_lines() > 0)
      MIBYAN_LOG(info, "acp", conn.bad_lines() << " unusable line(s) read");
  }
  ::close(proto);
  MIBYAN_LOG(info, "acp", "done");
  return code;
}

} // namespace mibyan::cli
