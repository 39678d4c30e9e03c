// File: serve/ui_assets.hpp
//
// The dashboard's static files (serve/ui/), embedded into the library at
// build time (cmake/embed_files.cmake): looked up by their path below
// serve/ui/, never from the file system, so no request can reach any
// other file.
//
// Thread safety: immutable data.
#pragma once

#include <cstddef>
#include <string_view>

namespace mibyan::serve {

struct ui_asset {
  /// Relative to serve/ui/ ("index.html", "js/app.js").
  std::string_view path;
  std::string_view content_type;
  std::string_view body;
  /// A strong ETag, quoted (from the content's SHA-256).
  std::string_view etag;
};

/// The generated table, sorted by path (`count` entries).
const ui_asset* ui_asset_table(size_t& count);

/// The asset at `path` (nullptr when none). "" means "index.html".
const ui_asset* find_ui_asset(std::string_view path);

/// Whether an If-None-Match header value matches `etag` ("*" or a list
/// containing it, weak or strong).
bool etag_matches(std::string_view if_none_match, std::string_view etag);

} // namespace mibyan::serve
