#include "tools/path_policy.hpp"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <filesystem>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

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

// A guard with what matching needs resolved: its lexical and canonical
// forms and, for a file, its device and inode (when it exists).
struct resolved_guard {
  guard g;
  std::vector<std::string> forms;
  bool have_inode = false;
  struct stat st {};
};

// What a directory entry was when a guard list was resolved through it.
// A name created, removed, replaced or re-linked gets another error, inode
// or mode (a symlink is never changed in place: a new target is a new
// inode; its ctime also guards against a reused inode number).
struct entry_stamp {
  std::string path;
  int err = 0; // errno of lstat(), 0 when the entry exists
  dev_t dev = 0;
  ino_t ino = 0;
  mode_t mode = 0;
  struct timespec ctime {}; // symlinks only
  // For a directory whose listing is read (the profiles root): its mtime,
  // which any entry created or removed in it changes.
  bool listing = false;
  struct timespec mtime {};

  bool operator==(const entry_stamp& o) const {
    return err == o.err && dev == o.dev && ino == o.ino && mode == o.mode
           && ctime.tv_sec == o.ctime.tv_sec && ctime.tv_nsec == o.ctime.tv_nsec
           && mtime.tv_sec == o.mtime.tv_sec && mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

entry_stamp stamp_of(const std::string& path, bool listing) {
  entry_stamp e;
  e.path = path;
  e.listing = listing;
  struct stat st;
  if ((listing ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st))
      != 0) {
    e.err = errno;
    return e;
  }
  e.dev = st.st_dev;
  e.ino = st.st_ino;
  e.mode = st.st_mode;
  if (S_ISLNK(st.st_mode))
    e.ctime = st.st_ctim;
  if (listing)
    e.mtime = st.st_mtim;
  return e;
}

// Adds every directory entry that resolving the absolute path `p` looks
// up, following each symlink hop (the hops' own entries too): what `p`
// leads to, and whether it exists, is decided by exactly these entries.
// Stops at a missing name (creating it is a change of that entry).
void add_lookups(const std::string& p, std::set<std::string>& out,
                 int hops = 0) {
  std::string cur = "/";
  size_t pos = 0;
  while (pos < p.size()) {
    auto end = p.find('/', pos);
    if (end == std::string::npos)
      end = p.size();
    std::string comp = p.substr(pos, end - pos);
    pos = end + 1;
    if (comp.empty() || comp == ".")
      continue;
    if (comp == "..") {
      auto slash = cur.rfind('/');
      cur = slash == 0 || slash == std::string::npos ? "/"
                                                     : cur.substr(0, slash);
      continue;
    }
    std::string next = cur == "/" ? "/" + comp : cur + "/" + comp;
    out.insert(next);
    struct stat st;
    if (::lstat(next.c_str(), &st) != 0)
      return;
    if (S_ISLNK(st.st_mode)) {
      if (hops >= 40)
        return; // a loop: resolution fails the same way each time
      char buf[4096];
      auto n = ::readlink(next.c_str(), buf, sizeof buf - 1);
      if (n <= 0)
        return;
      std::string link{buf, static_cast<size_t>(n)};
      std::string rest = pos < p.size() ? p.substr(pos) : std::string{};
      std::string resolved = link[0] == '/' ? link : cur + "/" + link;
      if (!rest.empty())
        resolved += "/" + rest;
      add_lookups(resolved, out, hops + 1);
      return;
    }
    cur = next;
  }
}

// The entries of one directory that decided a resolved set, and the
// directory's own stamp: while its inode, mtime and ctime are unchanged
// no entry in it was created, removed, renamed or replaced, so its
// entries need no lstat of their own - unless it changed too recently to
// trust its timestamps (coarse file-system clocks), then they are checked.
struct dir_group {
  entry_stamp dir;
  bool settled = false;
  std::vector<entry_stamp> entries;
};

// The stamps of the entries that decided a resolved set of paths.
struct stamped {
  std::vector<dir_group> groups;
  entry_stamp listing; // the profiles root (mibyan_homes reads it)
  // The profiles root changed so recently that a later change could carry
  // the same mtime: not reusable.
  bool reusable = false;
};

// A directory changed within this window of building a set is not
// trusted by its timestamps; a file-system clock tick is far below it.
constexpr auto stamp_margin = std::chrono::seconds(2);

bool changed_within_margin(const struct timespec& ts,
                           std::chrono::system_clock::time_point now) {
  auto t = std::chrono::system_clock::time_point{
    std::chrono::duration_cast<std::chrono::system_clock::duration>(
      std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec))};
  return t + stamp_margin > now;
}

