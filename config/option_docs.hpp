// File: config/option_docs.hpp
//
// The key reference of docs/configuration.md, generated from the rows of
// config/option_table.def: a table per section with each key's default (as
// `mibyan config show` prints it), its type or range and its doc line. The
// docs hold this text between the two marker lines; tests/config_docs_test
// fails when they differ (MIBYAN_UPDATE_DOCS=1 rewrites them). Pure
// functions; thread-safe.
#pragma once

#include <string>

namespace mibyan {

/// The line before the generated text in docs/configuration.md.
extern const char* const config_reference_begin;
/// The line after it.
extern const char* const config_reference_end;

/// The generated reference, without the marker lines; ends with '\n'.
std::string config_reference_markdown();

} // namespace mibyan
