#include "config/mcp_config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <optional>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "config/options.hpp"

namespace mibyan {

namespace {

std::string describe(const YAML::Node& n) {
  if (n.IsScalar())
    return "'" + n.Scalar() + "'";
  if (n.IsSequence())
    return "a list";
  if (n.IsMap())
    return "a mapping";
  return "null";
}

// Bool-ish: true/false/1/0/yes/no/on/off (any case); nullopt otherwise.
std::optional<bool> boolish(const YAML::Node& n) {
  if (!n.IsScalar())
    return std::nullopt;
  std::string t = n.Scalar();
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (t == "true" || t == "1" || t == "yes" || t == "on")
    return true;
  if (t == "false" || t == "0" || t == "no" || t == "off")
    return false;
  return std::nullopt;
}

struct ctx {
  std::string where; // "mcp_servers.files"
  std::vector<std::string>& warnings;
};

void set_bool(const YAML::Node& n, bool& out, const std::string& key, ctx& c) {
  if (auto b = boolish(n)) {
    out = *b;
    return;
  }
  c.warnings.push_back(c.where + "." + key + ": expected a boolean, got "
                       + describe(n) + "; using "
                       + (out ? "true" : "false"));
}

std::string set_int(const YAML::Node& n, int64_t& out, const std::string& key,
                    int64_t lo, int64_t hi, const ctx& c) {
  if (!n.IsScalar())
    return c.where + "." + key + ": expected an integer, got " + describe(n);
  const auto& text = n.Scalar();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0')
    return c.where + "." + key + ": expected an integer, got '" + text + "'";
  if (v < lo || v > hi)
    return c.where + "." + key + ": must be between " + std::to_string(lo)
           + " and " + std::to_string(hi) + ", got " + text;
  out = v;
  return {};
}

std::string set_string(const YAML::Node& n, std::string& out,
                       const std::string& key, const ctx& c) {
  if (n.IsNull()) {
    out.clear();
    return {};
  }
  if (!n.IsScalar())
    return c.where + "." + key + ": expected a string, got " + describe(n);
  out = n.Scalar();
  return {};
}

// A list of strings; a single string is a one-item list; other item types
// are skipped with a warning.
void set_list(const YAML::Node& n, std::vector<std::string>& out,
              const std::string& key, ctx& c) {
  out.clear();
  if (n.IsNull())
    return;
  if (n.IsScalar()) {
    out.push_back(n.Scalar());
    return;
  }
  if (!n.IsSequence()) {
    c.warnings.push_back(c.where + "." + key
                         + ": expected a list of strings; ignored");
    return;
  }
  for (const auto& item : n) {
    if (item.IsScalar())
      out.push_back(item.Scalar());
    else
      c.warnings.push_back(c.where + "." + key + ": item " + describe(item)
                           + " is no string; ignored");
  }
}

std::string set_map(const YAML::Node& n,
                    std::vector<std::pair<std::string, std::string>>& out,
                    const std::string& key, const ctx& c) {
  out.clear();
  if (n.IsNull())
    return {};
  if (!n.IsMap())
    return c.where + "." + key + ": expected a mapping, got " + describe(n);
  for (const auto& kv : n) {
    if (!kv.second.IsScalar() && !kv.second.IsNull())
      return c.where + "." + key + "." + kv.first.as<std::string>()
             + ": expected a string value";
    out.emplace_back(kv.first.as<std::string>(),
                     kv.second.IsNull() ? "" : kv.second.Scalar());
  }
  return {};
}

constexpr int64_t day = 86400;

std::string parse_sampling(const YAML::Node& n, mcp_sampling_options& s,
                           ctx& c) {
  if (n.IsNull())
    return {};
  if (auto b = boolish(n)) { // `sampling: false`
    s.enabled = *b;
    return {};
  }
  if (!n.IsMap())
    return c.where + ".sampling: expected a mapping, got " + describe(n);
  ctx sc{c.where + ".sampling", c.warnings};
  for (const auto& kv : n) {
    auto key = kv.first.as<std::string>();
    const auto& v = kv.second;
    std::string err;
    if (key == "enabled")
      set_bool(v, s.enabled, key, sc);
    else if (key == "model")
      err = set_string(v, s.model, key, sc);
    else if (key == "max_tokens_cap")
      err = set_int(v, s.max_tokens_cap, key, 1, 1000000, sc);
    else if (key == "timeout")
      err = set_int(v, s.timeout, key, 1, day, sc);
    else if (key == "max_rpm")
      err = set_int(v, s.max_rpm, key, 0, 100000, sc);
    else if (key == "allowed_models")
      set_list(v, s.allowed_models, key, sc);
    else if (key == "max_tool_rounds" || key == "log_level")
      sc.warnings.push_back(sc.where + "." + key
                            + ": not supported by Mibyan; ignored");
    else
      err = sc.where + ": unknown key '" + key
            + "' (known: enabled, model, max_tokens_cap, timeout, max_rpm, "
              "allowed_models)";
    if (!err.empty())
      return err;
  }
  return {};
}

// `oauth:` is a mapping, or a boolean (`oauth: false` turns it off).
std::string parse_oauth(const YAML::Node& n, mcp_oauth_options& o, ctx& c) {
  if (n.IsNull())
    return {};
  if (auto b = boolish(n)) {
    o.enabled = *b;
    return {};
  }
  if (!n.IsMap())
    return c.where + ".oauth: expected a mapping, got " + describe(n);
  ctx oc{c.where + ".oauth", c.warnings};
  for (const auto& kv : n) {
    auto key = kv.first.as<std::string>();
    const auto& v = kv.second;
    std::string err;
    if (key == "enabled")
      set_bool(v, o.enabled, key, oc);
    else if (key == "client_id")
      err = set_string(v, o.client_id, key, oc);
    else if (key == "client_secret") {
      err = set_string(v, o.client_secret, key, oc);
      // A secret lives in the environment or .env, never in config.yaml.
      if (err.empty() && !o.client_secret.empty()
          && (o.client_secret.rfind("${", 0) != 0
              || o.client_secret.back() != '}'))
        err = oc.where + ".client_secret: must be a ${NAME} or ${env:NAME} "
                         "reference to the environment or $MIBYAN_HOME/.env, "
                         "not the secret itself";
    } else if (key == "redirect_port")
      err = set_int(v, o.redirect_port, key, 0, 65535, oc);
    else if (key == "scope")
      err = set_string(v, o.scope, key, oc);
    else if (key == "request_timeout")
      err = set_int(v, o.request_timeout, key, 1, 600, oc);
    else
      err = oc.where + ": unknown key '" + key
            + "' (known: enabled, client_id, client_secret, redirect_port, "
              "scope, request_timeout)";
    if (!err.empty())
      return err;
  }
  return {};
}

std::string parse_tools(const YAML::Node& n, mcp_server_options& s, ctx& c) {
  if (n.IsNull())
    return {};
  if (!n.IsMap())
    return c.where + ".tools: expected a mapping, got " + describe(n);
  ctx tc{c.where + ".tools", c.warnings};
  for (const auto& kv : n) {
    auto key = kv.first.as<std::string>();
    if (key == "include")
      set_list(kv.second, s.include, key, tc);
    else if (key == "exclude")
      set_list(kv.second, s.exclude, key, tc);
    else if (key == "resources")
      set_bool(kv.second, s.resources, key, tc);
    else if (key == "prompts")
      set_bool(kv.second, s.prompts, key, tc);
    else
      return tc.where + ": unknown key '" + key
             + "' (known: include, exclude, resources, prompts)";
  }
  return {};
}

std::string parse_server(const std::string& name, const YAML::Node& n,
                         mcp_server_options& s,
                         std::vector<std::string>& warnings) {
  ctx c{"mcp_servers." + name, warnings};
  s.name = name;
  if (n.IsNull())
    return c.where + ": expected a mapping with `command` or `url`";
  if (!n.IsMap())
    return c.where + ": expected a mapping, got " + describe(n);
  std::string transport;
  for (const auto& kv : n) {
    auto key = kv.first.as<std::string>();
    const auto& v = kv.second;
    std::string err;
    if (key == "enabled")
      set_bool(v, s.enabled, key, c);
    else if (key == "command")
      err = set_string(v, s.command, key, c);
    else if (key == "args")
      set_list(v, s.args, key, c);
    else if (key == "env")
      err = set_map(v, s.env, key, c);
    else if (key == "cwd")
      err = set_string(v, s.cwd, key, c);
    else if (key == "url")
      err = set_string(v, s.url, key, c);
    else if (key == "headers")
      err = set_map(v, s.headers, key, c);
    else if (key == "transport")
      err = set_string(v, transport, key, c);
    else if (key == "timeout")
      err = set_int(v, s.timeout, key, 1, day, c);
    else if (key == "connect_timeout")
      err = set_int(v, s.connect_timeout, key, 1, 3600, c);
    else if (key == "keepalive_interval")
      err = set_int(v, s.keepalive_interval, key, 0, day, c);
    else if (key == "idle_timeout_seconds")
      err = set_int(v, s.idle_timeout_seconds, key, 0, 30 * day, c);
    else if (key == "max_lifetime_seconds")
      err = set_int(v, s.max_lifetime_seconds, key, 0, 365 * day, c);
    else if (key == "lifecycle") {
      if (!v.IsMap()) {
        err = c.where + ".lifecycle: expected a mapping, got " + describe(v);
      } else {
        for (const auto& lk : v) {
          auto k2 = lk.first.as<std::string>();
          if (k2 == "idle_timeout_seconds")
            err = set_int(lk.second, s.idle_timeout_seconds, k2, 0, 30 * day,
                          c);
          else if (k2 == "max_lifetime_seconds")
            err = set_int(lk.second, s.max_lifetime_seconds, k2, 0,
                          365 * day, c);
          else
            err = c.where + ".lifecycle: unknown key '" + k2 + "'";
          if (!err.empty())
            break;
        }
      }
    } else if (key == "lazy")
      set_bool(v, s.lazy, key, c);
    else if (key == "supports_parallel_tool_calls")
      set_bool(v, s.supports_parallel_tool_calls, key, c);
    else if (key == "tools")
      err = parse_tools(v, s, c);
    else if (key == "max_message_bytes")
      err = set_int(v, s.max_message_bytes, key, 1024, int64_t{1} << 30, c);
    else if (key == "sampling")
      err = parse_sampling(v, s.sampling, c);
    else if (key == "elicitation")
      set_bool(v, s.elicitation, key, c);
    else if (key == "roots") {
      if (v.IsSequence()) {
        s.roots = true;
        s.root_dirs.clear();
        for (const auto& d : v) {
          auto dir = d.IsScalar() ? d.Scalar() : std::string{};
          if (dir.empty() || dir[0] != '/') {
            err = c.where + ".roots: expected absolute directories, got "
                  + describe(d);
            break;
          }
          s.root_dirs.push_back(dir);
        }
      } else {
        set_bool(v, s.roots, key, c);
      }
    }
    else if (key == "oauth")
      err = parse_oauth(v, s.oauth, c);
    else if (key == "auth") {
      // `auth: oauth` (the reference system's spelling) is the default.
      if (!v.IsScalar() || (v.Scalar() != "oauth" && v.Scalar() != "none"))
        err = c.where + ".auth: expected oauth or none";
      else if (v.Scalar() == "none")
        s.oauth.enabled = false;
    } else if (key == "ssl_verify"
             || key == "client_cert" || key == "client_key"
             || key == "skip_preflight")
      warnings.push_back(c.where + "." + key
                         + ": not supported by Mibyan; ignored");
    else
      err = c.where + ": unknown key '" + key
            + "' (known: enabled, command, args, env, cwd, url, headers, "
              "transport, timeout, connect_timeout, keepalive_interval, "
              "idle_timeout_seconds, max_lifetime_seconds, lifecycle, lazy, "
              "supports_parallel_tool_calls, tools, max_message_bytes, "
              "sampling, roots, elicitation, oauth, auth)";
    if (!err.empty())
      return err;
  }
  if (!s.command.empty()) {
    s.transport = "stdio";
  } else if (s.url.empty()) {
    return c.where + ": needs `command` (stdio) or `url` (http, sse)";
  } else if (transport.empty() || transport == "http"
             || transport == "streamable_http"
             || transport == "streamable-http") {
    s.transport = "http";
  } else if (transport == "sse") {
    s.transport = "sse";
  } else {
    return c.where + ".transport: expected http or sse, got '" + transport
           + "'";
  }
  if (s.transport != "stdio" && s.url.rfind("http://", 0) != 0
      && s.url.rfind("https://", 0) != 0)
    return c.where + ".url: expected an http:// or https:// URL";
  if (s.keepalive_interval > 0 && s.keepalive_interval < 5)
    s.keepalive_interval = 5;
  return {};
}

} // namespace

status parse_mcp_servers(const YAML::Node& node,
                         std::vector<mcp_server_options>& out,
                         std::vector<std::string>& warnings) {
  auto bad = [](std::string msg) {
    return status::failure(status_code::config_invalid, std::move(msg));
  };
  out.clear();
  if (node.IsNull())
    return {};
  if (!node.IsMap())
    return bad("mcp_servers: expected a mapping of server names, got "
               + describe(node));
  for (const auto& kv : node) {
    auto name = kv.first.as<std::string>();
    if (name.empty() || name.size() > 64)
      return bad("mcp_servers: a server name must have 1 to 64 characters");
    mcp_server_options s;
    if (auto err = parse_server(name, kv.second, s, warnings); !err.empty())
      return bad(std::move(err));
    out.push_back(std::move(s));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& x, const auto& y) { return x.name < y.name; });
  return {};
}

