#include "tools/client_files.hpp"

#include "tools/agent/agent_tool_state.hpp"
#include "tools/tool.hpp"

namespace mibyan {

std::shared_ptr<const client_file_access>
client_files_of(const tool_context& ctx) {
  if (ctx.from_script || ctx.agent == nullptr || ctx.session_id.empty())
    return nullptr;
  if (auto own = ctx.agent->client_files(ctx.session_id))
    return own;
  // A delegate_task child ("<parent>::child::<n>") edits the parent's
  // files through the same client.
  auto cut = ctx.session_id.find("::child::");
  if (cut == std::string::npos || cut == 0)
    return nullptr;
  return ctx.agent->client_files(ctx.session_id.substr(0, cut));
}

void report_file_change(const tool_context& ctx, const std::string& path,
                        const std::string* old_text,
                        const std::string& new_text) {
  auto files = client_files_of(ctx);
  if (files && files->changed)
    files->changed(ctx.call_id, path, old_text, new_text);
}

} // namespace mibyan
