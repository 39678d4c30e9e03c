# Writes OUTPUT, a C++ file defining the table of the dashboard's static
# assets (serve/ui_assets.hpp): every file under DIR whose name ends in one
# of the extensions below or starts with LICENSE, as {path relative to DIR,
# Content-Type, bytes, ETag}. The ETag is the first 32 hex digits of the
# file's SHA-256, quoted. Run with cmake -P at build time, so edits under
# DIR are picked up by the next build (the glob of the caller is
# CONFIGURE_DEPENDS, so added files are too).
include(${CMAKE_CURRENT_LIST_DIR}/hex_bytes.cmake)
file(GLOB_RECURSE files RELATIVE "${DIR}" "${DIR}/*")
list(SORT files)
set(arrays "")
set(rows "")
set(count 0)
foreach(rel IN LISTS files)
  get_filename_component(name "${rel}" NAME)
  string(TOLOWER "${name}" lname)
  set(type "")
  if(lname MATCHES "\\.html$")
    set(type "text/html; charset=utf-8")
  elseif(lname MATCHES "\\.m?js$")
    set(type "text/javascript; charset=utf-8")
  elseif(lname MATCHES "\\.css$")
    set(type "text/css; charset=utf-8")
  elseif(lname MATCHES "\\.svg$")
    set(type "image/svg+xml")
  elseif(lname MATCHES "\\.png$")
    set(type "image/png")
  elseif(lname MATCHES "\\.ico$")
    set(type "image/x-icon")
  elseif(lname MATCHES "\\.json$")
    set(type "application/json")
  elseif(lname MATCHES "\\.woff2$")
    set(type "font/woff2")
  elseif(lname MATCHES "\\.txt$" OR lname MATCHES "^license")
    set(type "text/plain; charset=utf-8")
  endif()
  if(type STREQUAL "" OR rel MATCHES "\\\\|\"")
    continue()
  endif()
  mibyan_hex_bytes("${DIR}/${rel}" bytes byte_count)
  file(SHA256 "${DIR}/${rel}" digest)
  string(SUBSTRING "${digest}" 0 32 etag)
  string(APPEND arrays "const unsigned char a${count}[] = {\n${bytes}0};\n")
  string(APPEND rows "  {\"${rel}\", \"${type}\", {reinterpret_cast<const char*>(a${count}), ${byte_count}}, \"\\\"${etag}\\\"\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  set(table "const ui_asset* table = nullptr;\n")
else()
  set(table "const ui_asset table[] = {\n${rows}};\n")
endif()
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${DIR} by cmake/embed_files.cmake; do not edit.\n"
"#include \"serve/ui_assets.hpp\"\n"
"namespace mibyan::serve {\n"
"namespace {\n${arrays}${table}}\n"
"const ui_asset* ui_asset_table(size_t& count) {\n"
"  count = ${count};\n"
"  return table;\n"
"}\n"
"} // namespace mibyan::serve\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
