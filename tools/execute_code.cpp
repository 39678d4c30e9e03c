#include "tools/execute_code.hpp"

#include <algorithm>

#include "config/options.hpp"
#include "kernels/stub_generator.hpp"

namespace mibyan {

namespace {

class execute_code_tool final : public tool {
public:
  execute_code_tool(const options& cfg, std::vector<std::string> tools,
                    std::vector<script_tool_spec> specs,
                    std::shared_ptr<const script_catalog> catalog)
    : cfg_(cfg), tools_(std::move(tools)), specs_(std::move(specs)),
      catalog_(std::move(catalog)) {}

  const char* name() const override { return "execute_code"; }
  const char* toolset() const override { return "code_execution"; }
  bool parallel_safe() const override { return false; }

  std::string description() const override {
    // The catalog's current set when there is one (it follows MCP tool
    // list changes), else the set given at construction.
    std::shared_ptr<const script_catalog::snapshot> snap;
    if (catalog_)
      snap = catalog_->current();
    const auto& tools_ = snap ? snap->names : this->tools_;
    const auto& specs_ = snap ? snap->specs : this->specs_;
    auto& ce = cfg_.code_execution;
    std::string d
      = "Run a Python script that calls tools as functions. Use it for 3 or "
        "more tool calls with logic between them (loops, filtering, "
        "aggregation); use normal tool calls for a single call or when you "
        "must read a result in full. Only what the script prints comes back "
        "to you. State (variables, imports) persists between calls in this "
        "session and is lost on timeout or interrupt; reset=true starts "
        "fresh.\n";
    std::vector<std::string> example;
    for (auto t : {"web_search", "terminal"})
      if (std::find(tools_.begin(), tools_.end(), t) != tools_.end())
        example.push_back(t);
    if (example.empty())
      for (size_t i = 0; i < tools_.size() && i < 2; ++i)
        example.push_back(tools_[i]);
    d += "Import: from mibyan_tools import ";
    if (example.empty()) {
      d += "...";
    } else {
      for (size_t i = 0; i < example.size(); ++i)
        d += (i ? ", " : "") + example[i];
    }
    d += "\nAvailable in the script (each returns a parsed dict):\n";
    for (auto& t : tools_) {
      for (auto& h : specs_) {
        if (h.name != t)
          continue;
        auto shown = h; // MCP tools live in the `mcp` namespace
        if (!h.mcp_server.empty())
          shown.name = "mcp." + h.mcp_server + "." + h.mcp_tool;
        d += "  " + stub_signature(shown)
             + (h.returns.empty() ? " -> dict (" + h.doc + ")"
                                  : " -> " + h.returns)
             + "\n";
        break; // the first spec of a name is the one the stub renders
      }
    }
    if (tools_.empty())
      d += "  (no tools; helpers only)\n";
    d += "Helpers (import explicitly): json_parse(text), shell_quote(s), "
         "retry(fn, max_attempts=3, delay=2).\n";
    d += "Limits per call: " + std::to_string(ce.timeout) + " s timeout, at "
         "most " + std::to_string(ce.max_tool_calls) + " tool calls, stdout "
         "shown up to " + std::to_string(ce.max_stdout_bytes / 1000) + " KB "
         "(head and tail; the full text is saved to a file), stderr up to "
         + std::to_string(ce.max_stderr_bytes / 1000) + " KB.\n";
    if (ce.mode == "strict")
      d += "Runs in its own temporary directory with the system Python: pass "
           "absolute paths.";
    else
      d += "Runs in the session's working directory; the interpreter is the "
           "active venv/conda python, else the default one.";
    return d;
  }

  json::value schema() const override {
    return *json::parse(R"({"type":"object","properties":{
      "code":{"type":"string","description":"Python source. Import tools from mibyan_tools; print the result."},
      "reset":{"type":"boolean","description":"Discard the kernel's state and start fresh before running."}},
      "required":["code"]})").v;
  }

  std::chrono::milliseconds deadline(const json::value&,
                                     const options& cfg) const override {
    return std::chrono::seconds(cfg.code_execution.timeout
                                + cfg.terminal.kill_grace + 10);
  }

  json::value run(const json::value&, const tool_context&) const override {
    return error_result("execute_code runs in a session kernel and must be "
                        "called through the runtime's dispatcher.");
  }

private:
  const options& cfg_;
  std::vector<std::string> tools_;
  std::vector<script_tool_spec> specs_;
  std::shared_ptr<const script_catalog> catalog_;
};

} // namespace

std::unique_ptr<tool> make_execute_code_tool(
  const options& cfg, std::vector<std::string> tools,
  std::vector<script_tool_spec> specs,
  std::shared_ptr<const script_catalog> catalog) {
  return std::make_unique<execute_code_tool>(cfg, std::move(tools),
                                             std::move(specs),
                                             std::move(catalog));
}

} // namespace mibyan