// A directory's stamp: its inode, mode, mtime and ctime (one stat).
entry_stamp dir_stamp_of(const std::string& dir) {
  entry_stamp e;
  e.path = dir;
  e.listing = true;
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    e.err = errno;
    return e;
  }
  e.dev = st.st_dev;
  e.ino = st.st_ino;
  e.mode = st.st_mode;
  e.mtime = st.st_mtim;
  e.ctime = st.st_ctim;
  return e;
}

// Stamps `entries` (grouped by directory) and the listing of the profiles
// root of `mibyan_home`.
void stamp_all(stamped& out, const std::set<std::string>& entries,
               const std::string& mibyan_home) {
  auto now = std::chrono::system_clock::now();
  std::map<std::string, std::vector<std::string>> by_dir;
  for (auto& e : entries) {
    auto slash = e.rfind('/');
    by_dir[slash == 0 ? "/" : e.substr(0, slash)].push_back(e);
  }
  for (auto& [dir, names] : by_dir) {
    dir_group g;
    g.dir = dir_stamp_of(dir);
    g.settled = g.dir.err == 0 && !changed_within_margin(g.dir.mtime, now)
                && !changed_within_margin(g.dir.ctime, now);
    for (auto& n : names)
      g.entries.push_back(stamp_of(n, false));
    out.groups.push_back(std::move(g));
  }
  out.listing = stamp_of(profiles_root(mibyan_home), true);
  out.reusable = out.listing.err != 0
                 || !changed_within_margin(out.listing.mtime, now);
}

// Whether no stamped entry changed since `set` was built: one stat per
// directory, plus one lstat per entry of a directory that changed.
bool still_valid(const stamped& set) {
  if (!set.reusable)
    return false;
  if (!(stamp_of(set.listing.path, true) == set.listing))
    return false;
  for (auto& g : set.groups) {
    if (g.settled && dir_stamp_of(g.dir.path) == g.dir)
      continue;
    for (auto& e : g.entries)
      if (!(stamp_of(e.path, false) == e))
        return false;
  }
  return true;
}

// A resolved set for (what, home) under the current environment: reused
// while the entries that decided it are unchanged (one lstat each), built
// by `build` otherwise. Keyed by everything the builders read besides the
// file system: the home, `what` and the environment variables.
// Thread-safe; `Set` derives from `stamped` and is immutable once built.
template <class Set, class Build>
std::shared_ptr<const Set> cached(char what, const std::string& mibyan_home,
                                  Build build) {
  static std::mutex mtx;
  static std::map<std::string, std::shared_ptr<const Set>> cache;
  auto env = [](const char* n) {
    const char* v = std::getenv(n);
    return std::string{v ? v : ""};
  };
  std::string key = mibyan_home;
  key += '\0';
  key += what;
  for (const char* n : {"HOME", "MIBYAN_ENV", "MIBYAN_CONFIG"}) {
    key += '\0';
    key += env(n);
  }
  std::shared_ptr<const Set> set;
  {
    std::lock_guard<std::mutex> lock{mtx};
    if (auto i = cache.find(key); i != cache.end())
      set = i->second;
  }
  if (set && still_valid(*set))
    return set;
  set = build();
  std::lock_guard<std::mutex> lock{mtx};
  if (cache.size() >= 16 && cache.count(key) == 0)
    cache.clear(); // bounded: a process serves a few homes
  cache[key] = set;
  return set;
}

// The guards of one (home, direction, environment), resolved.
struct guard_set : stamped {
  std::vector<resolved_guard> guards;
};

std::shared_ptr<const guard_set> guards_cached(const std::string& mibyan_home,
                                               bool for_write) {
  return cached<guard_set>(for_write ? 'w' : 'r', mibyan_home, [&] {
    auto set = std::make_shared<guard_set>();
    std::set<std::string> entries;
    add_lookups(profiles_root(mibyan_home), entries);
    for (auto& g : guards_for(mibyan_home, for_write)) {
      resolved_guard r;
      r.g = g;
      r.forms = forms_of(g.path);
      add_lookups(g.path, entries);
      if (!g.is_dir)
        r.have_inode = ::stat(g.path.c_str(), &r.st) == 0;
      set->guards.push_back(std::move(r));
    }
    stamp_all(*set, entries, mibyan_home);
    return set;
  });
}

