// File: base/credential_paths.hpp
//
// The one list of credential locations and persistence points that the
// file tools refuse (tools/path_policy.hpp) and the script sandbox hides or
// keeps read-only (base/sandbox.hpp). docs/security.md, "Files the file
// tools refuse", and docs/execute_code.md describe it for users.
//
// Paths are lexical (`user_home` / `mibyan_home` joined with the entry);
// callers resolve symlinks and compare inodes as they need. Pure functions
// besides `is_proc_environ` (which looks at nothing but its argument):
// thread-safe, never throw besides std::bad_alloc.
#pragma once

#include <string>
#include <vector>

namespace mibyan {

/// One protected file or directory.
struct credential_location {
  /// Absolute lexical path.
  std::string path;
  bool is_dir = false;
  /// For directories, as far as the file tools' read rule goes: only
  /// entries whose file name passes are protected (null: all of them).
  /// The sandbox hides the whole directory whatever the filter says.
  bool (*read_filter)(const std::string& name) = nullptr;
  /// What the location holds (the wording of a refusal).
  enum kind {
    mibyan_secret,  ///< `.env`, `auth.json` of a Mibyan home
    mibyan_config,  ///< `config.yaml` of a Mibyan home
    mibyan_store,   ///< the session store of a Mibyan home
    ssh,            ///< ~/.ssh
    gnupg,          ///< ~/.gnupg
    credential,     ///< any other credential store
  } what = credential;
};

/// Whether `name` is an SSH private key's file name (`id_*` without
/// `.pub`).
bool is_ssh_private_key_name(const std::string& name);

/// The user's credential stores under `user_home` (no entries when it is
/// empty or "/"): directories ~/.ssh (read filter: private keys), ~/.gnupg,
/// ~/.password-store, ~/.local/share/keyrings, ~/.config/gcloud, ~/.azure;
/// files ~/.netrc, ~/.git-credentials, ~/.aws/credentials, ~/.pgpass,
/// ~/.docker/config.json, ~/.kube/config, ~/.config/gh/hosts.yml,
/// ~/.npmrc, ~/.pypirc, ~/.vault-token, ~/.my.cnf.
std::vector<credential_location>
user_credential_locations(const std::string& user_home);

/// The secrets of one Mibyan home: `.env`, `auth.json`, `config.yaml` and
/// the session store `sessions/`.
std::vector<credential_location>
mibyan_secret_locations(const std::string& mibyan_home);

/// Files under `user_home` that run code on a later login, shell or
/// connection: ~/.bashrc, ~/.bash_profile, ~/.bash_login, ~/.bash_logout,
/// ~/.profile, ~/.zshrc, ~/.zshenv, ~/.zprofile, ~/.zlogin, ~/.zlogout,
/// ~/.cshrc, ~/.tcshrc, ~/.xprofile, ~/.xsession, ~/.xinitrc,
/// ~/.pam_environment, ~/.config/fish/config.fish, ~/.ssh/authorized_keys,
/// ~/.ssh/authorized_keys2, ~/.ssh/rc, ~/.ssh/config, ~/.ssh/environment.
std::vector<std::string> startup_files(const std::string& user_home);

/// Directories under `user_home` whose files run on a later login or
/// session: ~/.config/autostart, ~/.config/systemd, ~/.config/fish/conf.d,
/// ~/.local/share/systemd.
std::vector<std::string> startup_dirs(const std::string& user_home);

/// Whether the absolute lexical path names a process's environment block:
/// `/proc/<pid|self|thread-self>/environ` or
/// `/proc/<pid|self>/task/<tid>/environ`.
bool is_proc_environ(const std::string& abs_path);

} // namespace mibyan
