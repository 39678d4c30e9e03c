#include "config/loader.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "config/mcp_config.hpp"
#include "config/option_parsers.hpp"
#include "config/option_table.hpp"
#include "config/secret_literals.hpp"
#include "config/yaml_checks.hpp"
#include "base/log.hpp"
#include "base/state_dir.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

std::string located(const std::string& origin, const YAML::Mark& mark) {
  if (mark.line < 0)
    return origin;
  return origin + ":" + std::to_string(mark.line + 1);
}

std::string read_file_text(const std::string& path, bool& exists,
                           std::string& error) {
  exists = false;
  std::error_code ec;
  auto st = fs::status(path, ec);
  if (ec || !fs::exists(st))
    return {};
  exists = true;
  if (!fs::is_regular_file(st)) {
    error = path + ": not a regular file";
    return {};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    error = path + ": cannot be read";
    return {};
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Why `home` cannot hold Mibyan's state ("" when it can).
std::string check_home(const std::string& home) {
  if (home.empty())
    return "no state directory: MIBYAN_HOME and HOME are unset and the "
           "user has no home directory in the password database. Fix: set "
           "MIBYAN_HOME to a private directory you own.";
  return check_state_dir(home).error;
}

} // namespace

std::string resolve_home() {
  std::string home;
  if (const char* v = std::getenv("MIBYAN_HOME"); v && *v)
    home = v;
  else
    home = default_state_dir();
  if (home.empty())
    return home;
  std::error_code ec;
  auto abs = fs::absolute(home, ec);
  return ec ? home : abs.lexically_normal().string();
}

result<options> parse_options(const std::string& yaml_text,
                              const std::string& origin) {
  options opts;
  auto fail = [](std::string why) {
    return result<options>::failure(status_code::config_invalid,
                                    std::move(why));
  };
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root || root.IsNull())
      return opts; // an empty file means defaults
    if (!root.IsMap())
      return fail(located(origin, root.Mark())
                  + ": the top level must be a mapping of sections");
    if (auto dup = find_duplicate_key(root, origin); !dup.empty())
      return fail(dup);
    // Every key is a row of config/option_table.def: a section's keys, or
    // a top-level key with structure of its own.
    std::vector<std::string> sections;
    for (auto& row : option_table())
      if (std::find(sections.begin(), sections.end(), row.section)
          == sections.end())
        sections.push_back(row.section);
    std::vector<std::string> warnings;
    auto log_warnings = [&] {
      for (auto& w : warnings)
        MIBYAN_LOG(warning, "config", origin << ": " << w);
      warnings.clear();
    };
    for (const auto& kv : root) {
      auto section = kv.first.as<std::string>();
      const auto& body = kv.second;
      if (auto top = find_option("", section); top != nullptr) {
        auto err = top->set(body, opts, warnings);
        log_warnings();
        if (!err.empty())
          return fail(located(origin, body.Mark()) + ": " + err);
        continue;
      }
      if (section.empty()
          || std::find(sections.begin(), sections.end(), section)
               == sections.end()) {
        std::string known;
        for (auto& s : option_sections())
          known += (known.empty() ? "" : ", ") + std::string{s.name};
        for (auto& row : option_table())
          if (*row.section == '\0')
            known += (known.empty() ? "" : ", ") + std::string{row.key};
        return fail(located(origin, kv.first.Mark())
                    + ": unknown top-level key '" + section + "' (known: "
                    + known + ")");
      }
      if (body.IsNull())
        continue;
      if (!body.IsMap())
        return fail(located(origin, body.Mark()) + ": " + section
                    + ": expected a mapping, got " + scalar_text(body));
      for (const auto& entry : body) {
        auto key = entry.first.as<std::string>();
        auto match = find_option(section, key);
        if (match == nullptr || match->nested()) {
          std::string known;
          for (auto& row : option_table())
            if (section == row.section && !row.nested())
              known += (known.empty() ? "" : ", ") + std::string{row.key};
          return fail(located(origin, entry.first.Mark()) + ": unknown key '"
                      + section + "." + key + "' (known: " + known + ")");
        }
        auto err = match->set(entry.second, opts, warnings);
        log_warnings();
        if (!err.empty())
          return fail(located(origin, entry.second.Mark()) + ": " + section
                      + "." + key + ": " + err);
      }
    }
    collect_secret_literals(root, opts.secret_literals);
  } catch (const YAML::Exception& e) {
    return fail(located(origin, e.mark) + ": invalid YAML: " + e.msg);
  } catch (const std::exception& e) {
    return fail(origin + ": " + e.what());
  }
  return opts;
}

