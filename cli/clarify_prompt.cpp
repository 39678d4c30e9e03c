#include "cli/clarify_prompt.hpp"

#include "cli/answer_line.hpp"

#include <chrono>
#include <iostream>


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
  bool answered = read_answer_line(deadline, prompt.cancelled, 4000, line)
                  == answer_end::line;
  std::lock_guard<std::mutex> guard{out_mtx};
  if (!answered) {
    std::cout << "\n  -> no answer\n" << std::flush;
    return {};
  }
  return clarify_answer(line, prompt);
}

} // namespace mibyan::cli
