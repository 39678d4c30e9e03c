// File: storage/fts_tokenizer.hpp
//
// The word tokenizer of the full-text index. Documents and queries go
// through the same function, so the rules below define what can be found:
//   * word bytes are ASCII letters and digits and every byte >= 0x80 (so
//     UTF-8 text in any script stays inside words, and invalid UTF-8 is
//     tolerated); every other ASCII byte (space, punctuation, control)
//     separates words;
//   * ASCII letters are lower-cased; other bytes are kept as they are;
//   * words longer than `fts_max_token_bytes` are dropped (they still take
//     a position, so phrases do not match across them).
// Changing these rules changes the index format (schema version).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mibyan {

constexpr size_t fts_max_token_bytes = 64;

/// One word of a text.
struct fts_token {
  /// Lower-cased text; points into a buffer reused between callbacks.
  std::string_view term;
  /// Word index in the text (dropped long words count too).
  uint32_t position;
  /// Byte range of the word in the original text.
  size_t begin;
  size_t end;
};

/// Calls `f(const fts_token&)` for every indexable word of `text`.
template <class F>
void fts_for_each_token(std::string_view text, F&& f) {
  std::string buf;
  uint32_t position = 0;
  size_t i = 0;
  const size_t n = text.size();
  auto word_byte = [](unsigned char c) {
    return c >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')
           || (c >= 'A' && c <= 'Z');
  };
  while (i < n) {
    while (i < n && !word_byte(static_cast<unsigned char>(text[i])))
      ++i;
    if (i == n)
      break;
    size_t begin = i;
    while (i < n && word_byte(static_cast<unsigned char>(text[i])))
      ++i;
    if (i - begin <= fts_max_token_bytes) {
      buf.assign(text.data() + begin, i - begin);
      for (auto& c : buf)
        if (c >= 'A' && c <= 'Z')
          c = static_cast<char>(c - 'A' + 'a');
      f(fts_token{buf, position, begin, i});
    }
    ++position;
  }
}

/// Returns the lower-cased words of `text` in order.
std::vector<std::string> fts_tokenize(std::string_view text);

} // namespace mibyan
