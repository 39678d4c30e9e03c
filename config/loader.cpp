#include "config/loader.hpp"

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
#include "config/option_bounds.hpp"
#include "config/secret_literals.hpp"
#include "config/yaml_checks.hpp"
#include "base/log.hpp"
#include "base/state_dir.hpp"

namespace fs = std::filesystem;

namespace mibyan {

namespace {

// -- field table ---------------------------------------------------------------

// One configurable field: how to set it from YAML and how to render it.
struct field {
  std::string section;
  std::string key;
  // Returns an error message ("" on success).
  std::function<std::string(const YAML::Node&, options&)> set;
  std::function<std::string(const options&)> show;
};

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar())
    return node.Scalar();
  if (node.IsSequence())
    return "a list";
  if (node.IsMap())
    return "a mapping";
  return "null";
}

std::string quoted_for_show(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

template <class Section>
field int_field(const char* section, const char* key, Section options::*sec,
                int64_t Section::*mem, int64_t min_value) {
  return {section, key,
          [=](const YAML::Node& node, options& o) -> std::string {
            if (!node.IsScalar())
              return "expected an integer, got " + scalar_text(node);
            const auto& text = node.Scalar();
            char* end = nullptr;
            errno = 0;
            long long v = std::strtoll(text.c_str(), &end, 10);
            if (text.empty() || errno != 0 || *end != '\0')
              return "expected an integer, got '" + text + "'";
            if (v < min_value)
              return "must be at least " + std::to_string(min_value)
                     + ", got " + text;
            if (auto e = check_numeric_bounds(section, key, v); !e.empty())
              return e;
            (o.*sec).*mem = v;
            return {};
          },
          [=](const options& o) { return std::to_string((o.*sec).*mem); }};
}

template <class Section>
field int_range_field(const char* section, const char* key,
                      Section options::*sec, int64_t Section::*mem,
                      int64_t min_value, int64_t max_value) {
  auto base = int_field(section, key, sec, mem, min_value);
  auto set = base.set;
  base.set = [=](const YAML::Node& node, options& o) -> std::string {
    auto old = (o.*sec).*mem;
    auto err = set(node, o);
    if (err.empty() && (o.*sec).*mem > max_value) {
      (o.*sec).*mem = old;
      return "must be at most " + std::to_string(max_value) + ", got "
             + node.Scalar();
    }
    return err;
  };
  return base;
}

template <class Section>
field bool_field(const char* section, const char* key, Section options::*sec,
                 bool Section::*mem) {
  return {section, key,
          [=](const YAML::Node& node, options& o) -> std::string {
            if (!node.IsScalar())
              return "expected true or false, got " + scalar_text(node);
            const auto& t = node.Scalar();
            if (t == "true" || t == "True" || t == "yes" || t == "on")
              (o.*sec).*mem = true;
            else if (t == "false" || t == "False" || t == "no" || t == "off")
              (o.*sec).*mem = false;
            else
              return "expected true or false, got '" + t + "'";
            return {};
          },
          [=](const options& o) {
            return std::string{(o.*sec).*mem ? "true" : "false"};
          }};
}

template <class Section>
field string_field(const char* section, const char* key,
                   Section options::*sec, std::string Section::*mem,
                   std::vector<std::string> allowed = {}) {
  return {section, key,
          [=](const YAML::Node& node, options& o) -> std::string {
            if (node.IsNull()) {
              (o.*sec).*mem = "";
              return {};
            }
            if (!node.IsScalar())
              return "expected a string, got " + scalar_text(node);
            auto v = node.Scalar();
            if (!allowed.empty()) {
              bool ok = false;
              std::string list;
              for (auto& a : allowed) {
                ok = ok || a == v;
                list += (list.empty() ? "" : ", ") + a;
              }
              if (!ok)
                return "must be one of " + list + ", got '" + v + "'";
            }
            (o.*sec).*mem = std::move(v);
            return {};
          },
          [=](const options& o) { return quoted_for_show((o.*sec).*mem); }};
}

// Adds an upper bound to an integer field.
field bounded(field f, int64_t max_value) {
  auto inner = f.set;
  f.set = [inner, max_value](const YAML::Node& node,
                             options& o) -> std::string {
    if (node.IsScalar()) {
      char* end = nullptr;
      long long v = std::strtoll(node.Scalar().c_str(), &end, 10);
      if (end != nullptr && *end == '\0' && v > max_value)
        return "must be at most " + std::to_string(max_value) + ", got "
               + node.Scalar();
    }
    return inner(node, o);
  };
  return f;
}

// A number in (0, 1] of section `compression`.
field fraction_field(const char* section, const char* key,
                     double compression_options::*mem) {
  return {section, key,
          [=](const YAML::Node& node, options& o) -> std::string {
            if (!node.IsScalar())
              return "expected a number, got " + scalar_text(node);
            const auto& text = node.Scalar();
            char* end = nullptr;
            double v = std::strtod(text.c_str(), &end);
            if (text.empty() || *end != '\0' || !(v > 0.0 && v <= 1.0))
              return "expected a number above 0 and at most 1, got '" + text
                     + "'";
            o.compression.*mem = v;
            return {};
          },
          [=](const options& o) {
            std::ostringstream out;
            out << o.compression.*mem;
            return out.str();
          }};
}

// Shows a secret field masked.
field secret_field(field f) {
  auto inner = f.show;
  f.show = [inner](const options& o) {
    auto v = inner(o);
    return v == "\"\"" ? v : std::string{"\"***\""};
  };
  return f;
}

template <class Section>
field list_field(const char* section, const char* key, Section options::*sec,
                 std::vector<std::string> Section::*mem) {
  return {section, key,
          [=](const YAML::Node& node, options& o) -> std::string {
            if (node.IsNull()) {
              ((o.*sec).*mem).clear();
              return {};
            }
            if (!node.IsSequence())
              return "expected a list of strings, got " + scalar_text(node);
            std::vector<std::string> xs;
            for (const auto& item : node) {
              if (!item.IsScalar())
                return "expected a list of strings, found "
                       + scalar_text(item) + " at line "
                       + std::to_string(item.Mark().line + 1);
              xs.push_back(item.Scalar());
            }
            (o.*sec).*mem = std::move(xs);
            return {};
          },
          [=](const options& o) {
            std::string out = "[";
            for (auto& x : (o.*sec).*mem)
              out += (out.size() > 1 ? ", " : "") + quoted_for_show(x);
            return out + "]";
          }};
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

// Checks a storage.postgres.url: a postgresql:// URI whose password, if
// any (in the user part or a `password` parameter), is a `${VAR}`
// reference: the secret lives in the environment or .env, not in the file.
std::string check_postgres_url(const std::string& url) {
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

// Section storage's `postgres` mapping: url and pool_size (keys left out
// keep their value).
field postgres_field() {
  return {"storage", "postgres",
          [](const YAML::Node& node, options& o) -> std::string {
            if (node.IsNull())
              return {};
            if (!node.IsMap())
              return "expected a mapping of url, pool_size; got "
                     + scalar_text(node);
            auto st = o.storage;
            for (const auto& kv : node) {
              auto n = kv.first.as<std::string>();
              if (n != "url" && n != "pool_size")
                return "unknown key '" + n + "' (known: url, pool_size)";
              if (!kv.second.IsScalar() && !kv.second.IsNull())
                return n + ": expected "
                       + (n == "url" ? "a string" : "an integer") + ", got "
                       + scalar_text(kv.second);
              const auto text = kv.second.IsNull() ? std::string{}
                                                   : kv.second.Scalar();
              if (n == "url") {
                if (!text.empty())
                  if (auto e = check_postgres_url(text); !e.empty())
                    return "url: " + e;
                st.postgres_url = text;
                continue;
              }
              char* end = nullptr;
              errno = 0;
              long long v = std::strtoll(text.c_str(), &end, 10);
              if (text.empty() || errno != 0 || *end != '\0')
                return "pool_size: expected an integer, got '" + text + "'";
              if (auto e = check_numeric_bounds("storage", "postgres.pool_size",
                                                v);
                  !e.empty())
                return "pool_size: " + e;
              st.postgres_pool_size = v;
            }
            o.storage = std::move(st);
            return {};
          },
          [](const options& o) {
            return "{url: " + quoted_for_show(o.storage.postgres_url)
                   + ", pool_size: "
                   + std::to_string(o.storage.postgres_pool_size) + "}";
          }};
}

// A mapping of guardrail thresholds (identical_failure, same_tool_failure,
// idempotent_repeat: integers >= 1); keys left out keep their value.
field thresholds_field(const char* section, const char* key,
                       guardrail_thresholds tool_loop_guardrail_options::*mem) {
  static const char* const names[] = {"identical_failure",
                                      "same_tool_failure",
                                      "idempotent_repeat"};
  auto slot = [](guardrail_thresholds& t, const std::string& n) -> int64_t* {
    if (n == "identical_failure")
      return &t.identical_failure;
    if (n == "same_tool_failure")
      return &t.same_tool_failure;
    if (n == "idempotent_repeat")
      return &t.idempotent_repeat;
    return nullptr;
  };
  return {section, key,
          [=](const YAML::Node& node, options& o) -> std::string {
            if (!node.IsMap())
              return "expected a mapping of identical_failure, "
                     "same_tool_failure, idempotent_repeat; got "
                     + scalar_text(node);
            auto t = o.tool_loop_guardrails.*mem;
            for (const auto& kv : node) {
              auto n = kv.first.as<std::string>();
              auto p = slot(t, n);
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
            o.tool_loop_guardrails.*mem = t;
            return {};
          },
          [=](const options& o) {
            auto t = o.tool_loop_guardrails.*mem;
            std::string out = "{";
            for (auto n : names)
              out += (out.size() > 1 ? ", " : "") + std::string{n} + ": "
                     + std::to_string(*slot(t, n));
            return out + "}";
          }};
}

const std::vector<field>& fields() {
  static const std::vector<field> table = [] {
    using o = options;
    std::vector<field> t;
    // model
    t.push_back(string_field("model", "provider", &o::model,
                             &model_options::provider));
    t.push_back(string_field("model", "default", &o::model,
                             &model_options::default_model));
    t.push_back(string_field("model", "base_url", &o::model,
                             &model_options::base_url));
    t.push_back(string_field("model", "fallback_provider", &o::model,
                             &model_options::fallback_provider));
    t.push_back(string_field("model", "fallback_model", &o::model,
                             &model_options::fallback_model));
    t.push_back(string_field("model", "fallback_base_url", &o::model,
                             &model_options::fallback_base_url));
    // agent
    t.push_back(int_field("agent", "max_turns", &o::agent,
                          &agent_options::max_turns, 1));
    t.push_back(int_field("agent", "api_max_retries", &o::agent,
                          &agent_options::api_max_retries, 1));
    t.push_back(bool_field("agent", "save_trajectories", &o::agent,
                           &agent_options::save_trajectories));
    t.push_back(bool_field("agent", "context_files", &o::agent,
                           &agent_options::context_files));
    t.push_back(string_field("context_files", "on_injection",
                             &o::context_files,
                             &context_files_options::on_injection,
                             {"warn", "refuse"}));
    t.push_back(int_field("context_files", "max_chars", &o::context_files,
                          &context_files_options::max_chars, 1000));
    t.push_back(string_field("agent", "trajectory_dir", &o::agent,
                             &agent_options::trajectory_dir));
    // provider
    t.push_back(int_field("provider", "request_timeout", &o::provider,
                          &provider_options::request_timeout, 1));
    t.push_back(int_field("provider", "stream_idle_timeout", &o::provider,
                          &provider_options::stream_idle_timeout, 1));
    t.push_back(int_field("provider", "connect_timeout", &o::provider,
                          &provider_options::connect_timeout, 1));
    // terminal
    t.push_back(int_field("terminal", "timeout", &o::terminal,
                          &terminal_options::timeout, 1));
    t.push_back(int_field("terminal", "max_timeout", &o::terminal,
                          &terminal_options::max_timeout, 1));
    t.push_back(int_field("terminal", "kill_grace", &o::terminal,
                          &terminal_options::kill_grace, 0));
    t.push_back(list_field("terminal", "env_passthrough", &o::terminal,
                           &terminal_options::env_passthrough));
    // tool_output
    t.push_back(int_field("tool_output", "max_bytes", &o::tool_output,
                          &tool_output_options::max_bytes, 1000));
    t.push_back(int_field("tool_output", "max_lines", &o::tool_output,
                          &tool_output_options::max_lines, 1));
    t.push_back(int_field("tool_output", "max_line_chars", &o::tool_output,
                          &tool_output_options::max_line_chars, 80));
    t.push_back(int_field("tool_output", "read_char_budget", &o::tool_output,
                          &tool_output_options::read_char_budget, 1000));
    // web
    t.push_back(string_field("web", "search_backend", &o::web,
                             &web_options::search_backend,
                             {"", "searxng", "brave", "tavily"}));
    t.push_back(string_field("web", "searxng_url", &o::web,
                             &web_options::searxng_url));
    t.push_back(string_field("web", "brave_url", &o::web,
                             &web_options::brave_url));
    t.push_back(string_field("web", "tavily_url", &o::web,
                             &web_options::tavily_url));
    t.push_back(int_field("web", "extract_char_limit", &o::web,
                          &web_options::extract_char_limit, 2000));
    t.push_back(int_field("web", "max_download_bytes", &o::web,
                          &web_options::max_download_bytes, 1024));
    t.push_back(int_field("web", "fetch_timeout", &o::web,
                          &web_options::fetch_timeout, 1));
    t.push_back(int_field("web", "connect_timeout", &o::web,
                          &web_options::connect_timeout, 1));
    t.push_back(int_field("web", "max_redirects", &o::web,
                          &web_options::max_redirects, 0));
    t.push_back(string_field("web", "user_agent", &o::web,
                             &web_options::user_agent));
    // security
    t.push_back(bool_field("security", "allow_private_urls", &o::security,
                           &security_options::allow_private_urls));
    t.push_back(list_field("security", "allowed_private_addresses",
                           &o::security,
                           &security_options::allowed_private_addresses));
    // code_execution
    t.push_back(string_field("code_execution", "mode", &o::code_execution,
                             &code_execution_options::mode,
                             {"project", "strict"}));
    t.push_back(int_field("code_execution", "timeout", &o::code_execution,
                          &code_execution_options::timeout, 1));
    t.push_back(int_field("code_execution", "max_tool_calls",
                          &o::code_execution,
                          &code_execution_options::max_tool_calls, 0));
    t.push_back(int_field("code_execution", "max_stdout_bytes",
                          &o::code_execution,
                          &code_execution_options::max_stdout_bytes, 100));
    t.push_back(int_field("code_execution", "max_stderr_bytes",
                          &o::code_execution,
                          &code_execution_options::max_stderr_bytes, 100));
    t.push_back(int_field("code_execution", "max_spill_bytes",
                          &o::code_execution,
                          &code_execution_options::max_spill_bytes, 0));
    t.push_back(int_field("code_execution", "kernel_idle_timeout",
                          &o::code_execution,
                          &code_execution_options::kernel_idle_timeout, 1));
    t.push_back(int_field("code_execution", "max_session_kernels",
                          &o::code_execution,
                          &code_execution_options::max_session_kernels, 1));
    t.push_back(int_field("code_execution", "prestart_kernels",
                          &o::code_execution,
                          &code_execution_options::prestart_kernels, 0));
    t.push_back(string_field("code_execution", "python", &o::code_execution,
                             &code_execution_options::python));
    t.push_back(int_field("code_execution", "max_rpc_connections",
                          &o::code_execution,
                          &code_execution_options::max_rpc_connections, 1));
    t.push_back(int_field("code_execution", "max_rpc_frame_bytes",
                          &o::code_execution,
                          &code_execution_options::max_rpc_frame_bytes,
                          4096));
    t.push_back(int_field("code_execution", "max_rpc_buffered_bytes",
                          &o::code_execution,
                          &code_execution_options::max_rpc_buffered_bytes,
                          4096));
    // tools
    t.push_back(int_field("tools", "max_argument_bytes", &o::tools,
                          &tools_options::max_argument_bytes, 1024));
    t.push_back(string_field("code_execution", "sandbox", &o::code_execution,
                             &code_execution_options::sandbox,
                             {"auto", "required", "off"}));
    t.push_back(int_range_field("code_execution", "max_memory_mb",
                                &o::code_execution,
                                &code_execution_options::max_memory_mb, 64,
                                1048576));
    t.push_back(int_range_field("code_execution", "max_processes",
                                &o::code_execution,
                                &code_execution_options::max_processes, 8,
                                65536));
    t.push_back(int_range_field("code_execution", "max_open_files",
                                &o::code_execution,
                                &code_execution_options::max_open_files, 64,
                                1048576));
    t.push_back(bool_field("code_execution", "mcp_in_scripts",
                           &o::code_execution,
                           &code_execution_options::mcp_in_scripts));
    t.push_back(string_field("code_execution", "checkpoint",
                             &o::code_execution,
                             &code_execution_options::checkpoint,
                             {"auto", "on", "off"}));
    t.push_back(int_range_field("code_execution", "checkpoint_max_mb",
                                &o::code_execution,
                                &code_execution_options::checkpoint_max_mb, 1,
                                4096));
    // runtime
    t.push_back(int_field("runtime", "scheduler_threads", &o::runtime,
                          &runtime_options::scheduler_threads, 0));
    t.push_back(int_field("runtime", "blocking_threads", &o::runtime,
                          &runtime_options::blocking_threads, 1));
    t.push_back(int_field("runtime", "io_spin_us", &o::runtime,
                          &runtime_options::io_spin_us, 0));
    // logging
    t.push_back(string_field("logging", "level", &o::logging,
                             &logging_options::level,
                             {"debug", "info", "warning", "error", "off"}));
    t.push_back(string_field("logging", "file", &o::logging,
                             &logging_options::file));
    // tool_loop_guardrails
    t.push_back(bool_field("tool_loop_guardrails", "warnings_enabled",
                           &o::tool_loop_guardrails,
                           &tool_loop_guardrail_options::warnings_enabled));
    t.push_back(bool_field("tool_loop_guardrails", "hard_stop_enabled",
                           &o::tool_loop_guardrails,
                           &tool_loop_guardrail_options::hard_stop_enabled));
    t.push_back(thresholds_field("tool_loop_guardrails", "warn_after",
                                 &tool_loop_guardrail_options::warn_after));
    t.push_back(thresholds_field("tool_loop_guardrails", "hard_stop_after",
                                 &tool_loop_guardrail_options::hard_stop_after));
    // provider.max_response_bytes: 64 KiB .. 1 GiB (docs/security.md).
    t.push_back(field{
      "provider", "max_response_bytes",
      [](const YAML::Node& node, options& opts) -> std::string {
        auto inner = int_field("provider", "max_response_bytes",
                               &options::provider,
                               &provider_options::max_response_bytes,
                               int64_t{64} << 10);
        auto before = opts.provider.max_response_bytes;
        auto err = inner.set(node, opts);
        if (err.empty()
            && opts.provider.max_response_bytes > (int64_t{1} << 30)) {
          opts.provider.max_response_bytes = before;
          err = "must be at most 1073741824 (1 GiB), got " + node.Scalar();
        }
        return err;
      },
      [](const options& o) {
        return std::to_string(o.provider.max_response_bytes);
      }});
    // approvals (docs/approvals.md)
    t.push_back({"approvals", "mode",
                 [](const YAML::Node& node, options& o) -> std::string {
                   if (!node.IsScalar())
                     return "expected manual, smart or off, got "
                            + scalar_text(node);
                   const auto& v = node.Scalar();
                   if (v == "off" || v == "false" || v == "False"
                       || v == "no" || v == "Off")
                     o.approvals.mode = "off";
                   else if (v == "smart" || v == "manual")
                     o.approvals.mode = v;
                   else
                     o.approvals.mode = "manual"; // unknown: the safe mode
                   return {};
                 },
                 [](const options& o) { return o.approvals.mode; }});
    t.push_back(int_field("approvals", "timeout", &o::approvals,
                          &approvals_options::timeout, 1));
    for (auto key : {"cron_mode", "single_query_mode", "unattended_mode"}) {
      auto mem = std::string{key} == "cron_mode"
                   ? &approvals_options::cron_mode
                   : std::string{key} == "single_query_mode"
                       ? &approvals_options::single_query_mode
                       : &approvals_options::unattended_mode;
      t.push_back(string_field("approvals", key, &o::approvals, mem,
                               {"deny", "approve"}));
    }
    t.push_back(int_field("approvals", "denial_breaker_threshold",
                          &o::approvals,
                          &approvals_options::denial_breaker_threshold,
                          -1000000));
    t.push_back(list_field("approvals", "deny", &o::approvals,
                           &approvals_options::deny));
    t.push_back(int_field("approvals", "guardian_timeout", &o::approvals,
                          &approvals_options::guardian_timeout, 1));
    t.push_back(string_field("approvals", "http", &o::approvals,
                             &approvals_options::http, {"off", "pending"}));
    // clarify (docs/tools.md, docs/serve.md)
    t.push_back(int_field("clarify", "timeout", &o::clarify,
                          &clarify_options::timeout, 1));
    t.push_back(string_field("clarify", "http", &o::clarify,
                             &clarify_options::http, {"off", "pending"}));
    // server (docs/serve.md); each bounded above as well
    t.push_back(secret_field(string_field("server", "key", &o::server,
                                          &server_options::key)));
    t.push_back(bounded(int_field("server", "max_body_bytes", &o::server,
                                  &server_options::max_body_bytes, 1024),
                        int64_t{1} << 30));
    t.push_back(bounded(int_field("server", "max_header_bytes", &o::server,
                                  &server_options::max_header_bytes, 1024),
                        1024 * 1024));
    t.push_back(bounded(int_field("server", "max_concurrent_turns",
                                  &o::server,
                                  &server_options::max_concurrent_turns, 1),
                        100000));
    t.push_back(bounded(int_field("server", "max_connections", &o::server,
                                  &server_options::max_connections, 1),
                        1000000));
    t.push_back(bounded(int_field("server", "max_connections_per_ip",
                                  &o::server,
                                  &server_options::max_connections_per_ip, 1),
                        1000000));
    t.push_back(bounded(int_field("server", "max_messages", &o::server,
                                  &server_options::max_messages, 1),
                        1000000));
    t.push_back(bounded(int_field("server", "keepalive_s", &o::server,
                                  &server_options::keepalive_s, 1),
                        3600));
    t.push_back(bounded(int_field("server", "live_buffer_events", &o::server,
                                  &server_options::live_buffer_events, 16),
                        65536));
    t.push_back(bounded(int_field("server", "header_timeout", &o::server,
                                  &server_options::header_timeout, 1),
                        3600));
    t.push_back(bounded(int_field("server", "body_timeout", &o::server,
                                  &server_options::body_timeout, 1),
                        3600));
    t.push_back(bounded(int_field("server", "idle_timeout", &o::server,
                                  &server_options::idle_timeout, 1),
                        86400));
    t.push_back(bounded(int_field("server", "io_threads", &o::server,
                                  &server_options::io_threads, 1),
                        64));
    t.push_back(bounded(int_field("server", "session_idle_timeout",
                                  &o::server,
                                  &server_options::session_idle_timeout, 1),
                        7 * 86400));
    t.push_back(list_field("server", "allowed_hosts", &o::server,
                           &server_options::allowed_hosts));
    t.push_back(bounded(int_field("server", "max_export_bytes", &o::server,
                                  &server_options::max_export_bytes, 1024),
                        int64_t{1} << 30));
    // model.context_length, delegation, compression (docs/agent_loop.md)
    t.push_back(int_field("model", "context_length", &o::model,
                          &model_options::context_length, 0));
    t.push_back(int_field("delegation", "max_concurrent_children",
                          &o::delegation,
                          &delegation_options::max_concurrent_children, 1));
    t.push_back(int_field("delegation", "max_iterations", &o::delegation,
                          &delegation_options::max_iterations, 1));
    t.push_back(list_field("delegation", "blocked_tools", &o::delegation,
                           &delegation_options::blocked_tools));
    t.push_back(list_field("delegation", "default_toolsets", &o::delegation,
                           &delegation_options::default_toolsets));
    t.push_back(int_field("delegation", "max_background_children",
                          &o::delegation,
                          &delegation_options::max_background_children, 1));
    t.push_back(int_field("delegation", "max_pending_notices",
                          &o::delegation,
                          &delegation_options::max_pending_notices, 1));
    t.push_back(bool_field("compression", "enabled", &o::compression,
                           &compression_options::enabled));
    t.push_back(fraction_field("compression", "threshold",
                               &compression_options::threshold));
    t.push_back(fraction_field("compression", "target_ratio",
                               &compression_options::target_ratio));
    t.push_back(int_field("compression", "protect_first_n", &o::compression,
                          &compression_options::protect_first_n, 0));
    t.push_back(int_field("compression", "protect_last_n", &o::compression,
                          &compression_options::protect_last_n, 1));
    t.push_back(int_field("compression", "keep_tool_results",
                          &o::compression,
                          &compression_options::keep_tool_results, 0));
    t.push_back(int_field("compression", "prune_min_chars", &o::compression,
                          &compression_options::prune_min_chars, 0));
    // agent toolsets, memory, skills (docs/tools.md)
    t.push_back(list_field("agent", "toolsets", &o::agent,
                           &agent_options::toolsets));
    t.push_back(list_field("agent", "disabled_toolsets", &o::agent,
                           &agent_options::disabled_toolsets));
    t.push_back(list_field("agent", "disabled_tools", &o::agent,
                           &agent_options::disabled_tools));
    t.push_back(bool_field("memory", "memory_enabled", &o::memory,
                           &memory_options::memory_enabled));
    t.push_back(bool_field("memory", "user_profile_enabled", &o::memory,
                           &memory_options::user_profile_enabled));
    t.push_back(int_field("memory", "memory_char_limit", &o::memory,
                          &memory_options::memory_char_limit, 100));
    t.push_back(int_field("memory", "user_char_limit", &o::memory,
                          &memory_options::user_char_limit, 100));
    t.push_back(list_field("skills", "external_dirs", &o::skills,
                           &skills_options::external_dirs));
    // cron (docs/cron.md)
    t.push_back(bool_field("cron", "enabled", &o::cron,
                           &cron_options::enabled));
    t.push_back(int_field("cron", "max_concurrent", &o::cron,
                          &cron_options::max_concurrent, 1));
    t.push_back(string_field("cron", "catch_up", &o::cron,
                             &cron_options::catch_up, {"one", "none"}));
    t.push_back(int_field("cron", "max_failures", &o::cron,
                          &cron_options::max_failures, 0));
    t.push_back(int_field("cron", "history_keep", &o::cron,
                          &cron_options::history_keep, 1));
    t.push_back(bool_field("cron", "allow_agent_scheduling", &o::cron,
                           &cron_options::allow_agent_scheduling));
    t.push_back(string_field("cron", "default_timezone", &o::cron,
                             &cron_options::default_timezone));
    t.push_back(string_field("cron", "approvals", &o::cron,
                             &cron_options::approvals, {"cron_mode", "http"}));
    t.push_back(int_field("cron", "webhook_timeout", &o::cron,
                          &cron_options::webhook_timeout, 1));
    t.push_back(int_field("cron", "webhook_attempts", &o::cron,
                          &cron_options::webhook_attempts, 1));
    t.push_back(bool_field("cron", "allow_private_webhooks", &o::cron,
                           &cron_options::allow_private_webhooks));
    // checkpoints (docs/checkpoints.md)
    t.push_back(bool_field("checkpoints", "enabled", &o::checkpoints,
                           &checkpoints_options::enabled));
    t.push_back(int_field("checkpoints", "max_file_mb", &o::checkpoints,
                          &checkpoints_options::max_file_mb, 1));
    t.push_back(int_field("checkpoints", "keep", &o::checkpoints,
                          &checkpoints_options::keep, 1));
    t.push_back(int_field("checkpoints", "max_age_days", &o::checkpoints,
                          &checkpoints_options::max_age_days, 0));
    t.push_back(int_field("checkpoints", "max_files", &o::checkpoints,
                          &checkpoints_options::max_files, 1));
    t.push_back(string_field("checkpoints", "on_failure", &o::checkpoints,
                             &checkpoints_options::on_failure,
                             {"continue", "block"}));
    // cluster (docs/cluster.md)
    t.push_back(secret_field(string_field("cluster", "key", &o::cluster,
                                          &cluster_options::key)));
    t.push_back(int_field("cluster", "heartbeat_ms", &o::cluster,
                          &cluster_options::heartbeat_ms, 10));
    t.push_back(int_field("cluster", "failure_timeout_ms", &o::cluster,
                          &cluster_options::failure_timeout_ms, 50));
    t.push_back(int_field("cluster", "max_sessions", &o::cluster,
                          &cluster_options::max_sessions, 1));
    t.push_back(int_field("cluster", "drain_timeout_ms", &o::cluster,
                          &cluster_options::drain_timeout_ms, 0));
    t.push_back(int_field("cluster", "max_frame_mb", &o::cluster,
                          &cluster_options::max_frame_mb, 1));
    t.push_back(bool_field("cluster", "insecure", &o::cluster,
                           &cluster_options::insecure));
    t.push_back(string_field("cluster", "tls_cert", &o::cluster,
                             &cluster_options::tls_cert));
    t.push_back(string_field("cluster", "tls_key", &o::cluster,
                             &cluster_options::tls_key));
    t.push_back(string_field("cluster", "tls_ca", &o::cluster,
                             &cluster_options::tls_ca));
    // storage (docs/storage.md)
    t.push_back(string_field("storage", "backend", &o::storage,
                             &storage_options::backend, {"lmdb", "postgres"}));
    t.push_back(postgres_field());
    t.push_back(bool_field("storage", "auto_migrate", &o::storage,
                           &storage_options::auto_migrate));
    return t;
  }();
  return table;
}

// Top-level `command_allowlist`: a list of pattern keys (bounded).
std::string parse_allowlist(const YAML::Node& node, options& o) {
  o.command_allowlist.clear();
  if (node.IsNull())
    return {};
  if (!node.IsSequence())
    return "command_allowlist: expected a list of strings, got "
           + scalar_text(node);
  for (const auto& item : node) {
    if (!item.IsScalar())
      return "command_allowlist: expected a list of strings, found "
             + scalar_text(item);
    if (item.Scalar().size() > 200 || o.command_allowlist.size() >= 1000)
      return "command_allowlist: at most 1000 keys of 200 characters";
    o.command_allowlist.push_back(item.Scalar());
  }
  return {};
}

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

load_result parse_options(const std::string& yaml_text,
                          const std::string& origin) {
  load_result result;
  try {
    YAML::Node root = YAML::Load(yaml_text);
    if (!root || root.IsNull())
      return result; // an empty file means defaults
    if (!root.IsMap()) {
      result.error = located(origin, root.Mark())
                     + ": the top level must be a mapping of sections";
      return result;
    }
    if (auto dup = find_duplicate_key(root, origin); !dup.empty()) {
      result.error = dup;
      return result;
    }
    std::set<std::string> sections;
    for (auto& f : fields())
      sections.insert(f.section);
    for (const auto& kv : root) {
      auto section = kv.first.as<std::string>();
      const auto& body = kv.second;
      if (section == "command_allowlist") { // a top-level list
        if (auto err = parse_allowlist(body, result.opts); !err.empty()) {
          result.error = located(origin, body.Mark()) + ": " + err;
          return result;
        }
        continue;
      }
      if (section == "mcp_servers") { // a mapping of servers (docs/mcp.md)
        std::vector<std::string> warnings;
        auto parsed = parse_mcp_servers(body, result.opts.mcp_servers,
                                        warnings);
        for (auto& w : warnings)
          MIBYAN_LOG(warning, "config", origin << ": " << w);
        if (!parsed.ok()) {
          result.error = located(origin, body.Mark()) + ": " + parsed.error;
          return result;
        }
        continue;
      }
      if (sections.count(section) == 0) {
        std::string known;
        for (auto& s : sections)
          known += (known.empty() ? "" : ", ") + s;
        result.error = located(origin, kv.first.Mark())
                       + ": unknown top-level key '" + section
                       + "' (known: " + known + ")";
        return result;
      }
      if (body.IsNull())
        continue;
      if (!body.IsMap()) {
        result.error = located(origin, body.Mark()) + ": " + section
                       + ": expected a mapping, got " + scalar_text(body);
        return result;
      }
      for (const auto& entry : body) {
        auto key = entry.first.as<std::string>();
        const field* match = nullptr;
        for (auto& f : fields())
          if (f.section == section && f.key == key)
            match = &f;
        if (match == nullptr) {
          std::string known;
          for (auto& f : fields())
            if (f.section == section)
              known += (known.empty() ? "" : ", ") + f.key;
          result.error = located(origin, entry.first.Mark()) + ": unknown key '"
                         + section + "." + key + "' (known: " + known + ")";
          return result;
        }
        auto err = match->set(entry.second, result.opts);
        if (!err.empty()) {
          result.error = located(origin, entry.second.Mark()) + ": " + section
                         + "." + key + ": " + err;
          return result;
        }
      }
    }
    collect_secret_literals(root, result.opts.secret_literals);
  } catch (const YAML::Exception& e) {
    result.error = located(origin, e.mark) + ": invalid YAML: " + e.msg;
  } catch (const std::exception& e) {
    result.error = origin + ": " + e.what();
  }
  return result;
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

load_result load_options(const std::string& home_arg) {
  auto home = home_arg.empty() ? resolve_home() : home_arg;
  if (auto bad = check_home(home); !bad.empty()) {
    load_result refused;
    refused.error = bad;
    return refused;
  }
  std::string path = home + "/config.yaml";
  if (const char* v = std::getenv("MIBYAN_CONFIG"); v && *v)
    path = v;
  bool exists = false;
  std::string read_error;
  auto text = read_file_text(path, exists, read_error);
  load_result result;
  if (!read_error.empty()) {
    result.error = read_error;
    return result;
  }
  if (exists)
    result = parse_options(text, path);
  if (!result.ok())
    return result;
  result.opts.home = home;
  result.opts.config_path = exists ? path : "";
  auto env_path = home + "/.env";
  if (const char* v = std::getenv("MIBYAN_ENV"); v && *v)
    env_path = v;
  bool env_exists = false;
  auto env_text = read_file_text(env_path, env_exists, read_error);
  if (!read_error.empty()) {
    result.error = read_error;
    return result;
  }
  std::vector<std::string> warnings;
  parse_env_file(env_text, result.opts.env_file, &warnings);
  for (auto& w : warnings)
    MIBYAN_LOG(warning, "config", env_path << ": " << w);
  return result;
}

std::vector<shown_option> shown_options(const options& opts) {
  std::vector<shown_option> out;
  for (auto& f : fields())
    out.push_back(shown_option{f.section, f.key, f.show(opts)});
  return out;
}

std::string render_options(const options& opts) {
  std::ostringstream out;
  out << "# home: " << opts.home << "\n";
  out << "# config file: "
      << (opts.config_path.empty() ? "(none, defaults)" : opts.config_path)
      << "\n";
  std::string section;
  for (auto& f : fields()) {
    if (f.section != section) {
      section = f.section;
      out << section << ":\n";
    }
    out << "  " << f.key << ": " << f.show(opts) << "\n";
  }
  out << "command_allowlist: [";
  for (size_t i = 0; i < opts.command_allowlist.size(); ++i)
    out << (i ? ", " : "") << quoted_for_show(opts.command_allowlist[i]);
  out << "]\n";
  out << render_mcp_servers(opts.mcp_servers);
  out << "# .env: " << opts.env_file.size() << " variables (values masked)\n";
  for (auto& [k, v] : opts.env_file)
    out << "#   " << k << "=**** (" << v.size() << " chars)\n";
  return out.str();
}

} // namespace mibyan
