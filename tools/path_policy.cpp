#include "tools/path_policy.hpp"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include <sys/stat.h>

#include "base/credential_paths.hpp"
#include "tools/file_io.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

/// Directory entries looked at when searching a protected directory for a
/// hard link's inode; a bigger directory is only partly searched.
constexpr int max_scanned_entries = 20000;

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

std::string env_path(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? resolve_path(v, "") : std::string{};
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

std::string base_name(const std::string& p) {
  return fs::path{p}.filename().string();
}

// One protected file or directory (see base/credential_paths.hpp).
using guard = credential_location;

std::string refusal_text(const std::string& path, guard::kind k,
                         bool for_write) {
  auto refuse = [&](const char* why) {
    return "Access denied: " + path + " " + why
           + ". The file tools do not touch credential stores.";
  };
  switch (k) {
    case guard::mibyan_config:
      if (for_write)
        return "Refusing to write " + path
               + ": Mibyan's configuration is edited by the user, not by "
                 "tools.";
      return "Access denied: " + path
             + " is Mibyan's configuration, which holds its keys. The file "
               "tools do not return it; `mibyan config show` prints it "
               "with the secrets masked.";
    case guard::ssh:
      return refuse(for_write ? "is in the SSH directory"
                              : "is an SSH private key");
    case guard::gnupg:
      return refuse("is in the GnuPG key store");
    case guard::credential:
      return refuse("is a credential file");
    case guard::mibyan_store:
      return refuse("is in Mibyan's session store");
    case guard::mibyan_secret:
    default:
      return refuse("holds Mibyan's secrets");
  }
}

// The profiles root of `home` (see cross_profile_refusal).
std::string profiles_root(const std::string& home) {
  fs::path h{home};
  return h.parent_path().filename() == "profiles"
           ? h.parent_path().string()
           : home + "/profiles";
}

// Every Mibyan directory whose secrets this process may reach: the active
// home, every profile, and the default home above a profile.
std::vector<std::string> mibyan_homes(const std::string& mibyan_home) {
  std::vector<std::string> homes{mibyan_home};
  auto root = profiles_root(mibyan_home);
  if (root != mibyan_home + "/profiles")
    homes.push_back(fs::path{root}.parent_path().string());
  std::error_code ec;
  for (fs::directory_iterator it{root, ec}, end; !ec && it != end;
       it.increment(ec))
    homes.push_back(it->path().string());
  return homes;
}

// The protected paths for reading (`for_write` false) or writing: the one
// list of base/credential_paths.hpp plus the files named by MIBYAN_ENV and
// MIBYAN_CONFIG. Writing protects the whole of ~/.ssh.
std::vector<guard> guards_for(const std::string& mibyan_home,
                              bool for_write) {
  std::vector<guard> gs;
  for (auto& h : mibyan_homes(mibyan_home))
    for (auto& l : mibyan_secret_locations(h))
      gs.push_back(l);
  if (auto p = env_path("MIBYAN_ENV"); !p.empty())
    gs.push_back({p, false, nullptr, guard::mibyan_secret});
  if (auto p = env_path("MIBYAN_CONFIG"); !p.empty())
    gs.push_back({p, false, nullptr, guard::mibyan_config});
  for (auto& l : user_credential_locations(user_home())) {
    gs.push_back(l);
    if (for_write)
      gs.back().read_filter = nullptr;
  }
  return gs;
}

// The file a call wants to reach.
struct target {
  std::vector<std::string> forms;
  bool stat_ok = false;
  struct stat st {};
};

bool same_inode(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Whether a file below `dir` (recursively, bounded) passing `filter` has
// the inode of `st`.
bool dir_holds_inode(const std::string& dir, const struct stat& st,
                     bool (*filter)(const std::string&)) {
  std::error_code ec;
  int seen = 0;
  for (fs::recursive_directory_iterator
         it{dir, fs::directory_options::skip_permission_denied, ec},
       end;
       !ec && it != end && seen < max_scanned_entries; it.increment(ec)) {
    ++seen;
    auto name = it->path().filename().string();
    if (filter != nullptr && !filter(name))
      continue;
    struct stat est;
    if (::lstat(it->path().c_str(), &est) == 0 && S_ISREG(est.st_mode)
        && same_inode(est, st))
      return true;
  }
  return false;
}

bool matches(const target& t, const guard& g) {
  for (auto& gf : forms_of(g.path)) {
    for (auto& tf : t.forms) {
      if (!g.is_dir && tf == gf)
        return true;
      if (g.is_dir && (tf == gf || under(tf, gf))
          && (g.read_filter == nullptr || g.read_filter(base_name(tf))))
        return true;
    }
  }
  if (!t.stat_ok)
    return false;
  if (!g.is_dir) {
    struct stat gst;
    return ::stat(g.path.c_str(), &gst) == 0 && same_inode(gst, t.st);
  }
  // A second name of a file inside a protected directory.
  if (S_ISREG(t.st.st_mode) && t.st.st_nlink > 1)
    return dir_holds_inode(g.path, t.st, g.read_filter);
  return false;
}

std::optional<std::string> refusal(const std::string& abs_path,
                                   const std::string& mibyan_home,
                                   bool for_write) {
  target t;
  t.forms = forms_of(abs_path);
  for (auto& f : t.forms)
    if (is_proc_environ(f))
      return "Access denied: " + abs_path
             + " is a process environment, which holds secrets. The file "
               "tools do not read it.";
  if (for_write)
    for (auto& f : t.forms)
      for (const char* d : {"/proc", "/sys", "/dev"})
        if (f == d || under(f, d))
          return "Refusing to write " + abs_path
                 + ": it is a device or kernel interface, not a file. The "
                   "file tools never write under /dev, /proc or /sys.";
  t.stat_ok = ::stat(abs_path.c_str(), &t.st) == 0;
  for (auto& g : guards_for(mibyan_home, for_write))
    if (matches(t, g))
      return refusal_text(abs_path, g.what, for_write);
  return std::nullopt;
}

} // namespace

protected_inodes::protected_inodes(const std::string& mibyan_home) {
  auto add = [&](const struct stat& st) {
    ids_.insert({static_cast<uint64_t>(st.st_dev),
                 static_cast<uint64_t>(st.st_ino)});
  };
  for (auto& g : guards_for(mibyan_home, false)) {
    struct stat st;
    if (!g.is_dir) {
      if (::stat(g.path.c_str(), &st) == 0)
        add(st);
      continue;
    }
    std::error_code ec;
    int seen = 0;
    for (fs::recursive_directory_iterator
           it{g.path, fs::directory_options::skip_permission_denied, ec},
         end;
         !ec && it != end && seen < max_scanned_entries; it.increment(ec)) {
      ++seen;
      if (g.read_filter != nullptr
          && !g.read_filter(it->path().filename().string()))
        continue;
      if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
        add(st);
    }
  }
}

std::optional<std::string> read_refusal(const std::string& abs_path,
                                        const std::string& mibyan_home) {
  return refusal(abs_path, mibyan_home, false);
}

std::optional<std::string> write_refusal(const std::string& abs_path,
                                         const std::string& mibyan_home) {
  return refusal(abs_path, mibyan_home, true);
}

const char* const system_write_key = "write to a system or credential file";
const char* const agent_state_write_key = "write to Mibyan's skills or memories";

std::optional<std::string> write_approval_key(const std::string& abs_path,
                                              const std::string& mibyan_home) {
  auto forms = forms_of(abs_path);
  auto home = user_home();
  auto in = [&](const std::string& dir) {
    for (auto& f : forms)
      if (f == dir || under(f, dir))
        return true;
    return false;
  };
  for (auto& f : startup_files(home))
    for (auto& ff : forms_of(f))
      if (in(ff))
        return std::string{system_write_key};
  for (auto& d : startup_dirs(home))
    for (auto& dd : forms_of(d))
      if (in(dd))
        return std::string{system_write_key};
  // The system's configuration (cron, sudoers, passwd, shadow,
  // ld.so.preload, systemd units, profile.d, ...), the other unit and
  // cron directories and /boot: terminal asks for any redirection to /etc
  // ("write to a system or credential file").
  for (const char* d : {"/etc", "/lib/systemd", "/usr/lib/systemd",
                        "/usr/local/lib/systemd", "/var/spool/cron",
                        "/boot"})
    if (in(d))
      return std::string{system_write_key};
  for (auto& h : mibyan_homes(mibyan_home))
    for (const char* sub : {"/skills", "/memories"})
      for (auto& hh : forms_of(h + sub))
        if (in(hh))
          return std::string{agent_state_write_key};
  return std::nullopt;
}

std::optional<std::string> cross_profile_refusal(
  const std::string& abs_path, const std::string& mibyan_home) {
  auto root = profiles_root(mibyan_home);
  auto roots = forms_of(root);
  auto homes = forms_of(mibyan_home);
  for (auto& p : forms_of(abs_path)) {
    for (auto& r : roots) {
      if (!under(p, r))
        continue;
      // When the home is itself a profile, its own files are not
      // "another" profile; when the profiles live inside the home, every
      // one is.
      bool own = false;
      for (auto& h : homes)
        own = own || (under(h, r) && (p == h || under(p, h)));
      if (own)
        continue;
      return "Refusing to modify " + abs_path
             + ": it belongs to another Mibyan profile. Pass "
               "cross_profile=true if that is intended.";
    }
  }
  return std::nullopt;
}

} // namespace mibyan
