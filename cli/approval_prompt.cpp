#include "cli/approval_prompt.hpp"

#include "cli/answer_line.hpp"

#include <cctype>
#include <chrono>
#include <iostream>
#include <string>

#include <unistd.h>

namespace mibyan::cli {

namespace {

// The command as shown: control characters escaped, at most 2,000 chars.
std::string shown(const std::string& command) {
  std::string out;
  for (char c : command) {
    if (out.size() >= 2000) {
      out += "...";
      break;
    }
    auto u = static_cast<unsigned char>(c);
    if (c == '\n')
      out += "\n    ";
    else if (u < 0x20 || u == 0x7f)
      out += "^" + std::string(1, static_cast<char>(u ^ 0x40));
    else
      out.push_back(c);
  }
  return out;
}

} // namespace

approval_choice parse_approval_answer(const std::string& line,
                                      const approval_prompt& prompt) {
  std::string w;
  for (char c : line)
    if (!std::isspace(static_cast<unsigned char>(c)))
      w.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (w == "o" || w == "once" || w == "y" || w == "yes")
    return approval_choice::once;
  if ((w == "s" || w == "session") && prompt.allow_session)
    return approval_choice::session;
  if ((w == "a" || w == "always") && prompt.allow_always)
    return approval_choice::always;
  return approval_choice::deny;
}

approval_choice ask_on_terminal(const approval_prompt& prompt,
                                std::mutex& out_mtx) {
  // One prompt at a time (script threads may ask concurrently).
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> turn{one_at_a_time};
  if (prompt.cancelled != nullptr && prompt.cancelled->load())
    return approval_choice::deny;
  {
    std::lock_guard<std::mutex> guard{out_mtx};
    std::cout << "\n[approval needed] ";
    for (size_t i = 0; i < prompt.descriptions.size(); ++i)
      std::cout << (i ? ", " : "") << prompt.descriptions[i];
    std::cout << "\n    " << shown(prompt.command) << "\n";
    if (prompt.guardian_verdict == "DENY")
      std::cout << "  The security reviewer judged this command dangerous; "
                   "you may still allow it once.\n";
    else if (!prompt.guardian_verdict.empty())
      std::cout << "  Security reviewer: " << prompt.guardian_verdict << "\n";
    std::cout << "  Allow? [o]nce";
    if (prompt.allow_session)
      std::cout << ", [s]ession";
    if (prompt.allow_always)
      std::cout << ", [a]lways";
    std::cout << ", [d]eny (" << prompt.timeout.count()
              << " s; no answer = deny): " << std::flush;
  }
  auto deadline = std::chrono::steady_clock::now() + prompt.timeout;
  std::string line;
  approval_choice choice = approval_choice::timeout;
  switch (read_answer_line(deadline, prompt.cancelled, 64, line)) {
  case answer_end::line:
    choice = parse_approval_answer(line, prompt);
    break;
  case answer_end::cancelled:
  case answer_end::eof: // nobody can answer
    choice = approval_choice::deny;
    break;
  case answer_end::timeout:
    break;
  }
  std::lock_guard<std::mutex> guard{out_mtx};
  const char* said = choice == approval_choice::once      ? "allowed once"
                     : choice == approval_choice::session ? "allowed for this session"
                     : choice == approval_choice::always  ? "allowed always"
                     : choice == approval_choice::timeout ? "no answer: denied"
                                                          : "denied";
  std::cout << (choice == approval_choice::timeout ? "\n" : "") << "  -> "
            << said << "\n" << std::flush;
  return choice;
}

} // namespace mibyan::cli
