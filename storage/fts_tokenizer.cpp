#include "storage/fts_tokenizer.hpp"

namespace mibyan {

std::vector<std::string> fts_tokenize(std::string_view text) {
  std::vector<std::string> out;
  fts_for_each_token(text, [&](const fts_token& t) {
    out.emplace_back(t.term);
  });
  return out;
}

} // namespace mibyan
