#include "cli/tool_lines.hpp"

#include <cerrno>
#include <climits>

#include <poll.h>
#include <sys/uio.h>
#include <unistd.h>

#include "base/json.hpp"
#include "tools/argument_limit.hpp"
#include "tools/tool.hpp"

namespace mibyan {

size_t max_tool_line_bytes(const tool_line_settings& s) {
  // The request envelope around the arguments is far below the slack.
  return static_cast<size_t>(s.max_argument_bytes < 0 ? 0
                                                      : s.max_argument_bytes)
         + 65536;
}

namespace {

std::string invalid_line(uint64_t seq, const std::string& why) {
  return error_result("Invalid request line " + std::to_string(seq) + ": "
                      + why)
    .dump();
}

} // namespace

tool_line parse_tool_line(std::string_view line, uint64_t seq,
                          const tool_line_settings& s) {
  tool_line out;
  if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
    out.answer = invalid_line(seq, "the line is empty; expected a JSON "
                                   "object {\"tool\": NAME, \"args\": {...}}");
    return out;
  }
  auto parsed = json::parse(line);
  if (!parsed || !parsed.v->is_object()) {
    out.answer = invalid_line(seq, "expected a JSON object {\"tool\": NAME, "
                                   "\"args\": {...}}"
                                     + (parsed ? std::string{}
                                               : " (" + parsed.error + ")"));
    return out;
  }
  auto name = parsed.v->find("tool");
  if (name == nullptr || !name->is_string()) {
    out.answer = invalid_line(seq, "missing string member \"tool\"");
    return out;
  }
  auto args = parsed.v->find("args");
  std::string args_json = "{}";
  if (args != nullptr)
    args_json = args->is_string() ? args->as_string() : args->dump();
  out.call = tool_call_request{s.session, "stdin-" + std::to_string(seq),
                               name->as_string(), std::move(args_json), s.cwd};
  return out;
}

std::string too_long_tool_line(uint64_t seq, uint64_t length,
                               const tool_line_settings& s) {
  return invalid_line(seq,
                      check_argument_size(length, s.max_argument_bytes).error);
}

bool write_line_if_ready(int fd, const std::string& line) {
  if (line.size() > PIPE_BUF)
    return false;
  // Pipes and sockets take RWF_NOWAIT: the kernel refuses (EAGAIN) instead
  // of blocking, so one call does what poll() and write() did. A pipe takes
  // at most PIPE_BUF bytes whole or not at all; a socket may take part of
  // the line, whose rest is then written blocking (as a write after a
  // poll() that reported some room would block).
  iovec v{const_cast<char*>(line.data()), line.size()};
  auto n = ::pwritev2(fd, &v, 1, -1, RWF_NOWAIT);
  if (n == static_cast<ssize_t>(line.size()))
    return true;
  if (n > 0)
    return write_all_to(fd, line.substr(static_cast<size_t>(n)));
  if (n == 0 || (errno != EOPNOTSUPP && errno != EINVAL))
    return false; // EAGAIN (full), EINTR, EPIPE and the like
  // A terminal or a regular file: ask poll() first.
  pollfd p{fd, POLLOUT, 0};
  if (::poll(&p, 1, 0) != 1 || (p.revents & POLLOUT) == 0
      || (p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
    return false;
  return write_all_to(fd, line);
}

bool write_all_to(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    auto n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

} // namespace mibyan
