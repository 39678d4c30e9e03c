# Writes OUTPUT, a C++ file defining `std::string_view FUNCTION()` that
# returns the bytes of INPUT. Run with cmake -P at build time, so edits of
# INPUT are picked up by the next build.
include(${CMAKE_CURRENT_LIST_DIR}/hex_bytes.cmake)
mibyan_hex_bytes("${INPUT}" bytes byte_count)
file(WRITE "${OUTPUT}.tmp"
"// Generated from ${INPUT}; do not edit.\n"
"#include <string_view>\n"
"namespace mibyan {\n"
"namespace { const char data[] = {\n${bytes}0};\n}\n"
"std::string_view ${FUNCTION}() { return {data, ${byte_count}}; }\n"
"} // namespace mibyan\n")
file(COPY_FILE "${OUTPUT}.tmp" "${OUTPUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUTPUT}.tmp")
