// Fixture for scripts/check_turn_json.py: reads a turn result back from
// its JSON form, three ways. Never compiled.
#include "base/json.hpp"

std::string answer_of(const std::string& text) {
  auto parsed = mibyan::json::parse(text);
  auto exit = (*parsed.v)["turn_exit_reason"].as_string();
  auto some = mibyan::json::parse_members(text, {"completed",
                                                 "final_response"});
  return parsed.v->get_string("final_response", "") + exit;
}

void render(mibyan::json::value& out) {
  out["final_response"] = "written, not read: allowed";
}
