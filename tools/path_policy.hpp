// File: tools/path_policy.hpp
//
// Which paths the file tools refuse to read or write: Mibyan's own secrets,
// configuration and session store, SSH keys and common credential stores
// (docs/security.md, "Files the file tools refuse").
//
// A path matches a protected file when any of these hold:
// - its lexical form or its symlink-resolved (canonical) form equals the
//   protected file's lexical or canonical form (so a symlinked
//   `$MIBYAN_HOME`, a link to the file, or `..` tricks do not get around
//   the rule);
// - it names the same device and inode as the protected file (a hard link);
// - for protected directories: one of its forms lies inside the directory,
//   or it is a regular file with more than one link whose device and inode
//   match a file inside the directory.
//
// Thread-safe; never throws. The protected paths of a home (their forms and
// the inodes of the protected files), and the paths write_approval_key and
// cross_profile_refusal compare against, are resolved once and cached per
// (home, read or write, `HOME`, `MIBYAN_ENV`, `MIBYAN_CONFIG`). A call
// reuses them when nothing that decided them changed: every directory
// entry their resolution looked up (each symlink hop included) still has
// the same error, device, inode and mode (and ctime for a symlink) - a name
// created, removed, replaced or re-linked differs - and the profiles
// root's listing has the same mtime. Entries are checked per directory: a
// directory whose inode, mtime and ctime are unchanged, and were older than
// 2 s when the set was built, had no entry created, removed, renamed or
// replaced (one stat for all of its entries); the entries of any other
// directory get one lstat each. A listing changed within 2 s of building
// is not trusted (coarse file-system timestamps): the set is used once.
// Per call, unchanged: the target's lexical and symlink-resolved forms,
// its stat (hard links), and the bounded search of a protected directory
// for a multiply-linked file.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace mibyan {

/// Returns why read_file (and search_files) must not read `abs_path`, or
/// nullopt when reading is allowed. Refused: the one list of
/// base/credential_paths.hpp - the `.env`, `auth.json`, `config.yaml` and
/// session store `sessions/` of `mibyan_home`, of every profile and of the
/// default home above a profile; the files named by `$MIBYAN_ENV` and
/// `$MIBYAN_CONFIG`; the user's credential stores (private keys under
/// `~/.ssh/`, `~/.gnupg/`, `~/.netrc`, `~/.aws/credentials`, ...) - and
/// every process environment (`/proc/<pid>/environ`, `/proc/self/environ`,
/// task entries).
std::optional<std::string> read_refusal(const std::string& abs_path,
                                        const std::string& mibyan_home);

/// Returns why write_file and patch must not modify `abs_path` (the
/// hardline of writes: no approval lifts it), or nullopt. Refused:
/// everything `read_refusal` refuses, everything under `~/.ssh/`, and
/// everything under /dev, /proc and /sys (devices and kernel interfaces
/// such as /proc/sysrq-trigger).
std::optional<std::string> write_refusal(const std::string& abs_path,
                                         const std::string& mibyan_home);

/// The key of the approval pattern terminal asks under for writing these paths.
extern const char* const system_write_key;
/// The approval key of writes into Mibyan's skills and memories.
extern const char* const agent_state_write_key;

/// Returns the approval pattern key a write to `abs_path` needs, or
/// nullopt when it needs none (docs/approvals.md, "File writes"). Every
/// tool that writes a file asks under it through the approval service as
/// terminal does for the same write:
/// - `system_write_key`: the shell start-up files and other persistence
///   points under `$HOME` (base/credential_paths.hpp: ~/.bashrc,
///   ~/.profile, ~/.ssh/authorized_keys, ~/.config/systemd/, ...), and
///   everything under /etc (cron.d, sudoers, passwd, shadow,
///   ld.so.preload, systemd, ...), /lib/systemd, /usr/lib/systemd,
///   /usr/local/lib/systemd, /var/spool/cron and /boot;
/// - `agent_state_write_key`: `skills/` and `memories/` of every Mibyan
///   home (the active one, its profiles, the default above a profile).
/// Both the lexical and the symlink-resolved forms are checked.
std::optional<std::string> write_approval_key(const std::string& abs_path,
                                              const std::string& mibyan_home);

/// The files `read_refusal` protects, identified by device and inode and
/// resolved once, for checking many files cheaply (search_files checks
/// every file with a hit). Files inside protected directories are listed
/// when the set is built (bounded); a file created there afterwards is not
/// in it. Immutable after construction, so safe to share between threads.
class protected_inodes {
public:
  /// Stats the protected files of `mibyan_home` and lists the files inside
  /// its protected directories.
  explicit protected_inodes(const std::string& mibyan_home);

  /// Whether no protected file exists at all.
  bool empty() const { return ids_.empty(); }

  /// Whether the file with this device and inode number is protected.
  bool contains(uint64_t dev, uint64_t ino) const {
    return ids_.count({dev, ino}) > 0;
  }

private:
  std::set<std::pair<uint64_t, uint64_t>> ids_;
};

/// Returns an error when `abs_path` lies in another profile's directory
/// (`<profiles root>/<name>/...` other than `mibyan_home` itself), which
/// needs `cross_profile = true`; nullopt otherwise. The profiles root is the
/// parent of `mibyan_home` when that is called "profiles", else
/// `<mibyan_home>/profiles`. Symlinks in either path are resolved.
std::optional<std::string> cross_profile_refusal(
  const std::string& abs_path, const std::string& mibyan_home);

/// What may happen to a write of `abs_path`, decided in one pass (the
/// path resolved once, each cached set validated once): `refusal` is
/// write_refusal's answer, else (unless `cross_profile_ok`)
/// cross_profile_refusal's; when neither refuses, `approval_key` is
/// write_approval_key's. The same answers as the three calls in that order.
struct write_policy {
  std::optional<std::string> refusal;
  std::optional<std::string> approval_key;
};
write_policy write_policy_of(const std::string& abs_path,
                             const std::string& mibyan_home,
                             bool cross_profile_ok);

} // namespace mibyan
