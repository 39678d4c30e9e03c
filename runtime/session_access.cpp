#include "runtime/session_access.hpp"

#include "runtime/runtime_impl.hpp"
#include "tools/agent/agent_tool_state.hpp"
#include "tools/client_files.hpp"
#include "tools/registry.hpp"

namespace mibyan {

void set_session_file_access(runtime& rt, const std::string& session_id,
                             std::shared_ptr<const client_file_access> files) {
  auto& p = runtime_access::of(rt);
  if (p.svc && p.svc->agent_tools)
    p.svc->agent_tools->set_client_files(session_id, std::move(files));
}

void set_session_tools(runtime& rt, const std::string& session_id,
                       std::shared_ptr<const tool_registry> tools) {
  auto& p = runtime_access::of(rt);
  if (p.svc && p.svc->agent_tools)
    p.svc->agent_tools->set_session_tools(session_id, std::move(tools));
}

http_client* runtime_http_client(runtime& rt) {
  auto& p = runtime_access::of(rt);
  return p.svc ? p.svc->http.get() : nullptr;
}

std::shared_ptr<session_store> runtime_session_store(runtime& rt) {
  return runtime_access::of(rt).store;
}

} // namespace mibyan
