// File: bench/bench_serve.hpp
//
// The in-process `mibyan serve` the HTTP benchmarks (serve, metrics, live)
// measure: $MIBYAN_HOME on tmpfs (/dev/shm/mibyan-<name>-bench-<pid>, so
// the LMDB fsync of each stored message does not hide the CPU cost), the
// scripted provider (bench/scripted_provider.hpp), a runtime with no
// prestarted kernels, and an http_server on 127.0.0.1 with an ephemeral
// port. Every setup failure ends the benchmark. Single-threaded use from
// main(); not copyable or movable (the session-id hook points into it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>

#include <unistd.h>

#include "bench/scripted_provider.hpp"
#include "config/loader.hpp"
#include "runtime/runtime.hpp"
#include "serve/http_server.hpp"

namespace mibyan::bench {

/// A runtime on the options of $MIBYAN_HOME (set it first), with no
/// prestarted kernels; `opts` receives those options. Ends the benchmark
/// when the config or the runtime fails.
inline std::unique_ptr<runtime> bench_runtime(options& opts) {
  auto loaded = load_options();
  if (!loaded.ok())
    provider_die("config: " + loaded.error);
  opts = *loaded;
  opts.code_execution.prestart_kernels = 0;
  std::string err;
  auto rt = create_runtime(opts);
  if (!rt)
    provider_die("runtime: " + rt.error);
  return std::move(*rt);
}

class serve_rig {
public:
  /// `name` names the home directory; session ids are
  /// `<sid_prefix><pid>_<n>`; `tune` adjusts the settings before the
  /// server starts.
  serve_rig(const std::string& name, const std::string& sid_prefix,
            const std::function<void(http_server_settings&)>& tune = {})
    : home(std::filesystem::path{"/dev/shm"}
           / ("mibyan-" + name + "-bench-" + std::to_string(::getpid()))),
      provider(prepare_home(home)) {
    options opts;
    rt = bench_runtime(opts);
    st.host = "127.0.0.1";
    st.port = 0;
    st.limits = opts.server;
    st.turn.provider.provider = "custom";
    st.turn.provider.base_url = provider.url();
    st.turn.provider.model = "m";
    st.turn.provider.api_key = "sk-bench";
    st.model_id = "m";
    st.new_session_id = [this, sid_prefix] {
      return sid_prefix + std::to_string(::getpid()) + "_"
             + std::to_string(++sid_);
    };
    if (tune)
      tune(st);
    auto started = http_server::start(*rt, st);
    if (!started)
      provider_die("serve: " + started.error);
    server = std::move(*started);
    port = server->port();
  }

  /// Shuts the server down (up to 10 s of draining), closes the runtime
  /// and removes the home directory.
  ~serve_rig() {
    server->shutdown(std::chrono::seconds(10));
    server.reset();
    rt.reset();
    std::error_code ec;
    std::filesystem::remove_all(home, ec);
  }

  serve_rig(const serve_rig&) = delete;
  serve_rig& operator=(const serve_rig&) = delete;

  std::filesystem::path home;
  scripted_server provider; // serves <home>/small.txt to read_file calls
  std::unique_ptr<runtime> rt;
  http_server_settings st;
  std::unique_ptr<http_server> server;
  uint16_t port = 0;

private:
  // Creates `home`, points MIBYAN_HOME at it and writes the small file the
  // provider's tool calls read; returns that file's path.
  static std::string prepare_home(const std::filesystem::path& home) {
    std::filesystem::create_directories(home);
    ::setenv("MIBYAN_HOME", home.c_str(), 1);
    auto file = home / "small.txt";
    std::ofstream(file) << "a small file\n";
    return file.string();
  }

  std::atomic<uint64_t> sid_{0};
};

} // namespace mibyan::bench
