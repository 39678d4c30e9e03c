#include "kernels/interpreter_cache.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <sys/stat.h>
#include <unistd.h>

#include "base/json.hpp"
#include "base/log.hpp"
#include "base/private_file.hpp"
#include "base/subprocess.hpp"
#include "kernels/kernel_process.hpp"

namespace mibyan {

namespace {

// At most this many cached resolutions are kept (oldest dropped first).
constexpr size_t max_entries = 32;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// The first line of a small file, or "" when it cannot be read.
std::string small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  char buf[512];
  in.read(buf, sizeof buf);
  return std::string(buf, static_cast<size_t>(in.gcount()));
}

// A whole file of at most 256 KiB, or "".
std::string small_file_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return "";
  std::string out(256 * 1024, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

std::string stat_text(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return "-";
  return std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec)
         + "." + std::to_string(st.st_mtim.tv_nsec);
}

std::string cache_path(const std::string& home) {
  return home + "/cache/interpreter.json";
}

} // namespace

std::string interpreter_fingerprint(const std::string& python,
                                    const std::string& cwd) {
  std::ostringstream fp;
  auto found = find_executable(python);
  fp << "python=" << python << "\nfound=" << found << "@" << stat_text(found);
  for (const char* var : {"PYENV_VERSION", "PYENV_ROOT", "VIRTUAL_ENV",
                          "CONDA_PREFIX", "PYENV_DIR"})
    fp << "\n" << var << "=" << env_or_empty(var);
  auto root = env_or_empty("PYENV_ROOT");
  if (root.empty() && !env_or_empty("HOME").empty())
    root = env_or_empty("HOME") + "/.pyenv";
  fp << "\nglobal=" << small_file(root + "/version");
  // pyenv looks for .python-version from the working directory upwards
  // (and from PYENV_DIR when set).
  std::string dir = cwd;
  if (dir.empty()) {
    char buf[4096];
    if (::getcwd(buf, sizeof buf) != nullptr)
      dir = buf;
  }
  for (int depth = 0; !dir.empty() && depth < 64; ++depth) {
    auto text = small_file(dir + "/.python-version");
    if (!text.empty()) {
      fp << "\nlocal=" << dir << ":" << text;
      break;
    }
    if (dir == "/")
      break;
    auto slash = dir.find_last_of('/');
    dir = slash == 0 ? "/" : dir.substr(0, slash);
  }
  return fp.str();
}

namespace {

json::value load_cache(const std::string& home) {
  if (!home.empty())
    if (auto parsed = json::parse(small_file_all(cache_path(home)));
        parsed && parsed.v->is_object())
      return std::move(*parsed.v);
  return json::value::make_object();
}

void store_cache(const std::string& home, json::value& cache,
                 const std::string& key, const std::string& value) {
  if (home.empty())
    return;
  auto& obj = cache.as_object();
  while (obj.size() >= max_entries)
    obj.erase(obj.begin());
  cache[key] = value;
  if (!make_private_dirs(home + "/cache").ok())
    return;
  auto path = cache_path(home);
  auto tmp = path + ".tmp" + std::to_string(::getpid());
  if (write_private_file(tmp, cache.dump()).ok())
    std::rename(tmp.c_str(), path.c_str());
  else
    ::unlink(tmp.c_str());
}

} // namespace

std::string resolve_interpreter_cached(const std::string& python,
                                       const std::string& home,
                                       const std::string& cwd,
                                       bool* from_cache) {
  if (from_cache)
    *from_cache = false;
  auto key = "resolve\n" + interpreter_fingerprint(python, cwd);
  auto cache = load_cache(home);
  if (auto hit = cache.find(key); hit != nullptr && hit->is_string()
      && !hit->as_string().empty()
      && ::access(hit->as_string().c_str(), X_OK) == 0) {
    if (from_cache)
      *from_cache = true;
    return hit->as_string();
  }
  auto resolved = resolve_interpreter(python);
  store_cache(home, cache, key, resolved);
  return resolved;
}

std::string resolve_project_interpreter(const std::string& fallback,
                                        const std::string& home,
                                        const std::string& cwd) {
  for (const char* var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char* dir = std::getenv(var);
    if (dir == nullptr || *dir == '\0')
      continue;
    for (const char* name : {"/bin/python3", "/bin/python"}) {
      auto candidate = std::string{dir} + name;
      if (::access(candidate.c_str(), X_OK) != 0)
        continue;
      auto key = "probe\n" + interpreter_fingerprint(candidate, cwd);
      auto cache = load_cache(home);
      if (auto hit = cache.find(key); hit != nullptr && hit->is_string())
        return hit->as_string() == "ok" ? candidate
                                        : resolve_interpreter_cached(
                                            fallback, home, cwd);
      bool ok = probe_python(candidate);
      store_cache(home, cache, key, ok ? "ok" : "unusable");
      if (ok)
        return candidate;
    }
    MIBYAN_LOG(warning, "kernel", var << "=" << dir << " has no usable "
               "Python >= 3.8; execute_code uses " << fallback);
  }
  return resolve_interpreter_cached(fallback, home, cwd);
}

} // namespace mibyan
