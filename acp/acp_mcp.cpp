#include "acp/acp_mcp.hpp"

#include "base/log.hpp"
#include "config/options.hpp"
#include "mibyan/runtime.hpp"
#include "runtime/runtime.hpp"
#include "runtime/session_access.hpp"
#include "tools/mcp/mcp_tools.hpp"
#include "tools/registry.hpp"

namespace mibyan {

namespace {

// [{name, value}] as pairs; false when an entry is malformed.
bool pairs_of(const json::value* list, const char* what,
              std::vector<std::pair<std::string, std::string>>& out,
              std::string& why) {
  if (list == nullptr || list->is_null())
    return true;
  if (!list->is_array()) {
    why = std::string{what} + " must be an array of {name, value}";
    return false;
  }
  for (auto& e : list->as_array()) {
    if (!e.is_object() || e.get_string("name").empty()
        || e.find("value") == nullptr || !e.find("value")->is_string()) {
      why = std::string{what} + " entries need a name and a string value";
      return false;
    }
    out.emplace_back(e.get_string("name"), e.get_string("value"));
  }
  return true;
}

bool server_of(const json::value& j, const std::string& cwd,
               mcp_server_options& s, std::string& why) {
  // Roots: the session's working directory. No elicitation: an ACP
  // session has no channel for questions (docs/acp.md).
  s.roots = true;
  s.root_dirs = {cwd};
  s.elicitation = false;
  if (!j.is_object()) {
    why = "an mcpServers entry is no object";
    return false;
  }
  s.name = j.get_string("name");
  if (s.name.empty()) {
    why = "an mcpServers entry has no name";
    return false;
  }
  auto type = j.get_string("type", "stdio");
  if (type == "http") {
    s.transport = "http";
    s.url = j.get_string("url");
    if (s.url.empty()) {
      why = "MCP server '" + s.name + "': http needs a url";
      return false;
    }
    return pairs_of(j.find("headers"), "headers", s.headers, why);
  }
  if (type != "stdio") {
    why = "MCP server '" + s.name + "': the " + type
          + " transport is not offered (see mcpCapabilities)";
    return false;
  }
  s.transport = "stdio";
  s.command = j.get_string("command");
  if (s.command.empty()) {
    why = "MCP server '" + s.name + "': stdio needs a command";
    return false;
  }
  if (auto args = j.find("args"); args != nullptr && !args->is_null()) {
    if (!args->is_array()) {
      why = "MCP server '" + s.name + "': args must be an array of strings";
      return false;
    }
    for (auto& a : args->as_array()) {
      if (!a.is_string()) {
        why = "MCP server '" + s.name + "': args must be strings";
        return false;
      }
      s.args.push_back(a.as_string());
    }
  }
  s.cwd = cwd;
  return pairs_of(j.find("env"), "env", s.env, why);
}

} // namespace

std::shared_ptr<acp_session_tools>
acp_session_tools::start(runtime& rt, const std::string& cwd,
                         const json::value& servers, std::string& why) {
  std::shared_ptr<acp_session_tools> t{new acp_session_tools};
  t->rt_ = &rt;
  t->cfg_ = std::make_unique<options>(config_of(rt));
  t->cfg_->mcp_servers.clear();
  if (!servers.is_array()) {
    why = "mcpServers must be an array";
    return nullptr;
  }
  for (auto& j : servers.as_array()) {
    mcp_server_options s;
    if (!server_of(j, cwd, s, why))
      return nullptr;
    for (auto& other : t->cfg_->mcp_servers)
      if (other.name == s.name) {
        why = "two MCP servers named '" + s.name + "'";
        return nullptr;
      }
    t->cfg_->mcp_servers.push_back(std::move(s));
  }
  t->reg_ = std::make_shared<tool_registry>();
  t->mgr_ = std::make_unique<mcp_manager>(*t->cfg_, runtime_http_client(rt));
  t->mgr_->set_roots_provider([cwd] { return std::vector<std::string>{cwd}; });
  t->mgr_->start();
  for (auto& w : t->mgr_->register_tools(*t->reg_))
    MIBYAN_LOG(warning, "acp", "MCP: " << w);
  for (auto& r : t->mgr_->report())
    if (!r.error.empty())
      MIBYAN_LOG(warning, "acp", "MCP server '" << r.name << "' ("
                                   << r.state << "): " << r.error);
    else
      MIBYAN_LOG(info, "acp", "MCP server '" << r.name << "': "
                                << r.tools.size() << " tool(s)");
  return t;
}

acp_session_tools::~acp_session_tools() { stop(); }

void acp_session_tools::bind(const std::string& session_id) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (stopped_)
    return;
  set_session_tools(*rt_, session_id, reg_);
  bound_.push_back(session_id);
}

void acp_session_tools::stop() {
  std::vector<std::string> bound;
  {
    std::lock_guard<std::mutex> guard{mtx_};
    if (stopped_)
      return;
    stopped_ = true;
    bound.swap(bound_);
  }
  for (auto& sid : bound)
    set_session_tools(*rt_, sid, nullptr);
  if (mgr_)
    mgr_->shutdown();
}

std::vector<std::string> acp_session_tools::names() const {
  std::vector<std::string> out;
  if (reg_)
    for (auto t : reg_->all())
      out.push_back(t->name());
  return out;
}

} // namespace mibyan
