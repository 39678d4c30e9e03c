#include "approvals/approval_engine.hpp"

#include <algorithm>

#include "approvals/deny_glob.hpp"
#include "approvals/patterns.hpp"

namespace mibyan::approvals {

assessment assess(std::string_view command, const policy& p) {
  assessment a;
  auto variants = make_variants(command, p.paths);
  auto found = scan_command(variants);
  // 1. hardline: unconditional.
  if (!found.hardline.empty()) {
    a.result = outcome::hardline;
    a.detail = found.hardline;
    return a;
  }
  // 2. user deny globs: unconditional.
  if (p.deny_globs != nullptr && !p.deny_globs->empty()) {
    auto texts = variants.cased;
    texts.insert(texts.end(), variants.lower.begin(), variants.lower.end());
    auto glob = first_matching_glob(*p.deny_globs, texts);
    if (!glob.empty()) {
      a.result = outcome::denied_by_rule;
      a.detail = glob;
      return a;
    }
  }
  // 3. (isolated backends: Mibyan runs commands on the host only.)
  // 4. sudo stdin guard.
  if (found.sudo_stdin && !p.sudo_password) {
    a.result = outcome::sudo_stdin;
    return a;
  }
  // 5. bypass.
  if (p.bypass) {
    a.reason = "bypass";
    return a;
  }
  if (found.dangerous.empty()) {
    a.reason = "clean";
    return a;
  }
  // 6. permanent allowlist: only for commands without shell operators.
  // 7. keys approved for the session (always) or permanently (6) skip.
  bool operators = has_shell_operators(command);
  for (auto& key : found.dangerous) {
    bool session = p.session != nullptr && p.session->count(key) > 0;
    bool permanent = !operators && p.permanent != nullptr
                     && std::find(p.permanent->begin(), p.permanent->end(),
                                  key) != p.permanent->end();
    if (!session && !permanent)
      a.keys.push_back(key);
  }
  if (a.keys.empty()) {
    a.reason = "approved";
    return a;
  }
  a.result = outcome::needs_approval;
  return a;
}

} // namespace mibyan::approvals
