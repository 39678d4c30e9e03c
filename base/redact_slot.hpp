// File: base/redact_slot.hpp
//
// The runtime's current secret redactor, replaced when `$MIBYAN_HOME/.env`
// changes (docs/security.md, "Secret redaction": a key added to .env while
// the runtime runs is redacted from the next turn on).
//
// Thread safety: get() may be called from any thread at any time (tool
// calls read it on blocking-pool threads, kernels on actor threads);
// update() from any thread (serialised internally). A redactor returned by
// get() stays valid for the slot's lifetime: a replaced redactor is kept,
// not freed, so callers may hold the raw pointer for a whole call. Each
// distinct .env content builds one redactor, so the slot grows only when
// a human edits .env. No I/O besides reading the process environment.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mibyan {

class redactor;

class redactor_slot {
public:
  /// A slot holding the redactor for the process environment plus
  /// `env_file` (the .env variables) plus `literals` (name, value: the
  /// secret values of config.yaml), which every later redactor keeps.
  explicit redactor_slot(
    const std::map<std::string, std::string>& env_file,
    std::vector<std::pair<std::string, std::string>> literals = {});
  ~redactor_slot();

  /// The current redactor (never null).
  const redactor* get() const noexcept {
    return current_.load(std::memory_order_acquire);
  }

  /// Builds a new redactor from the process environment and `env_file`
  /// when `env_file` differs from the last one seen; otherwise does
  /// nothing. Returns whether the redactor was replaced.
  bool update(const std::map<std::string, std::string>& env_file);

  /// Adds a literal secret learnt while running (an OAuth token of an MCP
  /// server, docs/mcp.md "Authorization") and builds a new redactor that
  /// knows it, unless the value is known already or shorter than
  /// min_secret_value_length. Returns whether the redactor was replaced.
  bool add_literal(const std::string& name, const std::string& value);

private:
  std::mutex mtx_;
  std::map<std::string, std::string> env_file_;
  std::vector<std::pair<std::string, std::string>> literals_;
  std::vector<std::unique_ptr<const redactor>> all_;
  std::atomic<const redactor*> current_{nullptr};
};

} // namespace mibyan
