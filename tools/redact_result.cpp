#include "tools/redact_result.hpp"

#include "base/redact.hpp"

namespace mibyan {

const redactor& context_redactor(const tool_context& ctx) {
  return ctx.redact != nullptr ? *ctx.redact : process_redactor();
}

std::string redact_text(const tool_context& ctx, std::string text) {
  context_redactor(ctx).redact(text);
  return text;
}

} // namespace mibyan
