// Conversation actor, part: where oversized tool results are saved (how the
// actor is split: actors/conversation_internal.hpp).
#include "actors/conversation_internal.hpp"

#include <cctype>
#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;

namespace mibyan::conversation_detail {

// Saves an oversized tool result for result shaping.
std::string save_result(const std::string& call_id, std::string_view text) {
  std::error_code ec;
  auto dir = fs::temp_directory_path(ec) / "mibyan-results";
  if (ec)
    return {};
  fs::create_directories(dir, ec);
  std::string safe;
  for (char c : call_id)
    safe += (std::isalnum(static_cast<unsigned char>(c)) || c == '_'
             || c == '-')
              ? c
              : '_';
  auto path = dir / (safe.empty() ? std::string{"result"} : safe);
  path += ".txt";
  std::ofstream out{path, std::ios::binary | std::ios::trunc};
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out)
    return {};
  return path.string();
}

} // namespace mibyan::conversation_detail
