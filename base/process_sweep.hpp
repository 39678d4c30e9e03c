// File: base/process_sweep.hpp
//
// Finds and kills processes that escaped a child's process group (setsid,
// `set -m`, a double fork) by a mark in their environment: the runner puts
// a per-call variable into the child's environment, every descendant
// inherits it, and the sweep kills every process of this user whose
// initial environment (/proc/PID/environ) still holds it.
//
// Linux only (reads /proc). Thread-safe (no shared state); blocking, so
// call from a blocking-work thread.
#pragma once

#include <string>

namespace mibyan {

/// Name of the environment variable that marks a call's processes.
constexpr const char* process_tag_variable = "MIBYAN_PROCESS_TAG";

/// Returns a fresh "MIBYAN_PROCESS_TAG=<random hex>" entry, unique per
/// call.
std::string new_process_tag();

/// Sends SIGKILL to every process other than this one whose environment
/// contains exactly `tag_entry` ("NAME=value"), through a pidfd so a
/// recycled pid is never hit. Scans again until a scan finds none (at most
/// 20 scans), so a process forking during the sweep is caught too. Returns
/// the number of processes signalled.
int kill_tagged_processes(const std::string& tag_entry);

} // namespace mibyan
