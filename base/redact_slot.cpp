#include "base/redact_slot.hpp"

#include "base/env_filter.hpp"
#include "base/redact.hpp"

namespace mibyan {

redactor_slot::redactor_slot(
  const std::map<std::string, std::string>& env_file,
  std::vector<std::pair<std::string, std::string>> literals)
  : env_file_(env_file), literals_(std::move(literals)) {
  all_.push_back(std::make_unique<const redactor>(
    redactor::from_environment(current_environment(), env_file_,
                                 literals_)));
  current_.store(all_.back().get(), std::memory_order_release);
}

redactor_slot::~redactor_slot() = default;

bool redactor_slot::update(
  const std::map<std::string, std::string>& env_file) {
  std::lock_guard<std::mutex> guard{mtx_};
  if (env_file == env_file_)
    return false;
  env_file_ = env_file;
  all_.push_back(std::make_unique<const redactor>(
    redactor::from_environment(current_environment(), env_file_,
                                 literals_)));
  current_.store(all_.back().get(), std::memory_order_release);
  return true;
}

bool redactor_slot::add_literal(const std::string& name,
                                const std::string& value) {
  if (value.size() < min_secret_value_length)
    return false;
  std::lock_guard<std::mutex> guard{mtx_};
  for (auto& [n, v] : literals_)
    if (v == value)
      return false;
  literals_.emplace_back(name, value);
  all_.push_back(std::make_unique<const redactor>(
    redactor::from_environment(current_environment(), env_file_,
                                 literals_)));
  current_.store(all_.back().get(), std::memory_order_release);
  return true;
}

} // namespace mibyan
