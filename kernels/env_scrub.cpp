#include "kernels/env_scrub.hpp"

#include "base/env_filter.hpp"
#include "base/strings.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <set>

namespace mibyan {

namespace {

std::string strip_trailing_slashes(std::string s) {
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

bool is_runtime_path(const std::string& entry, const env_scrub_options& o) {
  auto e = strip_trailing_slashes(entry);
  if (!o.staging_dir.empty() && e == strip_trailing_slashes(o.staging_dir))
    return true;
  for (auto& r : o.runtime_paths)
    if (!r.empty() && e == strip_trailing_slashes(r))
      return true;
  auto slash = e.rfind('/');
  auto last = slash == std::string::npos ? e : e.substr(slash + 1);
  return strings::starts_with(last, "mibyan_kernel_");
}

std::string compose_pythonpath(const std::string& user,
                               const env_scrub_options& o) {
  std::string out = o.staging_dir;
  size_t pos = 0;
  while (pos <= user.size()) {
    auto end = user.find(':', pos);
    if (end == std::string::npos)
      end = user.size();
    auto entry = user.substr(pos, end - pos);
    if (!entry.empty() && !is_runtime_path(entry, o)) {
      if (!out.empty())
        out += ':';
      out += entry;
    }
    pos = end + 1;
  }
  return out;
}

std::string format_seconds(double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3f", x);
  return buf;
}

} // namespace

kernel_env build_kernel_env(const std::vector<std::string>& inherited,
                            const env_scrub_options& opts) {
  kernel_env res;
  std::set<std::string> passthrough;
  for (auto& name : opts.passthrough) {
    if (name.empty())
      continue;
    if (is_provider_credential(name)) {
      if (std::find(res.refused_passthrough.begin(),
                    res.refused_passthrough.end(), name)
          == res.refused_passthrough.end())
        res.refused_passthrough.push_back(name);
      continue;
    }
    passthrough.insert(name);
  }
  // Injected variables, in the order they are appended.
  std::vector<std::pair<std::string, std::string>> inject;
  auto add = [&](const char* k, std::string v) {
    inject.emplace_back(k, std::move(v));
  };
  if (!opts.rpc_socket.empty())
    add(kernel_env_names::rpc_socket, opts.rpc_socket);
  if (!opts.rpc_token.empty())
    add(kernel_env_names::rpc_token, opts.rpc_token);
  if (opts.rpc_timeout > 0)
    add(kernel_env_names::rpc_timeout, format_seconds(opts.rpc_timeout));
  if (opts.sentinel_fd >= 0)
    add(kernel_env_names::sentinel_fd, std::to_string(opts.sentinel_fd));
  if (!opts.stub_path.empty())
    add(kernel_env_names::stub_path, opts.stub_path);
  if (opts.watchdog_fd >= 0)
    add(kernel_env_names::watchdog_fd, std::to_string(opts.watchdog_fd));
  add("PYTHONDONTWRITEBYTECODE", "1");
  add("PYTHONIOENCODING", "utf-8");
  add("PYTHONUTF8", "1");
  if (!opts.timezone.empty())
    add("TZ", opts.timezone);
  std::set<std::string> injected_names;
  for (auto& kv : inject)
    injected_names.insert(kv.first);
  injected_names.insert("PYTHONPATH");

  std::set<std::string> seen;
  std::string user_pythonpath;
  for (auto& entry : inherited) {
    auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0)
      continue;
    auto name = entry.substr(0, eq);
    if (!seen.insert(name).second)
      continue;
    bool keep;
    if (passthrough.count(name) > 0)
      keep = true;
    else
      keep = !is_secret_env_name(name) && is_allowlisted_env_name(name)
             && !is_secret_env_value(std::string_view{entry}.substr(eq + 1));
    if (!keep) {
      res.dropped.push_back(name);
      if (strings::starts_with(name, "MIBYAN_"))
        res.dropped_product.push_back(name);
      continue;
    }
    if (name == "PYTHONPATH") {
      user_pythonpath = entry.substr(eq + 1);
      continue;
    }
    if (injected_names.count(name) > 0)
      continue;
    res.env.push_back(entry);
  }
  for (auto& kv : inject)
    res.env.push_back(kv.first + "=" + kv.second);
  auto pythonpath = compose_pythonpath(user_pythonpath, opts);
  if (!pythonpath.empty())
    res.env.push_back("PYTHONPATH=" + pythonpath);
  return res;
}

} // namespace mibyan
