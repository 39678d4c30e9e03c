// File: tests/support/canary_fixture.hpp
//
// A runtime whose model is the scripted provider server, and canaries to
// delete: for the approval suites that run `rm -rf` through the terminal
// tool (approval_smart_test, session_channels_test). Commands only ever
// delete canary directories inside the fixture's own work dir. Header-only;
// include after <boost/test/unit_test.hpp>.
#pragma once

#include <filesystem>
#include <memory>
#include <mutex>
#include <string>

#include "base/json.hpp"
#include "runtime/runtime.hpp"
#include "tests/support/http_server.hpp"
#include "tests/support/temp_dir.hpp"

namespace mibyan::test {

struct canary_fixture {
  http_server server;
  temp_dir home;
  temp_dir work;
  std::unique_ptr<runtime> rt;
  std::mutex mtx; // guards what the suites' approval callbacks record

  /// Options for a runtime on `home` whose default model is "m" of the
  /// scripted server: no pre-started kernels, one API retry.
  options canary_options() {
    options opts;
    opts.home = home.path();
    opts.code_execution.prestart_kernels = 0;
    opts.model.provider = "custom";
    opts.model.base_url = server.url("/v1");
    opts.model.default_model = "m";
    opts.agent.api_max_retries = 1;
    return opts;
  }

  void start_with(options opts) {
    auto made = create_runtime(std::move(opts));
    BOOST_REQUIRE_MESSAGE(made, made.error);
    rt = std::move(*made);
  }

  /// Makes the canary <work>/<name>/canary, then calls the terminal tool
  /// with `rm -rf <work>/<name>` in `session` (call id "c-<name>"); the
  /// tool's result text.
  std::string rm_canary(const std::string& name, const std::string& session) {
    work.write(name + "/canary", "alive");
    json::value args;
    args["command"] = "rm -rf " + work.path() + "/" + name;
    auto out = rt->call_tool({session, "c-" + name, "terminal", args.dump()});
    return out.result_json;
  }

  bool alive(const std::string& name) {
    return std::filesystem::exists(work.path() + "/" + name + "/canary");
  }
};

} // namespace mibyan::test
