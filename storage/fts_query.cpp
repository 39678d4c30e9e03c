#include "storage/fts_query.hpp"

#include <algorithm>

#include "storage/fts_tokenizer.hpp"

namespace mibyan {

namespace {

void add_unit(fts_query& q, std::vector<std::string> terms) {
  if (terms.empty())
    return;
  for (auto& u : q.units)
    if (u.terms == terms)
      return;
  q.units.push_back(fts_unit{std::move(terms)});
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
         || c == '\v';
}

} // namespace

std::vector<std::string> fts_query::distinct_terms() const {
  std::vector<std::string> out;
  for (auto& u : units)
    for (auto& t : u.terms)
      if (std::find(out.begin(), out.end(), t) == out.end())
        out.push_back(t);
  return out;
}

fts_query parse_fts_query(std::string_view text) {
  fts_query q;
  size_t i = 0;
  const size_t n = text.size();
  while (i < n) {
    if (is_space(text[i])) {
      ++i;
      continue;
    }
    if (text[i] == '"') {
      auto close = text.find('"', i + 1);
      auto end = close == std::string_view::npos ? n : close;
      add_unit(q, fts_tokenize(text.substr(i + 1, end - i - 1)));
      i = close == std::string_view::npos ? n : close + 1;
      continue;
    }
    size_t begin = i;
    while (i < n && !is_space(text[i]) && text[i] != '"')
      ++i;
    auto word = text.substr(begin, i - begin);
    if (word == "AND")
      continue;
    add_unit(q, fts_tokenize(word));
  }
  return q;
}

} // namespace mibyan
