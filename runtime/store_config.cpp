// The session store's options from the configuration
// (runtime/store_config.hpp).
#include "runtime/store_config.hpp"

#include <cctype>

namespace mibyan {

result<std::string>
expand_env_refs(const std::string& text, const char* what,
                const std::function<std::string(const std::string&)>& lookup) {
  using out_t = result<std::string>;
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    auto at = text.find("${", i);
    if (at == std::string::npos) {
      out.append(text, i, std::string::npos);
      break;
    }
    out.append(text, i, at - i);
    auto end = text.find('}', at + 2);
    if (end == std::string::npos)
      return out_t::failure(status_code::config_invalid,
                            std::string{what} + ": '${' without a closing '}'");
    auto name = text.substr(at + 2, end - at - 2);
    bool valid = !name.empty();
    for (char c : name)
      valid = valid
              && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!valid)
      return out_t::failure(status_code::config_invalid,
                            std::string{what} + ": '${" + name.substr(0, 64)
                              + "}' is not a variable name ([A-Za-z0-9_])");
    auto value = lookup(name);
    if (value.empty())
      return out_t::failure(status_code::config_invalid,
                            std::string{what} + " references ${" + name
                              + "}, which is not set (in the environment "
                                "or the home's .env)");
    out += value;
    i = end + 1;
  }
  return out_t{std::move(out)};
}

result<session_store_options> store_options_from(const options& opts) {
  using out_t = result<session_store_options>;
  session_store_options so;
  so.backend = opts.storage.backend;
  so.dir = session_store::default_dir(opts.home);
  so.auto_migrate = opts.storage.auto_migrate;
  so.postgres_pool_size = static_cast<size_t>(opts.storage.postgres_pool_size);
  if (so.backend != "postgres")
    return out_t{std::move(so)};
  if (opts.storage.postgres_url.empty())
    return out_t::failure(status_code::config_invalid,
                          "storage.backend is postgres but "
                          "storage.postgres.url is empty");
  auto lookup = [&](const std::string& name) { return opts.secret(name); };
  auto url = expand_env_refs(opts.storage.postgres_url,
                             "storage.postgres.url", lookup);
  if (!url)
    return out_t{url.get_status()};
  so.postgres_url = std::move(*url);
  so.postgres_password = opts.secret("MIBYAN_PG_PASSWORD");
  return out_t{std::move(so)};
}

} // namespace mibyan
