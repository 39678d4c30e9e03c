// `mibyan mcp serve [--listen HOST:PORT] [--toolsets a,b] [--page-size N]`
// (docs/mcp.md, "Mibyan as an MCP server"): Mibyan's tools over MCP, on
// stdio (default) or Streamable HTTP. Parses the flags, checks the key
// policy, starts the runtime, the MCP server core (mcp_server/) and the
// transport, and ends on end of input (stdio) or SIGTERM / SIGINT.
//
// stdio: stdout carries only protocol messages. The protocol writes go to
// a private copy of the original stdout; fd 1 itself is pointed at stderr,
// so a stray print anywhere in the process (or a child that inherits fd 1)
// cannot corrupt the stream. Logs go to $MIBYAN_HOME/logs/mcp-serve.log.
#include "cli/commands.hpp"

#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include "base/log.hpp"
#include "cli/listen_address.hpp"
#include "mcp_server/http_transport.hpp"
#include "mcp_server/runtime_backend.hpp"
#include "mcp_server/stdio_transport.hpp"
#include "runtime/runtime.hpp"

namespace mibyan::cli {

namespace {

void serve_usage() {
  std::cerr
    << "usage: mibyan mcp serve [--listen HOST:PORT] [--toolsets a,b]\n"
       "                        [--page-size N] [--cwd DIR]\n"
       "  Serves Mibyan's tools to an MCP client: over stdio (default), or\n"
       "  over Streamable HTTP at http://HOST:PORT/mcp with --listen (port\n"
       "  0 picks a free one). Off loopback a bearer key is required:\n"
       "  MIBYAN_MCP_SERVE_KEY, else MIBYAN_SERVER_KEY or server.key.\n"
       "  --toolsets: the toolsets offered (default: agent.toolsets).\n"
       "  --page-size: tools per tools/list page (default 50).\n"
       "  --cwd: the working directory of the tools and kernels (default:\n"
       "  the current directory).\n";
}

// SIGINT / SIGTERM end the server: a thread waits for them and writes to
// a pipe the stdio loop polls (HTTP: the main thread waits itself).
struct stop_signal {
  int fds[2] = {-1, -1};
  sigset_t set{};
  stop_signal() {
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
  }
  ~stop_signal() {
    for (int fd : fds)
      if (fd >= 0)
        ::close(fd);
  }
};

int serve_stdio(runtime& rt, std::shared_ptr<mcp_server_core> core,
                int proto_out, const options& opts) {
  stop_signal sig;
  if (::pipe2(sig.fds, O_CLOEXEC) != 0) {
    std::cerr << "mibyan mcp serve: pipe failed\n";
    return 1;
  }
  int wfd = sig.fds[1];
  sigset_t set = sig.set;
  std::thread waiter([set, wfd] {
    int s = 0;
    if (sigwait(&set, &s) == 0) {
      char c = 1;
      (void)!::write(wfd, &c, 1);
    }
  });
  mcp_stdio_settings st;
  st.max_message_bytes = static_cast<size_t>(opts.server.max_body_bytes);
  int rc = serve_mcp_stdio(*core, STDIN_FILENO, proto_out, sig.fds[0], st);
  core->shutdown();
  // The waiter may still sit in sigwait: wake it with our own signal.
  ::pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  (void)rt;
  return rc;
}

} // namespace

int mcp_serve_command(const std::vector<std::string>& args,
                      const global_flags& flags) {
  std::string listen;
  std::vector<std::string> toolsets;
  size_t page_size = 50;
  std::string cwd;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    if (a == "-h" || a == "--help") {
      serve_usage();
      return 0;
    }
    if (a != "--listen" && a != "--toolsets" && a != "--page-size"
        && a != "--cwd") {
      std::cerr << "mibyan mcp serve: unknown option " << a << "\n";
      serve_usage();
      return 2;
    }
    if (i + 1 >= args.size()) {
      std::cerr << "mibyan mcp serve: " << a << " needs a value\n";
      return 2;
    }
    const auto& v = args[++i];
    if (a == "--listen") {
      listen = v;
    } else if (a == "--toolsets") {
      toolsets = split_list(v);
    } else if (a == "--cwd") {
      std::error_code ec;
      auto p = std::filesystem::canonical(v, ec);
      if (ec || !std::filesystem::is_directory(p, ec)) {
        std::cerr << "mibyan mcp serve: --cwd " << v
                  << " is not a directory\n";
        return 2;
      }
      cwd = p.string();
    } else {
      char* end = nullptr;
      auto n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 1 || n > 1000) {
        std::cerr << "mibyan mcp serve: --page-size must be 1 to 1000\n";
        return 2;
      }
      page_size = static_cast<size_t>(n);
    }
  }
  mcp_http_settings hs;
  if (!listen.empty()) {
    if (auto err = parse_listen(listen, hs.host, hs.port); !err.empty()) {
      std::cerr << "mibyan mcp serve: " << err << "\n";
      return 2;
    }
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  if (!listen.empty()) {
    hs.key = opts.secret("MIBYAN_MCP_SERVE_KEY");
    if (hs.key.empty())
      hs.key = opts.secret("MIBYAN_SERVER_KEY");
    if (hs.key.empty())
      hs.key = opts.server.key;
    if (hs.key.empty() && !is_loopback(hs.host)) {
      std::cerr << "mibyan mcp serve: refusing to listen on " << hs.host
                << " without a key: set MIBYAN_MCP_SERVE_KEY (or "
                   "MIBYAN_SERVER_KEY, server.key) or listen on 127.0.0.1\n";
      return 2;
    }
    hs.allowed_hosts = opts.server.allowed_hosts;
    hs.max_message_bytes = static_cast<size_t>(opts.server.max_body_bytes);
    hs.io_threads = static_cast<int>(opts.server.io_threads);
    hs.keepalive_s = opts.server.keepalive_s;
  }
  // stdio: the protocol gets a private copy of stdout; fd 1 becomes
  // stderr for everything else.
  int proto_out = -1;
  if (listen.empty()) {
    proto_out = ::fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
    if (proto_out < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      std::cerr << "mibyan mcp serve: cannot set up stdout\n";
      return 1;
    }
  }
  if (flags.log_file.empty() && opts.logging.file.empty()) {
    auto dir = std::filesystem::path(opts.home) / "logs";
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (log::log_to_file((dir / "mcp-serve.log").string()) && listen.empty())
      log::set_stderr_enabled(false);
  }
  std::unique_ptr<stop_signal> http_sig;
  if (!listen.empty())
    http_sig = std::make_unique<stop_signal>();
  else {
    // Block the stop signals before the runtime's threads start, so that
    // only the stdio loop's waiter takes them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
  }
  std::string error;
  auto cfg_copy = opts;
  auto made = create_runtime(std::move(opts));
  if (!made) {
    std::cerr << "mibyan: cannot start the runtime: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<runtime> rt = std::move(*made);
  // An unknown toolset is a start-up error, not a failing tools/list.
  auto backend = runtime_mcp_backend(*rt, toolsets, cwd);
  if (auto tools = backend.list_tools(); !tools) {
    std::cerr << "mibyan mcp serve: " << tools.error << "\n";
    return 2;
  }
  mcp_core_settings cs;
  cs.version = "0.1.0";
  cs.page_size = page_size;
  cs.max_message_bytes = static_cast<size_t>(cfg_copy.server.max_body_bytes);
  if (!listen.empty())
    cs.idle_timeout
      = std::chrono::seconds(cfg_copy.server.session_idle_timeout);
  auto core = mcp_server_core::create(std::move(backend), cs);
  if (listen.empty()) {
    MIBYAN_LOG(info, "mcp-serve", "serving on stdio");
    int rc = serve_stdio(*rt, core, proto_out, cfg_copy);
    ::close(proto_out);
    core.reset();
    rt.reset();
    return rc;
  }
  auto started = mcp_http_server::start(core, hs);
  if (!started) {
    std::cerr << "mibyan mcp serve: " << started.error << "\n";
    return 1;
  }
  auto server = std::move(*started);
  auto host = server->host();
  if (host.find(':') != std::string::npos)
    host = "[" + host + "]";
  std::cout << "mibyan mcp serve listening on http://" << host << ":"
            << server->port() << hs.path << std::endl;
  MIBYAN_LOG(info, "mcp-serve", "serving on http://" << host << ":"
                                                     << server->port()
                                                     << hs.path);
  int s = 0;
  for (;;) {
    if (sigwait(&http_sig->set, &s) == 0 && (s == SIGINT || s == SIGTERM))
      break;
  }
  MIBYAN_LOG(info, "mcp-serve", "signal " << s << ": shutting down");
  server->shutdown();
  server.reset();
  core->shutdown();
  core.reset();
  rt.reset();
  return 0;
}

} // namespace mibyan::cli
