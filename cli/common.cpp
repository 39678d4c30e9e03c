#include "cli/commands.hpp"

#include <iostream>

#include "config/loader.hpp"
#include "runtime/log.hpp"

namespace mibyan::cli {

bool load_config_or_report(const global_flags& flags, options& out) {
  auto loaded = load_options();
  if (!loaded.ok()) {
    std::cerr << "mibyan: configuration error: " << loaded.error << "\n";
    return false;
  }
  out = std::move(loaded.opts);
  auto level_text = flags.log_level.empty() ? out.logging.level
                                            : flags.log_level;
  log::level lvl;
  if (!log::parse_level(level_text, lvl)) {
    std::cerr << "mibyan: unknown log level '" << level_text
              << "' (use debug, info, warning, error or off)\n";
    return false;
  }
  if (std::getenv("MIBYAN_LOG_LEVEL") == nullptr || !flags.log_level.empty())
    log::set_level(lvl);
  auto file = flags.log_file.empty() ? out.logging.file : flags.log_file;
  if (!file.empty() && !log::log_to_file(file)) {
    std::cerr << "mibyan: cannot open log file " << file << "\n";
    return false;
  }
  return true;
}

} // namespace mibyan::cli
