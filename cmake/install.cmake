# Installation of Mibyan as a library (docs/embedding.md, "Install"):
#   lib/libmibyan.a, include/mibyan/*.hpp, bin/mibyan,
#   lib/cmake/mibyan/ (package config, targets, FindCAF.cmake),
#   lib/pkgconfig/mibyan.pc.
# The Python kernel (cmake/embed_modules.cmake) is embedded in the library,
# so the installed binary and every application carry their own copy and
# never look for it on disk.
include(CMakePackageConfigHelpers)

set_target_properties(mibyan_runtime PROPERTIES EXPORT_NAME mibyan
                                                OUTPUT_NAME mibyan)
add_library(mibyan::mibyan ALIAS mibyan_runtime)

set(MIBYAN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/mibyan)
install(TARGETS mibyan_runtime EXPORT mibyanTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS mibyan RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/mibyan
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(EXPORT mibyanTargets NAMESPACE mibyan:: DESTINATION ${MIBYAN_CMAKE_DIR})

configure_package_config_file(
  ${CMAKE_CURRENT_SOURCE_DIR}/cmake/mibyanConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/mibyanConfig.cmake
  INSTALL_DESTINATION ${MIBYAN_CMAKE_DIR})
write_basic_package_version_file(
  ${CMAKE_CURRENT_BINARY_DIR}/mibyanConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mibyanConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/mibyanConfigVersion.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/FindCAF.cmake
        DESTINATION ${MIBYAN_CMAKE_DIR})

# pkg-config: relocatable (prefix from the .pc file's own place). The static
# library needs its dependencies on the link line, so they are in Libs and
# Requires rather than in the .private fields.
file(RELATIVE_PATH MIBYAN_PC_TO_PREFIX
     /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(MIBYAN_PC_CAF_CFLAGS "")
if(NOT CAF_INCLUDE_DIR STREQUAL "/usr/include")
  set(MIBYAN_PC_CAF_CFLAGS "-I${CAF_INCLUDE_DIR}")
endif()
get_filename_component(MIBYAN_PC_CAF_LIBDIR ${CAF_CORE_LIBRARY} DIRECTORY)
configure_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/mibyan.pc.in
               ${CMAKE_CURRENT_BINARY_DIR}/mibyan.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/mibyan.pc
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
