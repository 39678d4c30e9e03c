// A facade application: one runtime, one host tool, one agent.
//
//   facade_app BASE_URL MODEL [PROMPT]
//
// Talks to an OpenAI-compatible endpoint (provider "custom"; the key comes
// from $MIBYAN_EXAMPLE_API_KEY, else a placeholder for local servers).
// The host tool `lookup_order` is offered to the model and to execute_code
// scripts. Prints the tool activity, then "final: <answer>".
#include <cstdlib>
#include <iostream>
#include <string>

#include <mibyan/mibyan.hpp>

namespace {

mibyan::host_tool lookup_order_tool() {
  mibyan::host_tool t;
  t.name = "lookup_order";
  t.description = "Returns the shipping status of an order.";
  t.schema_json = R"({"type":"object",)"
                  R"("properties":{"order_id":{"type":"string"}},)"
                  R"("required":["order_id"]})";
  t.allow_in_scripts = true;
  t.handler = [](const std::string& args_json, const mibyan::host_tool_call&) {
    // A real application would parse args_json with its JSON library.
    auto key = std::string{"\"order_id\":\""};
    auto at = args_json.find(key);
    std::string id = "?";
    if (at != std::string::npos) {
      auto start = at + key.size();
      id = args_json.substr(start, args_json.find('"', start) - start);
    }
    return R"({"order_id":")" + id + R"(","status":"shipped-by-host"})";
  };
  return t;
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: facade_app BASE_URL MODEL [PROMPT]\n";
    return 2;
  }
  mibyan::runtime_config cfg;
  cfg.provider.provider = "custom";
  cfg.provider.base_url = argv[1];
  cfg.provider.model = argv[2];
  cfg.tools.push_back(lookup_order_tool());
  auto made = mibyan::runtime::create(cfg);
  if (!made) {
    std::cerr << "facade_app: " << made.error << "\n";
    return 1;
  }
  std::unique_ptr<mibyan::runtime> rt = std::move(*made);

  mibyan::agent_config ac;
  const char* key = std::getenv("MIBYAN_EXAMPLE_API_KEY");
  ac.provider.api_key = key != nullptr ? key : "sk-local-placeholder";
  ac.on_text = [](const std::string& text) { std::cout << text << std::flush; };
  ac.on_tool_start = [](const mibyan::tool_event& e) {
    std::cout << "[tool start] " << e.tool << " " << e.args_json << "\n";
  };
  ac.on_tool_end = [](const mibyan::tool_event& e) {
    std::cout << "[tool end] " << e.tool << " " << e.result_json << "\n";
  };
  mibyan::agent agent{*rt, ac};
  std::string prompt = argc > 3 ? argv[3] : "Where is order 42?";
  auto result = agent.run(prompt).get();
  if (!result.error.empty())
    std::cerr << "facade_app: " << result.error << "\n";
  std::cout << "\nfinal: " << result.final_response.value_or("") << "\n";
  agent.close();
  return result.completed ? 0 : 1;
}
