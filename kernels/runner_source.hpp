// File: kernels/runner_source.hpp
//
// The Python sources of the kernels, embedded into the library at build
// time (cmake/embed_file.cmake, CMakeLists.txt), so an installed binary
// needs no data files to start kernels. Each function returns static text;
// thread-safe.
#pragma once

#include <string_view>

namespace mibyan {

std::string_view kernel_runner_source();

/// The text of kernels/mibyan_checkpoint.py (namespace checkpoints),
/// written beside the runner in each staging dir.
std::string_view kernel_checkpoint_source();

/// The text of kernels/mibyan_tools_transport.py: the `mibyan_tools`
/// module without its tools (transport and helpers), which
/// kernels/stub_generator.hpp completes for each kernel.
std::string_view stub_transport_source();

} // namespace mibyan
