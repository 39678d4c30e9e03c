// File: actors/guardian_call.hpp
//
// Smart-mode reviewer call (docs/approvals.md): one non-streamed model call
// through a provider connection actor, waited for from a blocking-pool
// thread (never a scheduler thread). Bounded by `timeout`; returns soon
// after `*cancelled` turns true (the provider call is then cancelled).
#pragma once

#include <atomic>
#include <chrono>
#include <string>

#include "actors/provider.hpp"
#include "approvals/approval_service.hpp"

namespace mibyan {

guardian_reply call_guardian(caf::actor_system& sys, provider_actor provider,
                             const std::string& system_prompt,
                             const std::string& user_prompt,
                             std::chrono::milliseconds timeout,
                             const std::atomic<bool>* cancelled);

} // namespace mibyan
