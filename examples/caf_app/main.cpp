// A CAF application with its own actor system; Mibyan's actors live in it.
//
//   caf_app BASE_URL MODEL [PROMPT]
//
// Spawns a Mibyan tool actor and a conversation actor into the
// application's system, calls the host tool `lookup_order` directly by
// message, then runs one turn by message. The application's own actor
// `printer` receives the turn's events. Prints "final: <the answer>".
#include <cstdlib>
#include <iostream>
#include <string>

#include <caf/all.hpp>

#include <mibyan/actors.hpp>

namespace {

mibyan::host_tool lookup_order_tool() {
  mibyan::host_tool t;
  t.name = "lookup_order";
  t.description = "Returns the shipping status of an order.";
  t.schema_json = R"({"type":"object",)"
                  R"("properties":{"order_id":{"type":"string"}},)"
                  R"("required":["order_id"]})";
  t.handler = [](const std::string& args_json, const mibyan::host_tool_call&) {
    auto id = args_json.find("42") != std::string::npos ? "42" : "?";
    return std::string{R"({"order_id":")"} + id
           + R"(","status":"shipped-by-caf-host"})";
  };
  return t;
}

// An actor of the application: prints the tool calls the conversation
// reports (streamed text is left to the final answer).
mibyan::actors::event_listener::behavior_type printer() {
  return {
    [](mibyan::actors::event_atom, const std::string&, const std::string&) {},
    [](mibyan::actors::event_atom, const mibyan::tool_event& e) {
      if (e.what == mibyan::tool_event::phase::start)
        std::cout << "[tool_start] " << e.tool << " " << e.args_json << "\n";
      else
        std::cout << "[tool_end] " << e.tool << " " << e.result_json << "\n";
    },
  };
}

} // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: caf_app BASE_URL MODEL [PROMPT]\n";
    return 2;
  }
  caf::actor_system_config cfg;
  mibyan::actors::configure(cfg);
  caf::actor_system sys{cfg};
  int rc = 1;
  {
    mibyan::runtime_config rc_cfg;
    rc_cfg.provider.provider = "custom";
    rc_cfg.provider.base_url = argv[1];
    rc_cfg.provider.model = argv[2];
    rc_cfg.tools.push_back(lookup_order_tool());
    auto made = mibyan::actors::attach(sys, rc_cfg);
    if (!made) {
      std::cerr << "caf_app: " << made.error << "\n";
      return 1;
    }
    std::unique_ptr<mibyan::runtime> rt = std::move(*made);
    caf::scoped_actor self{sys};

    // A tool call by message.
    auto tools = mibyan::actors::spawn_tool_actor(*rt);
    self->request(tools, caf::infinite, mibyan::actors::tool_atom_v,
                  std::string{"caf-session"}, std::string{"lookup_order"},
                  std::string{R"({"order_id":"42"})"})
      .receive(
        [](const std::string& result) {
          std::cout << "tool actor: " << result << "\n";
        },
        [&](caf::error& err) {
          std::cerr << "tool actor failed: " << sys.render(err) << "\n";
        });

    // A turn by message, events to the application's own actor.
    mibyan::agent_config ac;
    const char* key = std::getenv("MIBYAN_EXAMPLE_API_KEY");
    ac.provider.api_key = key != nullptr ? key : "sk-local-placeholder";
    auto listener = sys.spawn(printer);
    auto conv = mibyan::actors::spawn_conversation(*rt, ac, listener);
    std::string prompt = argc > 3 ? argv[3] : "Where is order 42?";
    self->request(conv, caf::infinite, mibyan::actors::run_atom_v, prompt)
      .receive(
        [&](const mibyan::turn_result& r) {
          if (!r.error.empty())
            std::cerr << "caf_app: " << r.error << "\n";
          std::cout << "final: " << r.final_response.value_or("") << "\n";
          rc = r.completed ? 0 : 1;
        },
        [&](caf::error& err) {
          std::cerr << "conversation failed: " << sys.render(err) << "\n";
        });
    // The runtime goes after the actors spawned into it have exited and
    // before the system (mibyan/actors.hpp, "Lifetime"): monitor them,
    // stop them, wait for their down messages.
    self->monitor(conv);
    self->monitor(tools);
    self->monitor(listener);
    self->send_exit(conv, caf::exit_reason::user_shutdown);
    self->send_exit(tools, caf::exit_reason::user_shutdown);
    self->send_exit(listener, caf::exit_reason::user_shutdown);
    for (int down = 0; down < 3; ++down)
      self->receive([](caf::down_msg&) {});
  }
  return rc;
}
