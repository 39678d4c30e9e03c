// The session-store interface's non-virtual parts and the backend
// registry behind open_session_store (storage/store_backend.hpp).
#include "storage/session_store.hpp"

#include <algorithm>
#include <map>
#include <mutex>

#include "base/json.hpp"
#include "storage/store_backend.hpp"

namespace mibyan {

namespace {

struct backend_registry {
  std::mutex mutex;
  std::map<std::string, store_backend_opener> openers;
};

backend_registry& registry() {
  static backend_registry r;
  return r;
}

// Registers the built-in backends once, before the first lookup or
// registration (so a later registration replaces a built-in one, never the
// other way round). The built-in list itself registers through
// register_store_backend, hence the flag.
thread_local bool registering_builtins = false;

void ensure_builtins() {
  static std::once_flag once;
  if (registering_builtins)
    return;
  std::call_once(once, [] {
    registering_builtins = true;
    register_builtin_store_backends();
    registering_builtins = false;
  });
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (auto& n : names)
    out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? std::string{"none"} : out;
}

} // namespace

void register_store_backend(const std::string& name,
                            store_backend_opener open) {
  ensure_builtins();
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  if (open)
    r.openers[name] = std::move(open);
  else
    r.openers.erase(name);
}

store_backend_opener find_store_backend(const std::string& name) {
  ensure_builtins();
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  auto it = r.openers.find(name);
  return it == r.openers.end() ? store_backend_opener{} : it->second;
}

std::vector<std::string> store_backend_names() {
  ensure_builtins();
  auto& r = registry();
  std::lock_guard<std::mutex> lock{r.mutex};
  std::vector<std::string> out;
  for (auto& [name, fn] : r.openers)
    out.push_back(name);
  return out;
}

const std::vector<std::string>& known_store_backends() {
  static const std::vector<std::string> names{"lmdb", "postgres"};
  return names;
}

session_store::~session_store() = default;

std::string session_store::default_dir(const std::string& home) {
  return home + "/sessions";
}

store_result<std::unique_ptr<session_store>>
session_store::open(session_store_options opts) {
  return open_session_store(opts);
}

store_status check_store_backend(const std::string& name) {
  if (find_store_backend(name))
    return {};
  auto& known = known_store_backends();
  auto shown = json::sanitize_utf8(name.substr(0, 64));
  if (std::find(known.begin(), known.end(), name) == known.end())
    return store_status::failure(status_code::config_invalid,
                                 "storage.backend '" + shown
                                   + "' is unknown; use one of "
                                   + join_names(known));
  std::string what = name == "postgres" ? "PostgreSQL" : shown;
  return store_status::failure(status_code::config_invalid,
                               "storage.backend '" + shown
                                 + "': this build has no " + what
                                 + " backend (it has "
                                 + join_names(store_backend_names()) + ")");
}

store_result<std::unique_ptr<session_store>>
open_session_store(const session_store_options& opts) {
  using result = store_result<std::unique_ptr<session_store>>;
  auto open = find_store_backend(opts.backend);
  if (!open) {
    auto st = check_store_backend(opts.backend);
    return result::failure(st.code, "open session store: " + st.error);
  }
  auto opened = open(opts);
  if (opened && !*opened)
    return result::failure(status_code::internal,
                           "open session store: backend '" + opts.backend
                             + "' returned no store");
  return opened;
}

} // namespace mibyan
