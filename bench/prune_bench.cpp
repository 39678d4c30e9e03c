// Measures what pruning old tool outputs (agent/tool_output_pruning.hpp)
// saves on a compression's summary call (docs/agent_loop.md, "Old tool
// outputs before compression"): a deterministic 200-message coding session
// (99 tool rounds: read_file, terminal, search_files, web_extract,
// write_file, patch with realistic output sizes) is cut as the
// conversation cuts it (protect_first_n 3, protect_last_n 20, a 128K
// window), and the summary request is built with the conversation's own
// functions, without pruning (the baseline: every tool output cut to
// 3,000 characters) and with it (keep_tool_results 6, prune_min_chars
// 400). Reports the request's characters, estimated tokens (characters /
// 4) and input cost at $3 per million tokens.
//
// Usage: mibyan_prune_bench
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "agent/context_compression.hpp"
#include "agent/tool_output_pruning.hpp"
#include "bench/bench_row.hpp"

using namespace mibyan;
using namespace mibyan::bench;

namespace {

std::string text_of(std::mt19937& rng, size_t size, const char* flavour) {
  static const char* words[] = {"const", "auto", "return", "status", "config",
                                "session", "value", "error", "the", "file",
                                "result", "int", "std::string", "if", "for"};
  std::string s;
  size_t line = 1;
  while (s.size() < size) {
    s += std::to_string(line++) + "|" + flavour + " ";
    int n = 4 + static_cast<int>(rng() % 10);
    for (int i = 0; i < n; ++i) {
      s += words[rng() % (sizeof words / sizeof *words)];
      s += ' ';
    }
    s += '\n';
  }
  s.resize(size);
  return s;
}

std::vector<chat_message> session_of_200(std::mt19937& rng) {
  struct kind {
    const char* tool;
    size_t min, max;
  };
  const kind kinds[] = {{"read_file", 3000, 25000},  {"terminal", 200, 8000},
                        {"search_files", 1000, 6000},
                        {"web_extract", 5000, 15000}, {"write_file", 80, 160},
                        {"patch", 200, 400},          {"read_file", 2000, 12000}};
  std::vector<chat_message> out;
  chat_message user;
  user.role = "user";
  user.content = "Fix the failing session-store tests and explain the cause.";
  out.push_back(user);
  for (int round = 0; round < 99; ++round) {
    auto& k = kinds[rng() % (sizeof kinds / sizeof *kinds)];
    chat_message call;
    call.role = "assistant";
    if (round % 5 == 0)
      call.content = "Let me look at the next part.";
    auto id = "call_" + std::to_string(round);
    call.tool_calls.push_back(
      tool_call{id, k.tool, "{\"path\":\"storage/file_" + std::to_string(round)
                              + ".cpp\"}"});
    out.push_back(call);
    chat_message res;
    res.role = "tool";
    res.tool_call_id = id;
    res.tool_name = k.tool;
    res.content = text_of(rng, k.min + rng() % (k.max - k.min), k.tool);
    out.push_back(res);
  }
  chat_message answer;
  answer.role = "assistant";
  answer.content = "The cause was a stale index; fixed in fts_index.cpp.";
  out.push_back(answer);
  return out;
}

} // namespace

int main() {
  std::mt19937 rng{2026};
  auto msgs = session_of_200(rng);
  auto window = context_window("gpt-4o", 0);
  auto threshold = compression_threshold(window, 8192, 0.50);
  auto tail_tokens = static_cast<int64_t>(
    static_cast<double>(std::min(threshold, estimate_tokens(msgs))) * 0.20);
  auto cut = choose_cut(msgs, 3, 20, tail_tokens);
  std::vector<chat_message> middle(
    msgs.begin() + static_cast<std::ptrdiff_t>(cut.head_end),
    msgs.begin() + static_cast<std::ptrdiff_t>(cut.tail_begin));
  size_t results = 0;
  for (auto& m : middle)
    results += m.role == "tool" ? 1 : 0;
  auto before = summarizer_request(middle);
  auto pruned_middle = middle;
  auto stats = prune_old_tool_outputs(pruned_middle, 6, 400);
  auto after = summarizer_request(pruned_middle);
  auto tokens = [](const std::string& s) {
    return static_cast<double>(s.size() + std::string{summarizer_system_prompt}.size()) / 4.0;
  };
  double t0 = tokens(before), t1 = tokens(after);
  std::printf("session: %zu messages, summarised %zu..%zu (%zu messages, "
              "%zu tool results, %zu pruned)\n",
              msgs.size(), cut.head_end, cut.tail_begin, middle.size(),
              results, stats.pruned);
  std::printf("summary request: %zu -> %zu characters, ~%.0f -> ~%.0f "
              "tokens, $%.4f -> $%.4f at $3/M input tokens\n",
              before.size(), after.size(), t0, t1, t0 * 3e-6, t1 * 3e-6);
  bench_row("prune: summary request tokens (200-message session)", t1, t0,
            "tokens", "<= 0.5x unpruned", t1 <= 0.5 * t0);
  bench_row("prune: summary call input cost (200 msgs, $3/M)", t1 * 3e-6,
            t0 * 3e-6, "USD", "informational", std::nullopt);
  return 0;
}
