#include "cli/answer_line.hpp"

#include <algorithm>

#include <poll.h>
#include <unistd.h>

namespace mibyan::cli {

answer_end read_answer_line(std::chrono::steady_clock::time_point deadline,
                            const std::atomic<bool>* cancelled,
                            size_t max_chars, std::string& line) {
  for (;;) {
    if (cancelled != nullptr && cancelled->load())
      return answer_end::cancelled;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      return answer_end::timeout;
    pollfd pfd{0, POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (rc <= 0)
      continue;
    char c = 0;
    if (::read(0, &c, 1) <= 0)
      return answer_end::eof;
    if (c == '\n')
      return answer_end::line;
    if (line.size() < max_chars)
      line.push_back(c);
  }
}

} // namespace mibyan::cli
