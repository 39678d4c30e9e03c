#include "config/option_parsers.hpp"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "config/mcp_config.hpp"

namespace mibyan {

std::string quoted_for_show(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar())
    return node.Scalar();
  if (node.IsSequence())
    return "a list";
  if (node.IsMap())
    return "a mapping";
  return "null";
}

namespace {

const char* const threshold_names[] = {"identical_failure",
                                       "same_tool_failure",
                                       "idempotent_repeat"};

int64_t* threshold_slot(guardrail_thresholds& t, const std::string& n) {
  if (n == "identical_failure")
    return &t.identical_failure;
  if (n == "same_tool_failure")
    return &t.same_tool_failure;
  if (n == "idempotent_repeat")
    return &t.idempotent_repeat;
  return nullptr;
}

// Whether `v` is exactly one `${NAME}` reference.
bool is_env_ref(std::string_view v) {
  if (v.size() < 4 || v.substr(0, 2) != "${" || v.back() != '}')
    return false;
  for (char c : v.substr(2, v.size() - 3))
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

} // namespace

std::string parse_guardrail_thresholds(const YAML::Node& node,
                                       guardrail_thresholds& out) {
  if (!node.IsMap())
    return "expected a mapping of identical_failure, same_tool_failure, "
           "idempotent_repeat; got "
           + scalar_text(node);
  auto t = out;
  for (const auto& kv : node) {
    auto n = kv.first.as<std::string>();
    auto p = threshold_slot(t, n);
    if (p == nullptr)
      return "unknown key '" + n + "' (known: identical_failure, "
             "same_tool_failure, idempotent_repeat)";
    if (!kv.second.IsScalar())
      return n + ": expected an integer";
    const auto& text = kv.second.Scalar();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || errno != 0 || *end != '\0' || v < 1)
      return n + ": expected an integer >= 1, got '" + text + "'";
    *p = v;
  }
  out = t;
  return {};
}

std::string show_guardrail_thresholds(const guardrail_thresholds& t) {
  auto copy = t;
  std::string out = "{";
  for (auto n : threshold_names)
    out += (out.size() > 1 ? ", " : "") + std::string{n} + ": "
           + std::to_string(*threshold_slot(copy, n));
  return out + "}";
}

std::string parse_approvals_mode(const YAML::Node& node, std::string& out) {
  if (!node.IsScalar())
    return "expected manual, smart or off, got " + scalar_text(node);
  const auto& v = node.Scalar();
  if (v == "off" || v == "false" || v == "False" || v == "no" || v == "Off")
    out = "off";
  else if (v == "smart" || v == "manual")
    out = v;
  else
    out = "manual"; // unknown: the safe mode
  return {};
}

std::string show_plain_string(const std::string& s) {
  return s;
}

std::string check_postgres_url(const std::string& url) {
  if (url.empty())
    return {};
  std::string_view u{url};
  std::string_view rest;
  for (std::string_view scheme : {"postgresql://", "postgres://"})
    if (u.substr(0, scheme.size()) == scheme)
      rest = u.substr(scheme.size());
  if (rest.data() == nullptr)
    return "expected a postgresql:// or postgres:// URI";
  for (char c : url)
    if (static_cast<unsigned char>(c) <= ' ')
      return "must not contain spaces or control characters";
  const char* hint = "; put the password in MIBYAN_PG_PASSWORD or write "
                     "${VAR} and set VAR in the environment or .env";
  auto authority = rest.substr(0, rest.find_first_of("/?#"));
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    auto user = authority.substr(0, at);
    if (auto colon = user.find(':'); colon != std::string_view::npos)
      if (!is_env_ref(user.substr(colon + 1)))
        return std::string{"holds a password"} + hint;
  }
  if (auto q = rest.find('?'); q != std::string_view::npos) {
    auto query = rest.substr(q + 1);
    while (!query.empty()) {
      auto amp = query.find('&');
      auto param = query.substr(0, amp);
      auto eq = param.find('=');
      if (param.substr(0, eq) == "password"
          && (eq == std::string_view::npos
              || !is_env_ref(param.substr(eq + 1))))
        return std::string{"holds a password parameter"} + hint;
      if (amp == std::string_view::npos)
        break;
      query = query.substr(amp + 1);
    }
  }
  return {};
}

std::string parse_command_allowlist(const YAML::Node& node,
                                    std::vector<std::string>& out,
                                    std::vector<std::string>&) {
  std::vector<std::string> keys;
  if (!node.IsNull()) {
    if (!node.IsSequence())
      return "command_allowlist: expected a list of strings, got "
             + scalar_text(node);
    for (const auto& item : node) {
      if (!item.IsScalar())
        return "command_allowlist: expected a list of strings, found "
               + scalar_text(item);
      if (item.Scalar().size() > 200 || keys.size() >= 1000)
        return "command_allowlist: at most 1000 keys of 200 characters";
      keys.push_back(item.Scalar());
    }
  }
  out = std::move(keys);
  return {};
}

std::string show_command_allowlist(const std::vector<std::string>& keys) {
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i)
    out += (i ? ", " : "") + quoted_for_show(keys[i]);
  return out + "]";
}

std::string parse_mcp_server_map(const YAML::Node& node,
                                 std::vector<mcp_server_options>& out,
                                 std::vector<std::string>& warnings) {
  std::vector<mcp_server_options> servers;
  auto parsed = parse_mcp_servers(node, servers, warnings);
  if (parsed.ok())
    out = std::move(servers);
  return parsed.error;
}

std::string show_mcp_server_map(const std::vector<mcp_server_options>& s) {
  std::string out = "{";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + s[i].name;
  return out + "}";
}

} // namespace mibyan
