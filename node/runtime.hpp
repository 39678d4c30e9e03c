// File: node/runtime.hpp
//
// The library-internal view of the runtime: the public class of
// include/mibyan/runtime.hpp plus the private types its internal members
// use (the full option struct, the tool interface and registry). The CLI,
// the benchmarks and the tests include this header; applications include
// mibyan/runtime.hpp (docs/embedding.md).
#pragma once

#include "mibyan/runtime.hpp"

#include "config/options.hpp"
#include "tools/tool.hpp"
