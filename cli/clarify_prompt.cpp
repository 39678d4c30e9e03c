#include "cli/clarify_prompt.hpp"

#include <chrono>
#include <iostream>

#include <poll.h>
#include <unistd.h>

namespace mibyan::cli {

std::string clarify_answer(const std::string& line,
                           const clarify_prompt& prompt) {
  auto b = line.find_first_not_of(" \t\r");
  if (b == std::string::npos)
    return {};
  auto text = line.substr(b, line.find_last_not_of(" \t\r") - b + 1);
  if (text.size() <= 2 && text.find_first_not_of("0123456789") == std::string::npos) {
    auto n = static_cast<size_t>(std::stoi(text));
    if (n >= 1 && n <= prompt.choices.size())
      return prompt.choices[n - 1];
  }
  return text;
}

std::string ask_clarify_on_terminal(const clarify_prompt& prompt,
                                    std::mutex& out_mtx) {
  {
    std::lock_guard<std::mutex> guard{out_mtx};
    std::cout << "\n[question] " << prompt.question << "\n";
    for (size_t i = 0; i < prompt.choices.size(); ++i)
      std::cout << "  " << (i + 1) << ") " << prompt.choices[i] << "\n";
    std::cout << (prompt.choices.empty()
                    ? "  Your answer: "
                    : "  Type a number or your own answer: ")
              << std::flush;
  }
  auto deadline = std::chrono::steady_clock::now() + prompt.timeout;
  std::string line;
  bool answered = false;
  while (!answered) {
    if (prompt.cancelled != nullptr && prompt.cancelled->load())
      break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0)
      break;
    pollfd pfd{0, POLLIN, 0};
    int rc = ::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 100)));
    if (rc <= 0)
      continue;
    char c = 0;
    auto n = ::read(0, &c, 1);
    if (n <= 0)
      break; // end of input: nobody can answer
    if (c == '\n')
      answered = true;
    else if (line.size() < 4000)
      line.push_back(c);
  }
  std::lock_guard<std::mutex> guard{out_mtx};
  if (!answered) {
    std::cout << "\n  -> no answer\n" << std::flush;
    return {};
  }
  return clarify_answer(line, prompt);
}

} // namespace mibyan::cli
