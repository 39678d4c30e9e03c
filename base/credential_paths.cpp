#include "base/credential_paths.hpp"

#include <cctype>

namespace mibyan {

namespace {

bool usable_home(const std::string& home) {
  return !home.empty() && home != "/";
}

bool all_digits(const std::string& s) {
  if (s.empty())
    return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  return true;
}

std::vector<std::string> split_path(const std::string& p) {
  std::vector<std::string> parts;
  size_t pos = 0;
  while (pos <= p.size()) {
    auto next = p.find('/', pos);
    if (next == std::string::npos)
      next = p.size();
    if (next > pos)
      parts.push_back(p.substr(pos, next - pos));
    pos = next + 1;
  }
  return parts;
}

} // namespace

bool is_ssh_private_key_name(const std::string& name) {
  bool is_pub = name.size() > 4
                && name.compare(name.size() - 4, 4, ".pub") == 0;
  return name.rfind("id_", 0) == 0 && !is_pub;
}

std::vector<credential_location>
user_credential_locations(const std::string& user_home) {
  std::vector<credential_location> out;
  if (!usable_home(user_home))
    return out;
  using k = credential_location;
  out.push_back({user_home + "/.ssh", true, &is_ssh_private_key_name, k::ssh});
  out.push_back({user_home + "/.gnupg", true, nullptr, k::gnupg});
  for (const char* d : {"/.password-store", "/.local/share/keyrings",
                        "/.config/gcloud", "/.azure"})
    out.push_back({user_home + d, true, nullptr, k::credential});
  for (const char* f :
       {"/.netrc", "/.git-credentials", "/.aws/credentials", "/.pgpass",
        "/.docker/config.json", "/.kube/config", "/.config/gh/hosts.yml",
        "/.npmrc", "/.pypirc", "/.vault-token", "/.my.cnf"})
    out.push_back({user_home + f, false, nullptr, k::credential});
  return out;
}

std::vector<credential_location>
mibyan_secret_locations(const std::string& mibyan_home) {
  std::vector<credential_location> out;
  if (mibyan_home.empty())
    return out;
  using k = credential_location;
  out.push_back({mibyan_home + "/.env", false, nullptr, k::mibyan_secret});
  out.push_back({mibyan_home + "/auth.json", false, nullptr,
                 k::mibyan_secret});
  out.push_back({mibyan_home + "/config.yaml", false, nullptr,
                 k::mibyan_config});
  out.push_back({mibyan_home + "/sessions", true, nullptr, k::mibyan_store});
  return out;
}

std::vector<std::string> startup_files(const std::string& user_home) {
  std::vector<std::string> out;
  if (!usable_home(user_home))
    return out;
  for (const char* f :
       {"/.bashrc", "/.bash_profile", "/.bash_login", "/.bash_logout",
        "/.profile", "/.zshrc", "/.zshenv", "/.zprofile", "/.zlogin",
        "/.zlogout", "/.cshrc", "/.tcshrc", "/.xprofile", "/.xsession",
        "/.xinitrc", "/.pam_environment", "/.config/fish/config.fish",
        "/.ssh/authorized_keys", "/.ssh/authorized_keys2", "/.ssh/rc",
        "/.ssh/config", "/.ssh/environment"})
    out.push_back(user_home + f);
  return out;
}

std::vector<std::string> startup_dirs(const std::string& user_home) {
  std::vector<std::string> out;
  if (!usable_home(user_home))
    return out;
  for (const char* d : {"/.config/autostart", "/.config/systemd",
                        "/.config/fish/conf.d", "/.local/share/systemd"})
    out.push_back(user_home + d);
  return out;
}

bool is_proc_environ(const std::string& abs_path) {
  auto parts = split_path(abs_path);
  if (parts.size() < 3 || parts[0] != "proc" || parts.back() != "environ")
    return false;
  auto proc_dir = [](const std::string& s) {
    return all_digits(s) || s == "self" || s == "thread-self";
  };
  if (parts.size() == 3)
    return proc_dir(parts[1]);
  return parts.size() == 5 && proc_dir(parts[1]) && parts[2] == "task"
         && all_digits(parts[3]);
}

} // namespace mibyan
