#include "cli/commands.hpp"

#include <iostream>

#include "config/loader.hpp"

namespace mibyan::cli {

int config_command(const std::vector<std::string>& args,
                   const global_flags& flags) {
  if (args.empty() || (args[0] != "check" && args[0] != "show")) {
    std::cerr << "usage: mibyan config check|show\n";
    return 2;
  }
  options opts;
  if (!load_config_or_report(flags, opts))
    return 2;
  if (args[0] == "check") {
    std::cout << "config OK: "
              << (opts.config_path.empty()
                    ? "no config file (" + opts.home
                        + "/config.yaml), using defaults"
                    : opts.config_path)
              << "\n";
    return 0;
  }
  std::cout << render_options(opts);
  return 0;
}

} // namespace mibyan::cli
