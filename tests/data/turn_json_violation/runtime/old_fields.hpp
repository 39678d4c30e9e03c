// Fixture for scripts/check_turn_json.py: a turn carried as JSON text.
// Never compiled.
#pragma once
#include <string>

struct turn_outcome {
  std::string result_json;
  std::string history_json;
};
