// PLACEHOLDER: replaced by the real implementation.
#include "tools/core_tools.hpp"
#include "config/options.hpp"

namespace mibyan {
namespace {
class placeholder final : public tool {
public:
  const char* name() const override { return "web_extract"; }
  const char* toolset() const override { return "pending"; }
  std::string description() const override { return "not yet built"; }
  json::value schema() const override {
    json::value s; s["type"] = "object"; s["properties"] = json::value::make_object(); return s;
  }
  json::value run(const json::value&, const tool_context&) const override {
    return error_result("web_extract is not built yet");
  }
};
} // namespace
std::unique_ptr<tool> make_web_extract_tool() { return std::make_unique<placeholder>(); }
} // namespace mibyan
