# Finds the C++ Actor Framework 0.17 as packaged by Debian (libcaf-dev), which
# ships neither a CMake package nor a pkg-config file.
#
# Defines the imported targets CAF::core, CAF::io and CAF::openssl (the names
# CAF >= 0.18 exports itself, so an upgrade does not touch consumers) and
# CAF_VERSION, read from caf/config.hpp ("#define CAF_VERSION 1706").
include(FindPackageHandleStandardArgs)
find_package(Threads REQUIRED)

if(NOT CAF_FIND_COMPONENTS)
  set(CAF_FIND_COMPONENTS core)
endif()

find_path(CAF_INCLUDE_DIR NAMES caf/all.hpp
          HINTS ${CAF_ROOT_DIR} ENV CAF_ROOT_DIR PATH_SUFFIXES include)
mark_as_advanced(CAF_INCLUDE_DIR)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_version_line
       REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+" _caf_version_int "${_caf_version_line}")
  math(EXPR _caf_major "${_caf_version_int} / 10000")
  math(EXPR _caf_minor "(${_caf_version_int} / 100) % 100")
  math(EXPR _caf_patch "${_caf_version_int} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

foreach(_component IN LISTS CAF_FIND_COMPONENTS)
  string(TOUPPER "${_component}" _upper)
  find_library(CAF_${_upper}_LIBRARY NAMES caf_${_component}
               HINTS ${CAF_ROOT_DIR} ENV CAF_ROOT_DIR PATH_SUFFIXES lib lib64)
  mark_as_advanced(CAF_${_upper}_LIBRARY)
  if(CAF_${_upper}_LIBRARY AND CAF_INCLUDE_DIR)
    set(CAF_${_component}_FOUND TRUE)
  else()
    set(CAF_${_component}_FOUND FALSE)
  endif()
endforeach()

find_package_handle_standard_args(CAF REQUIRED_VARS CAF_INCLUDE_DIR
                                  VERSION_VAR CAF_VERSION HANDLE_COMPONENTS)

if(CAF_FOUND)
  if(CAF_core_FOUND AND NOT TARGET CAF::core)
    add_library(CAF::core UNKNOWN IMPORTED)
    set_target_properties(CAF::core PROPERTIES
      IMPORTED_LOCATION "${CAF_CORE_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
  if(CAF_io_FOUND AND NOT TARGET CAF::io)
    add_library(CAF::io UNKNOWN IMPORTED)
    set_target_properties(CAF::io PROPERTIES
      IMPORTED_LOCATION "${CAF_IO_LIBRARY}"
      INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
  if(CAF_openssl_FOUND AND NOT TARGET CAF::openssl)
    # caf/openssl/session.hpp includes <openssl/ssl.h>.
    find_package(OpenSSL REQUIRED)
    add_library(CAF::openssl UNKNOWN IMPORTED)
    set_target_properties(CAF::openssl PROPERTIES
      IMPORTED_LOCATION "${CAF_OPENSSL_LIBRARY}"
      INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL")
  endif()
endif()
