#include "storage/result_spill.hpp"

#include <cerrno>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <random>

#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/private_file.hpp"

namespace mibyan {

namespace {

// Keeps [A-Za-z0-9_-]; every other byte becomes "%XX" ('.' too, so no
// component can be "." or "..").
std::string encode_component(const std::string& s, size_t max_len) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= max_len)
      break;
    if (std::isalnum(c) || c == '_' || c == '-') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  size_t got = 0;
  while (got < bytes) {
    auto n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    got += static_cast<size_t>(n);
  }
  if (got < bytes) { // no getrandom: still unpredictable enough for a name
    std::random_device rd;
    for (auto& c : raw)
      c = static_cast<char>(rd());
  }
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// Creates `dir` (0700) if missing and checks that it is a private directory
// of ours: not a symlink, owned by the effective user, no group/other write.
std::string ensure_private_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return "cannot create " + dir + ": " + std::strerror(errno);
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0)
    return "cannot inspect " + dir + ": " + std::strerror(errno);
  if (S_ISLNK(st.st_mode))
    return dir + " is a symbolic link; refusing to write through it";
  if (!S_ISDIR(st.st_mode))
    return dir + " is not a directory";
  if (st.st_uid != ::geteuid())
    return dir + " is not owned by the current user";
  if ((st.st_mode & 077) != 0 && ::chmod(dir.c_str(), 0700) != 0)
    return "cannot make " + dir + " private: " + std::strerror(errno);
  return {};
}

} // namespace

std::string spill_root(const std::string& home) {
  return home + "/cache/results";
}

std::string spill_dir(const std::string& home, const std::string& session_id) {
  auto enc = encode_component(session_id, 200);
  return spill_root(home) + "/" + (enc.empty() ? std::string{"_"} : enc);
}

store_result<std::string> spill_result(const std::string& home,
                                       const std::string& session_id,
                                       const std::string& call_id,
                                       std::string_view text) {
  using R = store_result<std::string>;
  if (home.empty())
    return R::failure("spill_result: no MIBYAN_HOME");
  // $MIBYAN_HOME itself is checked by the config loader; below it every
  // component is ours and verified.
  if (auto made = make_private_dirs(home); !made.ok())
    return R::failure("spill_result: " + made.error);
  for (auto dir : {home + "/cache", spill_root(home),
                   spill_dir(home, session_id)})
    if (auto err = ensure_private_dir(dir); !err.empty())
      return R::failure("spill_result: " + err);
  auto base = spill_dir(home, session_id) + "/"
              + encode_component(call_id.empty() ? "result" : call_id, 64);
  status last;
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto path = base + "-" + random_hex(8) + ".txt";
    last = write_private_file(path, text, /*exclusive=*/true);
    if (last.ok())
      return R{path};
    if (last.code != status_code::already_exists)
      break;
  }
  return R::failure("spill_result: " + last.error);
}

store_status remove_spilled_results(const std::string& home,
                                    const std::string& session_id) {
  if (home.empty())
    return {};
  std::error_code ec;
  std::filesystem::remove_all(spill_dir(home, session_id), ec);
  if (ec)
    return store_status::failure("cannot remove the spilled results of "
                                 + session_id + ": " + ec.message());
  return {};
}

} // namespace mibyan
