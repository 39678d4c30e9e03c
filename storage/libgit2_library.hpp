// File: storage/libgit2_library.hpp
//
// libgit2, loaded on first use (base/shared_library.hpp) instead of
// linked: only the file checkpoint store (storage/file_checkpoint_*.cpp)
// uses it, and a process that never opens that store is spared loading
// libgit2 and the mbedTLS, libssh2 and PCRE2 libraries it brings.
//
// Contract:
//   * `libgit2_lib()` loads the library once (thread-safe), calls
//     git_libgit2_init once, and returns the table, or fails (unavailable,
//     with how to install libgit2). `file_checkpoint_store::open` calls it
//     first and reports its failure.
//   * `git2()` is for code running behind an open store (it holds a
//     repository); it never loads.
//   * Members have libgit2's names and signatures: `git2().git_tree_free(t)`.
//     The soname is the one of the headers compiled against
//     (MIBYAN_LIBGIT2_SONAME, from pkg-config's version: libgit2 changes its
//     ABI with each minor version).
#pragma once

#include <git2.h>

#include "base/status.hpp"

namespace mibyan {

/// The libgit2 functions the checkpoint store calls, for X(name) macros.
#define MIBYAN_LIBGIT2_FUNCTIONS(X) \
  X(git_blob_free) X(git_blob_lookup) X(git_blob_rawcontent) \
  X(git_blob_rawsize) X(git_buf_dispose) X(git_commit_create) \
  X(git_commit_free) X(git_commit_id) X(git_commit_lookup) \
  X(git_commit_parent_id) X(git_commit_parentcount) X(git_commit_tree) \
  X(git_error_last) X(git_ignore_path_is_ignored) X(git_index_add) \
  X(git_index_free) X(git_index_new) X(git_index_write_tree_to) \
  X(git_libgit2_init) X(git_libgit2_opts) X(git_odb_exists_ext) \
  X(git_odb_free) X(git_odb_hash) X(git_odb_write) X(git_oid_equal) \
  X(git_oid_fromstr) X(git_oid_tostr) X(git_patch_free) \
  X(git_patch_from_buffers) X(git_patch_to_buf) X(git_reference_create) \
  X(git_reference_free) X(git_reference_iterator_free) \
  X(git_reference_iterator_glob_new) X(git_reference_name_to_id) \
  X(git_reference_next) X(git_reference_target) X(git_repository_free) \
  X(git_repository_init) X(git_repository_odb) X(git_repository_open_bare) \
  X(git_repository_set_workdir) X(git_repository_workdir) \
  X(git_signature_free) X(git_signature_new) X(git_status_byindex) \
  X(git_status_list_entrycount) X(git_status_list_free) \
  X(git_status_list_new) X(git_tree_entry_filemode) X(git_tree_entry_id) \
  X(git_tree_entry_name) X(git_tree_entry_type) X(git_tree_free) \
  X(git_tree_id) X(git_tree_lookup) X(git_tree_walk)

struct libgit2_library {
#define MIBYAN_LIBGIT2_MEMBER(name) decltype(&::name) name;
  MIBYAN_LIBGIT2_FUNCTIONS(MIBYAN_LIBGIT2_MEMBER)
#undef MIBYAN_LIBGIT2_MEMBER
};

/// The loaded library, or unavailable with why it could not be loaded.
/// The pointer is never null and stays valid for the process's life.
result<const libgit2_library*> libgit2_lib();

/// The loaded library; only after `libgit2_lib()` returned it.
const libgit2_library& git2();

} // namespace mibyan
