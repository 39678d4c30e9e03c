// `mibyan mcp list [--json]`, `mibyan mcp test NAME`, `mibyan mcp serve`
// (cli/mcp_serve_command.cpp) and `mibyan mcp login/logout NAME`
// (cli/mcp_login.cpp) (docs/mcp.md).
#include "cli/commands.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>

#include "base/http_client.hpp"
#include "base/json.hpp"
#include "cli/mcp_login.hpp"
#include "config/options.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "tools/registry.hpp"

namespace mibyan::cli {

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0)
    .count();
}

std::string fmt_ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", ms);
  return buf;
}

int mcp_list(const options& opts, bool as_json) {
  http_client http;
  mcp_manager mgr{opts, &http};
  mgr.start();
  tool_registry reg;
  register_core_tools(reg); // so that built-in collisions show
  auto warnings = mgr.register_tools(reg);
  auto rep = mgr.report();
  if (as_json) {
    json::value servers = json::value::make_array();
    for (auto& r : rep) {
      json::value x;
      x["name"] = r.name;
      x["transport"] = r.transport;
      x["state"] = r.state;
      if (!r.error.empty())
        x["error"] = r.error;
      json::value tools = json::value::make_array();
      for (auto& t : r.tools)
        tools.push_back(t);
      x["tools"] = std::move(tools);
      if (r.connect_ms >= 0)
        x["connect_ms"] = r.connect_ms;
      servers.push_back(std::move(x));
    }
    json::value out;
    out["servers"] = std::move(servers);
    json::value w = json::value::make_array();
    for (auto& x : warnings)
      w.push_back(x);
    out["warnings"] = std::move(w);
    std::cout << out.pretty() << "\n";
  } else {
    if (rep.empty())
      std::cout << "no MCP servers configured (mcp_servers in "
                << opts.home << "/config.yaml)\n";
    for (auto& r : rep) {
      std::cout << r.name << "  [" << r.transport << "]  " << r.state;
      if (r.connect_ms >= 0)
        std::cout << "  (" << fmt_ms(r.connect_ms) << ")";
      std::cout << "\n";
      if (!r.error.empty())
        std::cout << "  error: " << r.error << "\n";
      for (auto& t : r.tools)
        std::cout << "  " << t << "\n";
    }
    for (auto& w : warnings)
      std::cout << "warning: " << w << "\n";
  }
  mgr.shutdown();
  for (auto& r : rep)
    if (r.state == "failed" || r.state == "needs_login")
      return 1;
  return 0;
}

int mcp_test(const options& opts, const std::string& name) {
  const mcp_server_options* conf = nullptr;
  for (auto& s : opts.mcp_servers)
    if (s.name == name)
      conf = &s;
  if (conf == nullptr) {
    std::cerr << "mibyan mcp test: no server '" << name
              << "' under mcp_servers\n";
    return 2;
  }
  http_client http;
  mcp_session s{*conf, opts, &http};
  std::cout << "server " << name << " [" << conf->transport << "]\n";
  auto t0 = clock_type::now();
  auto st = s.connect();
  auto connect_ms = ms_since(t0);
  if (!st) {
    std::cout << "connect: FAILED after " << fmt_ms(connect_ms) << ": "
              << st.error << "\n";
    return 1;
  }
  auto tools = s.tools();
  std::cout << "protocol version: " << s.protocol_version() << "\n";
  std::cout << "connect + initialize + tools/list: " << fmt_ms(connect_ms)
            << " (" << tools.size() << " tools)\n";
  int admitted = 0;
  for (auto& t : tools) {
    bool in = mcp_tool_admitted(*conf, t.name);
    admitted += in ? 1 : 0;
    std::cout << "  " << (in ? "+ " : "- ") << mcp_tool_name(name, t.name)
              << (in ? "" : "  (filtered out)") << "\n";
  }
  std::cout << "resources: " << (s.has_resources() ? "yes" : "no")
            << ", prompts: " << (s.has_prompts() ? "yes" : "no") << "\n";
  int failures = 0;
  for (int i = 0; i < 3; ++i) {
    auto p0 = clock_type::now();
    auto ps = s.ping(std::chrono::seconds{conf->connect_timeout});
    if (ps)
      std::cout << "ping " << (i + 1) << ": " << fmt_ms(ms_since(p0)) << "\n";
    else {
      std::cout << "ping " << (i + 1) << ": FAILED: " << ps.error << "\n";
      ++failures;
    }
  }
  s.close();
  std::cout << (failures == 0 ? "OK" : "FAILED") << ": " << admitted
            << " tools registered\n";
  return failures == 0 ? 0 : 1;
}

} // namespace

int mcp_command(const std::vector<std::string>& args,
                const global_flags& flags) {
  if (!args.empty() && args[0] == "serve")
    return mcp_serve_command({args.begin() + 1, args.end()}, flags);
  if (!args.empty() && (args[0] == "login" || args[0] == "logout")) {
    options opts;
    if (!load_config_or_report(flags, opts))
      return 2;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    return args[0] == "login" ? mcp_login(opts, rest) : mcp_logout(opts, rest);
  }
  bool as_json = false;
  std::vector<std::string> pos;
  for (auto& a : args) {
    if (a == "--json")
      as_json = true;
    else
      pos.push_back(a);
  }
  if (pos.empty() || (pos[0] == "list" && pos.size() != 1)
      || (pos[0] == "test" && pos.size() != 2)
      || (pos[0] != "list" && pos[0] != "test")) {
    std::cerr << "usage: mibyan mcp list [--json] | mibyan mcp test NAME | "
                 "mibyan mcp serve [--listen HOST:PORT] [--toolsets a,b] | "
                 "mibyan mcp login NAME | mibyan mcp logout NAME\n";
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  if (pos[0] == "list")
    return mcp_list(opts, as_json);
  return mcp_test(opts, pos[1]);
}

} // namespace mibyan::cli
