// File: kernels/runner_source.hpp
//
// The text of kernels/mibyan_kernel_runner.py, embedded into the library at
// build time (cmake/embed_runner.cmake), so an installed binary needs no
// data files to start kernels.
#pragma once

#include <string_view>

namespace mibyan {

std::string_view kernel_runner_source();

/// The text of kernels/mibyan_checkpoint.py (namespace checkpoints),
/// written beside the runner in each staging dir.
std::string_view kernel_checkpoint_source();

} // namespace mibyan
