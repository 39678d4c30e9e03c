// File: kernels/runner_source.hpp
//
// The Python sources of the kernels, embedded into the library at build
// time (cmake/embed_modules.cmake, cmake/embed_file.cmake, CMakeLists.txt),
// so an installed binary needs no data files to start kernels. Each
// function returns static data; thread-safe.
#pragma once

#include <string_view>
#include <vector>

namespace mibyan {

/// One Python module of the kernel: its file name in a staging dir and
/// its text.
struct kernel_module {
  std::string_view file_name;
  std::string_view text;
};

/// The file name of the runner, the script a kernel's interpreter runs
/// (docs/kernel_protocol.md); one of kernel_modules().
inline constexpr std::string_view kernel_runner_file =
  "mibyan_kernel_runner.py";

/// Every Python module of the kernel (kernels/*.py listed in
/// CMakeLists.txt's MIBYAN_KERNEL_MODULES, file names distinct): the
/// runner, the modules it loads at start-up and the checkpoint module
/// with its parts. spawn_kernel writes them all side by side into each
/// staging dir; the runner loads them from its own directory by exact
/// path.
const std::vector<kernel_module>& kernel_modules();

/// The text of kernels/mibyan_tools_transport.py: the `mibyan_tools`
/// module without its tools (transport and helpers), which
/// kernels/stub_generator.hpp completes for each kernel.
std::string_view stub_transport_source();

} // namespace mibyan
