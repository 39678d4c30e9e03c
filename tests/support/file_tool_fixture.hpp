// File: tests/support/file_tool_fixture.hpp
//
// A fixture for the file-tool suites (read_file, write_file, patch): a temp
// directory with a fake $HOME (so nothing touches the real home), a
// `$MIBYAN_HOME` inside it, a working directory, a registry holding the
// three file tools and a filled tool_context. Calls go through
// dispatch_tool so schema validation is exercised. Not thread-safe itself;
// `call` may be used from several threads (the context is only read).
#pragma once

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "config/options.hpp"
#include "base/json.hpp"
#include "tests/support/temp_dir.hpp"
#include "tools/core_tools.hpp"
#include "tools/registry.hpp"

namespace mibyan::test {

struct file_tool_fixture {
  temp_dir dir;
  options cfg;
  std::atomic<bool> cancelled{false};
  tool_context ctx;
  tool_registry reg;
  std::string home;        // fake $HOME
  std::string mibyan_home; // $HOME/.mibyan
  std::string work;        // the session cwd
  std::string saved_home;
  bool had_home = false;

  file_tool_fixture() {
    if (const char* h = std::getenv("HOME")) {
      had_home = true;
      saved_home = h;
    }
    home = dir / "home";
    mibyan_home = home + "/.mibyan";
    work = dir / "work";
    std::filesystem::create_directories(mibyan_home);
    std::filesystem::create_directories(work);
    ::setenv("HOME", home.c_str(), 1);
    cfg.home = mibyan_home;
    ctx.session_id = "session-1";
    ctx.call_id = "call-1";
    ctx.cwd = work;
    ctx.home = mibyan_home;
    ctx.cfg = &cfg;
    ctx.cancelled = &cancelled;
    reg.add(make_read_file_tool());
    reg.add(make_write_file_tool());
    reg.add(make_patch_tool());
  }

  ~file_tool_fixture() {
    if (had_home)
      ::setenv("HOME", saved_home.c_str(), 1);
    else
      ::unsetenv("HOME");
  }

  /// Dispatches `tool_name` with JSON argument text.
  json::value call(std::string_view tool_name, std::string_view args) const {
    return dispatch_tool(reg, tool_name, args, ctx);
  }

  json::value call(std::string_view tool_name, const char* args) const {
    return dispatch_tool(reg, tool_name, std::string_view{args}, ctx);
  }

  /// Dispatches `tool_name` with parsed arguments.
  json::value call(std::string_view tool_name, json::value args) const {
    return dispatch_tool(reg, tool_name, std::move(args), ctx);
  }

  /// Dispatches with a modified context.
  json::value call_with(const tool_context& c, std::string_view tool_name,
                        json::value args) const {
    return dispatch_tool(reg, tool_name, std::move(args), c);
  }

  /// Writes a file relative to the working directory; returns its path.
  std::string put(const std::string& rel, const std::string& content) const {
    return dir.write("work/" + rel, content);
  }

  /// Returns the content of a file relative to the working directory.
  std::string get(const std::string& rel) const {
    return dir.read("work/" + rel);
  }
};

/// Builds an argument object from key/value pairs.
inline json::value obj(std::initializer_list<json::member> members) {
  return json::value{json::object(members)};
}

/// Returns the "error" member of a result, or "".
inline std::string error_of(const json::value& result) {
  return result.get_string("error");
}

} // namespace mibyan::test
