#include "tools/approval_gate.hpp"

#include "approvals/approval_engine.hpp"
#include "approvals/approval_messages.hpp"
#include "approvals/approval_service.hpp"
#include "config/options.hpp"
#include "tools/file_io.hpp"
#include "tools/path_policy.hpp"

namespace mibyan {

std::optional<json::value> check_command(const std::string& command,
                                         const tool_context& ctx) {
  approval_verdict v;
  if (ctx.approvals != nullptr) {
    v = ctx.approvals->check_command(
      command, approval_call{ctx.session_id, ctx.from_script, ctx.cancelled});
  } else if (ctx.cfg != nullptr) {
    approvals::policy p;
    p.paths.mibyan_home = ctx.cfg->home;
    if (const char* h = std::getenv("HOME"))
      p.paths.home = h;
    p.deny_globs = &ctx.cfg->approvals.deny;
    p.sudo_password = true;
    p.bypass = true; // no channel here: only the unconditional steps apply
    auto a = approvals::assess(command, p);
    if (a.result == approvals::outcome::hardline) {
      v.approved = false;
      v.hardline = true;
      v.message = approvals::hardline_message(a.detail);
    } else if (a.result == approvals::outcome::denied_by_rule) {
      v.approved = false;
      v.message = approvals::deny_rule_message(a.detail);
    }
  }
  if (v.approved)
    return std::nullopt;
  json::value r;
  r["output"] = "";
  r["exit_code"] = -1;
  r["error"] = v.message;
  r["status"] = "blocked";
  r["approved"] = false;
  r["hardline"] = v.hardline;
  return r;
}

std::optional<std::string> check_write(const std::string& abs_path,
                                       const std::string& tool_name,
                                       const std::string& preview,
                                       const tool_context& ctx) {
  return check_write_keyed(abs_path,
                           write_approval_key(abs_path, mibyan_home_of(ctx)),
                           tool_name, preview, ctx);
}

std::optional<std::string> check_write_keyed(
  const std::string& abs_path, const std::optional<std::string>& key,
  const std::string& tool_name, const std::string& preview,
  const tool_context& ctx) {
  constexpr size_t max_preview = 2000;
  if (!key || ctx.approvals == nullptr)
    return std::nullopt;
  auto what = tool_name + " " + abs_path;
  if (!preview.empty())
    what += "\n" + (preview.size() > max_preview
                       ? preview.substr(0, max_preview) + "\n[...]"
                       : preview);
  auto v = ctx.approvals->check_write(
    what, *key, approval_call{ctx.session_id, ctx.from_script, ctx.cancelled});
  if (v.approved)
    return std::nullopt;
  return v.message;
}

} // namespace mibyan
