// File: include/mibyan/mibyan.hpp  (public API)
//
// The CAF-free facade in one include: runtime, agent and host tools.
// docs/embedding.md describes it; mibyan/actors.hpp is the separate
// actor-level API for applications that run their own CAF actor system.
#pragma once

#include "mibyan/agent.hpp"
#include "mibyan/host_tool.hpp"
#include "mibyan/runtime.hpp"