// The paths write_approval_key and cross_profile_refusal compare against,
// each as its lexical and symlink-resolved forms.
struct write_paths : stamped {
  std::vector<std::vector<std::string>> startup_files, startup_dirs,
    agent_dirs;
  std::vector<std::string> root_forms, home_forms;
};

std::shared_ptr<const write_paths> write_paths_cached(
  const std::string& mibyan_home) {
  return cached<write_paths>('a', mibyan_home, [&] {
    auto set = std::make_shared<write_paths>();
    std::set<std::string> entries;
    auto resolve = [&](const std::string& p) {
      add_lookups(p, entries);
      return forms_of(p);
    };
    auto home = user_home();
    for (auto& f : startup_files(home))
      set->startup_files.push_back(resolve(f));
    for (auto& d : startup_dirs(home))
      set->startup_dirs.push_back(resolve(d));
    auto root = profiles_root(mibyan_home);
    add_lookups(root, entries);
    for (auto& h : mibyan_homes(mibyan_home))
      for (const char* sub : {"/skills", "/memories"})
        set->agent_dirs.push_back(resolve(h + sub));
    set->root_forms = resolve(root);
    set->home_forms = resolve(mibyan_home);
    stamp_all(*set, entries, mibyan_home);
    return set;
  });
}

bool matches(const target& t, const resolved_guard& r) {
  const guard& g = r.g;
  for (auto& gf : r.forms) {
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
  if (!g.is_dir)
    return r.have_inode && same_inode(r.st, t.st);
  // A second name of a file inside a protected directory.
  if (S_ISREG(t.st.st_mode) && t.st.st_nlink > 1)
    return dir_holds_inode(g.path, t.st, g.read_filter);
  return false;
}

std::optional<std::string> refusal(const std::string& abs_path,
                                   std::vector<std::string> forms,
                                   const std::string& mibyan_home,
                                   bool for_write) {
  target t;
  t.forms = std::move(forms);
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
  auto set = guards_cached(mibyan_home, for_write);
  for (auto& r : set->guards)
    if (matches(t, r))
      return refusal_text(abs_path, r.g.what, for_write);
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
  return refusal(abs_path, forms_of(abs_path), mibyan_home, false);
}

std::optional<std::string> write_refusal(const std::string& abs_path,
                                         const std::string& mibyan_home) {
  return refusal(abs_path, forms_of(abs_path), mibyan_home, true);
}

const char* const system_write_key = "write to a system or credential file";
const char* const agent_state_write_key = "write to Mibyan's skills or memories";

namespace {

std::optional<std::string> approval_key_of(const std::vector<std::string>& forms,
                                           const write_paths& paths) {
  auto in = [&](const std::string& dir) {
    for (auto& f : forms)
      if (f == dir || under(f, dir))
        return true;
    return false;
  };
  for (auto& ff : paths.startup_files)
    for (auto& f : ff)
      if (in(f))
        return std::string{system_write_key};
  for (auto& dd : paths.startup_dirs)
    for (auto& d : dd)
      if (in(d))
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
  for (auto& hh : paths.agent_dirs)
    for (auto& h : hh)
      if (in(h))
        return std::string{agent_state_write_key};
  return std::nullopt;
}

std::optional<std::string> cross_profile_of(
  const std::string& abs_path, const std::vector<std::string>& forms,
  const write_paths& paths) {
  auto& roots = paths.root_forms;
  auto& homes = paths.home_forms;
  for (auto& p : forms) {
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

} // namespace

std::optional<std::string> write_approval_key(const std::string& abs_path,
                                              const std::string& mibyan_home) {
  return approval_key_of(forms_of(abs_path), *write_paths_cached(mibyan_home));
}

std::optional<std::string> cross_profile_refusal(
  const std::string& abs_path, const std::string& mibyan_home) {
  return cross_profile_of(abs_path, forms_of(abs_path),
                          *write_paths_cached(mibyan_home));
}

write_policy write_policy_of(const std::string& abs_path,
                             const std::string& mibyan_home,
                             bool cross_profile_ok) {
  write_policy out;
  auto forms = forms_of(abs_path);
  if ((out.refusal = refusal(abs_path, forms, mibyan_home, true)))
    return out;
  auto paths = write_paths_cached(mibyan_home);
  if (!cross_profile_ok)
    if ((out.refusal = cross_profile_of(abs_path, forms, *paths)))
      return out;
  out.approval_key = approval_key_of(forms, *paths);
  return out;
}

} // namespace mibyan
