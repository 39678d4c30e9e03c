#include "tools/path_policy.hpp"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "tools/file_io.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

bool under(const std::string& path, const std::string& dir) {
  if (dir.empty() || dir == "/")
    return false;
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0
         && path[dir.size()] == '/';
}

std::string user_home() {
  const char* home = std::getenv("HOME");
  return home && *home ? resolve_path(home, "/") : std::string{};
}

// The path as given plus, when different, its symlink-resolved form.
std::vector<std::string> forms_of(const std::string& abs_path) {
  std::vector<std::string> forms{abs_path};
  std::error_code ec;
  auto real = fs::weakly_canonical(abs_path, ec);
  if (!ec && real.string() != abs_path)
    forms.push_back(real.string());
  return forms;
}

std::vector<std::string> credential_files(const std::string& home) {
  if (home.empty())
    return {};
  return {home + "/.netrc", home + "/.git-credentials",
          home + "/.aws/credentials", home + "/.pgpass",
          home + "/.docker/config.json"};
}

std::optional<std::string> refuse(const std::string& path,
                                  const std::string& why) {
  return "Access denied: " + path + " " + why
         + ". The file tools do not touch credential stores.";
}

} // namespace

std::optional<std::string> read_refusal(const std::string& abs_path,
                                        const std::string& mibyan_home) {
  auto home = user_home();
  auto creds = credential_files(home);
  for (auto& p : forms_of(abs_path)) {
    if (p == mibyan_home + "/.env" || p == mibyan_home + "/auth.json")
      return refuse(abs_path, "holds Mibyan's secrets");
    if (!home.empty() && under(p, home + "/.ssh")) {
      auto name = fs::path{p}.filename().string();
      bool is_pub = name.size() > 4
                    && name.compare(name.size() - 4, 4, ".pub") == 0;
      if (name.rfind("id_", 0) == 0 && !is_pub)
        return refuse(abs_path, "is an SSH private key");
    }
    if (!home.empty() && under(p, home + "/.gnupg"))
      return refuse(abs_path, "is in the GnuPG key store");
    for (auto& c : creds)
      if (p == c)
        return refuse(abs_path, "is a credential file");
  }
  return std::nullopt;
}

std::optional<std::string> write_refusal(const std::string& abs_path,
                                         const std::string& mibyan_home) {
  auto home = user_home();
  auto creds = credential_files(home);
  for (auto& p : forms_of(abs_path)) {
    if (p == mibyan_home + "/config.yaml")
      return "Refusing to write " + abs_path
             + ": Mibyan's configuration is edited by the user, not by "
               "tools.";
    if (p == mibyan_home + "/.env" || p == mibyan_home + "/auth.json")
      return refuse(abs_path, "holds Mibyan's secrets");
    if (!home.empty() && (under(p, home + "/.ssh") || p == home + "/.ssh"))
      return refuse(abs_path, "is in the SSH directory");
    if (!home.empty() && under(p, home + "/.gnupg"))
      return refuse(abs_path, "is in the GnuPG key store");
    for (auto& c : creds)
      if (p == c)
        return refuse(abs_path, "is a credential file");
  }
  return std::nullopt;
}

std::optional<std::string> cross_profile_refusal(
  const std::string& abs_path, const std::string& mibyan_home) {
  fs::path home{mibyan_home};
  std::string root = home.parent_path().filename() == "profiles"
                       ? home.parent_path().string()
                       : mibyan_home + "/profiles";
  // When the home is itself a profile, its own files are not "another"
  // profile; when the profiles live inside the home, every one is.
  bool home_is_profile = under(mibyan_home, root);
  for (auto& p : forms_of(abs_path)) {
    if (!under(p, root))
      continue;
    if (home_is_profile && (p == mibyan_home || under(p, mibyan_home)))
      continue;
    return "Refusing to modify " + abs_path
           + ": it belongs to another Mibyan profile. Pass "
             "cross_profile=true if that is intended.";
  }
  return std::nullopt;
}

} // namespace mibyan
