#include "base/state_dir.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/errno_status.hpp"

namespace mibyan {

namespace {

std::string user_name(uid_t uid) {
  std::vector<char> buf(16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0
      && found != nullptr && found->pw_name != nullptr)
    return found->pw_name;
  return {};
}

std::string who(uid_t uid) {
  auto name = user_name(uid);
  return "uid " + std::to_string(uid) + (name.empty() ? "" : " (" + name + ")");
}

} // namespace

std::string passwd_home() {
  std::vector<char> buf(16384);
  struct passwd pw;
  struct passwd* found = nullptr;
  if (::getpwuid_r(::geteuid(), &pw, buf.data(), buf.size(), &found) != 0
      || found == nullptr || found->pw_dir == nullptr)
    return {};
  std::string home = found->pw_dir;
  // "/" or "/nonexistent" are placeholders of system users, not homes.
  struct stat st;
  if (home.empty() || home == "/" || ::stat(home.c_str(), &st) != 0
      || !S_ISDIR(st.st_mode))
    return {};
  return home;
}

std::string default_state_dir() {
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string{h} + "/.mibyan";
  auto home = passwd_home();
  return home.empty() ? std::string{} : home + "/.mibyan";
}

status check_state_dir(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT)
      return {};
    int err = errno;
    return status::failure(
      errno_code(err),
      "state directory " + dir + " cannot be checked: " + std::strerror(err)
        + ". Fix: set MIBYAN_HOME to a private directory you own.");
  }
  if (!S_ISDIR(st.st_mode))
    return status::failure(
      status_code::invalid_argument,
      "state directory " + dir
        + " is not a directory. Fix: remove it or set MIBYAN_HOME to a "
          "private directory you own.");
  auto me = ::geteuid();
  if (st.st_uid != me)
    return status::failure(status_code::permission_denied,
      "state directory " + dir + " belongs to " + who(st.st_uid)
           + ", not to you (" + who(me)
           + "), so that user controls Mibyan's configuration and secrets. "
             "Fix: set MIBYAN_HOME to a private directory you own (e.g. "
             "~/.mibyan), or remove " + dir + " if you did not create it.");
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o",
                  static_cast<unsigned>(st.st_mode & 07777));
    return status::failure(status_code::permission_denied,
      "state directory " + dir + " is writable by "
           + ((st.st_mode & S_IWOTH) != 0 ? "other users" : "its group")
           + " (mode " + mode
           + "), so they could replace Mibyan's configuration or secrets. "
             "Fix: chmod 700 " + dir
           + ", or set MIBYAN_HOME to a private directory.");
  }
  return {};
}

} // namespace mibyan