std::string resolve_mcp_refs(const std::string& text, const options& cfg,
                             std::vector<std::string>* unset) {
  if (text.find("${") == std::string::npos)
    return text;
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    auto open = text.find("${", i);
    if (open == std::string::npos) {
      out.append(text, i, std::string::npos);
      break;
    }
    auto close = text.find('}', open + 2);
    if (close == std::string::npos) {
      out.append(text, i, std::string::npos);
      break;
    }
    out.append(text, i, open - i);
    auto name = text.substr(open + 2, close - open - 2);
    if (name.rfind("env:", 0) == 0)
      name = name.substr(4);
    auto value = cfg.secret(name);
    if (value.empty() && unset)
      unset->push_back(name);
    out += value;
    i = close + 1;
  }
  return out;
}

std::string render_mcp_servers(const std::vector<mcp_server_options>& servers) {
  std::ostringstream out;
  out << "mcp_servers:" << (servers.empty() ? " {}" : "") << "\n";
  for (auto& s : servers) {
    out << "  " << s.name << ":  # " << s.transport
        << (s.enabled ? "" : ", disabled") << "\n";
    if (!s.command.empty()) {
      out << "    command: " << s.command << "\n    args: [";
      for (size_t i = 0; i < s.args.size(); ++i)
        out << (i ? ", " : "") << s.args[i];
      out << "]\n";
      for (auto& [k, v] : s.env)
        out << "    # env " << k << " (" << v.size() << " chars)\n";
    } else {
      out << "    url: " << s.url << "\n";
      for (auto& [k, v] : s.headers)
        out << "    # header " << k << " (" << v.size() << " chars)\n";
    }
    out << "    timeout: " << s.timeout << "\n    connect_timeout: "
        << s.connect_timeout << "\n";
  }
  return out.str();
}

} // namespace mibyan