void parse_env_file(const std::string& text,
                    std::map<std::string, std::string>& out,
                    std::vector<std::string>* warnings) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto trim = [](std::string s) {
    auto b = s.find_first_not_of(" \t\r");
    if (b == std::string::npos)
      return std::string{};
    auto e = s.find_last_not_of(" \t\r");
    return s.substr(b, e - b + 1);
  };
  while (std::getline(in, line)) {
    ++number;
    auto t = trim(line);
    if (t.empty() || t[0] == '#')
      continue;
    if (t.rfind("export ", 0) == 0)
      t = trim(t.substr(7));
    auto eq = t.find('=');
    auto key = eq == std::string::npos ? std::string{} : trim(t.substr(0, eq));
    bool valid_key = !key.empty();
    for (char c : key)
      valid_key = valid_key && (std::isalnum(static_cast<unsigned char>(c))
                                || c == '_');
    if (!valid_key) {
      if (warnings)
        warnings->push_back(".env line " + std::to_string(number)
                            + ": expected KEY=VALUE; line ignored");
      continue;
    }
    auto val = trim(t.substr(eq + 1));
    if (val.size() >= 2
        && ((val.front() == '"' && val.back() == '"')
            || (val.front() == '\'' && val.back() == '\''))) {
      val = val.substr(1, val.size() - 2);
    } else if (auto hash = val.find(" #"); hash != std::string::npos) {
      val = trim(val.substr(0, hash));
    }
    out[key] = val;
  }
}

result<options> load_options(const std::string& home_arg) {
  auto fail = [](std::string why) {
    return result<options>::failure(status_code::config_invalid,
                                    std::move(why));
  };
  auto home = home_arg.empty() ? resolve_home() : home_arg;
  if (auto bad = check_home(home); !bad.empty())
    return fail(bad);
  std::string path = home + "/config.yaml";
  if (const char* v = std::getenv("MIBYAN_CONFIG"); v && *v)
    path = v;
  bool exists = false;
  std::string read_error;
  auto text = read_file_text(path, exists, read_error);
  if (!read_error.empty())
    return fail(read_error);
  auto loaded = exists ? parse_options(text, path) : result<options>{options{}};
  if (!loaded.ok())
    return loaded;
  loaded->home = home;
  loaded->config_path = exists ? path : "";
  auto env_path = home + "/.env";
  if (const char* v = std::getenv("MIBYAN_ENV"); v && *v)
    env_path = v;
  bool env_exists = false;
  auto env_text = read_file_text(env_path, env_exists, read_error);
  if (!read_error.empty())
    return fail(read_error);
  std::vector<std::string> warnings;
  parse_env_file(env_text, loaded->env_file, &warnings);
  for (auto& w : warnings)
    MIBYAN_LOG(warning, "config", env_path << ": " << w);
  return loaded;
}

std::vector<shown_option> shown_options(const options& opts) {
  std::vector<shown_option> out;
  for (auto& row : option_table())
    if (*row.section != '\0' && !row.nested())
      out.push_back(shown_option{row.section, row.key, row.show(opts)});
  return out;
}

std::string render_options(const options& opts) {
  std::ostringstream out;
  out << "# home: " << opts.home << "\n";
  out << "# config file: "
      << (opts.config_path.empty() ? "(none, defaults)" : opts.config_path)
      << "\n";
  std::string section;
  for (auto& o : shown_options(opts)) {
    if (o.section != section) {
      section = o.section;
      out << section << ":\n";
    }
    out << "  " << o.key << ": " << o.value << "\n";
  }
  out << "command_allowlist: " << show_command_allowlist(opts.command_allowlist)
      << "\n";
  out << render_mcp_servers(opts.mcp_servers);
  out << "# .env: " << opts.env_file.size() << " variables (values masked)\n";
  for (auto& [k, v] : opts.env_file)
    out << "#   " << k << "=**** (" << v.size() << " chars)\n";
  return out.str();
}

} // namespace mibyan
