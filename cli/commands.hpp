// File: cli/commands.hpp
//
// The `mibyan` subcommands. Each returns the process exit code:
// 0 success, 1 runtime failure, 2 usage or configuration error.
#pragma once

#include <string>
#include <vector>

namespace mibyan {
struct options;
}

namespace mibyan::cli {

/// Global flags, parsed before the subcommand.
struct global_flags {
  std::string log_file;
  std::string log_level;
};

int tool_command(const std::vector<std::string>& args,
                 const global_flags& flags);
int config_command(const std::vector<std::string>& args,
                   const global_flags& flags);
int sessions_command(const std::vector<std::string>& args,
                     const global_flags& flags);
int run_command(const std::vector<std::string>& args,
                const global_flags& flags);
int chat_command(const std::vector<std::string>& args,
                 const global_flags& flags);

/// Loads the configuration and applies logging settings. Prints the error
/// and returns false when the configuration is invalid.
bool load_config_or_report(const global_flags& flags, options& out);

} // namespace mibyan::cli
