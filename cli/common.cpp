#include "cli/commands.hpp"

#include <cstdio>
#include <ctime>
#include <iostream>
#include <random>

#include "config/loader.hpp"
#include "base/log.hpp"
#include "runtime/runtime.hpp"
#include "runtime/store_config.hpp"
#include "storage/store_backend.hpp"

namespace mibyan::cli {


std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s + ",") {
    if (c == ',') {
      auto b = cur.find_first_not_of(' ');
      if (b != std::string::npos)
        out.push_back(cur.substr(b, cur.find_last_not_of(' ') - b + 1));
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

void print_context_warnings(const std::string& notice, const char* who) {
  size_t at = 0;
  while (at < notice.size()) {
    auto end = notice.find('\n', at);
    if (end == std::string::npos)
      end = notice.size();
    auto line = notice.substr(at, end - at);
    if (line.rfind("warning: ", 0) == 0)
      std::cerr << who << ": " << line << "\n";
    at = end + 1;
  }
  std::cerr << std::flush;
}

bool is_agent_flag(const std::string& flag) {
  return flag == "--provider" || flag == "--model" || flag == "--base-url"
         || flag == "--api-key" || flag == "--session" || flag == "--resume"
         || flag == "--toolsets" || flag == "--max-iterations";
}

std::string apply_agent_flag(const std::string& flag, const std::string& value,
                             turn_call& call) {
  if (flag == "--provider") {
    call.provider.provider = value;
  } else if (flag == "--model") {
    call.provider.model = value;
  } else if (flag == "--base-url") {
    call.provider.base_url = value;
  } else if (flag == "--api-key") {
    call.provider.api_key = value;
    std::cerr << "mibyan: warning: a key given with --api-key is visible to "
                 "every local user in the process list; prefer the "
                 "provider's environment variable or $MIBYAN_HOME/.env\n";
  } else if (flag == "--session" || flag == "--resume") {
    if (value.find_first_not_of(" \t") == std::string::npos)
      return flag + " needs a non-empty id";
    call.session_id = value;
  } else if (flag == "--toolsets") {
    call.toolsets = split_list(value);
  } else if (flag == "--max-iterations") {
    char* end = nullptr;
    auto n = std::strtoll(value.c_str(), &end, 10);
    if (value.empty() || *end != '\0' || n < 1 || n > 10000)
      return "--max-iterations must be an integer from 1 to 10000, got '"
             + value + "'";
    call.max_iterations = n;
  } else {
    return "unknown option " + flag;
  }
  return {};
}

bool load_config_or_report(const global_flags& flags, options& out) {
  auto loaded = load_options();
  if (!loaded.ok()) {
    std::cerr << "mibyan: configuration error: " << loaded.error << "\n";
    return false;
  }
  out = std::move(*loaded);
  // The storage section's checks that need the environment and the build
  // (docs/storage.md): a store that cannot be opened stops every command.
  auto store = store_options_from(out);
  status store_ok = store ? check_store_backend(store->backend)
                          : store.get_status();
  if (!store_ok) {
    std::cerr << "mibyan: configuration error: " << store_ok.error << "\n";
    return false;
  }
  out.approvals.yolo = flags.yolo;
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
