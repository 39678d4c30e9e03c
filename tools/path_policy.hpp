// File: tools/path_policy.hpp
//
// Which paths the file tools refuse to read or write: Mibyan's own secrets
// and configuration, SSH keys and common credential stores. Both the path as
// given and its symlink-resolved form are checked, so a link does not get
// around the rule.
//
// Thread-safe (no shared state); never throws.
#pragma once

#include <optional>
#include <string>

namespace mibyan {

/// Returns why read_file must not read `abs_path`, or nullopt when reading
/// is allowed. Refused: `<mibyan_home>/.env`, `<mibyan_home>/auth.json`,
/// private keys under `~/.ssh/` (`id_*` without `.pub`), `~/.netrc`,
/// `~/.git-credentials`, `~/.aws/credentials`, `~/.pgpass`,
/// `~/.docker/config.json`, everything under `~/.gnupg/`.
std::optional<std::string> read_refusal(const std::string& abs_path,
                                        const std::string& mibyan_home);

/// Returns why write_file and patch must not modify `abs_path`, or nullopt.
/// Refused: `<mibyan_home>/config.yaml`, `<mibyan_home>/.env`,
/// `<mibyan_home>/auth.json`, everything under `~/.ssh/` and `~/.gnupg/`,
/// and the credential files listed for `read_refusal`.
std::optional<std::string> write_refusal(const std::string& abs_path,
                                         const std::string& mibyan_home);

/// Returns an error when `abs_path` lies in another profile's directory
/// (`<profiles root>/<name>/...` other than `mibyan_home` itself), which
/// needs `cross_profile = true`; nullopt otherwise. The profiles root is the
/// parent of `mibyan_home` when that is called "profiles", else
/// `<mibyan_home>/profiles`.
std::optional<std::string> cross_profile_refusal(
  const std::string& abs_path, const std::string& mibyan_home);

} // namespace mibyan
