#include "storage/lmdb/fts_block.hpp"

#include "storage/byte_codec.hpp"
#include "storage/lmdb/fts_index.hpp"

namespace mibyan::fts_block {

namespace {

uint64_t role_code(fts_role r) {
  return static_cast<uint64_t>(r) & 3u;  // tool (4) -> 0
}

fts_role role_of_code(uint64_t c) {
  return c == 0 ? fts_role::tool : static_cast<fts_role>(c);
}

// Skips `n` varints; false when they run past the end.
bool skip_varints(std::string_view& v, uint64_t n) {
  size_t i = 0;
  for (uint64_t k = 0; k < n; ++k) {
    for (;;) {
      if (i >= v.size())
        return false;
      if ((static_cast<unsigned char>(v[i++]) & 0x80) == 0)
        break;
    }
  }
  v.remove_prefix(i);
  return true;
}

} // namespace

void append(std::string& out, uint64_t prev_id, const entry& e,
            const std::vector<uint32_t>& pos) {
  codec::put_varint(out, e.id - prev_id);
  codec::put_varint(out, uint64_t{e.doc_length} * 4 + role_code(e.role));
  codec::put_varint(out, pos.size());
  uint32_t prev = 0;
  for (auto p : pos) {
    codec::put_varint(out, p - prev);
    prev = p;
  }
}

void append_encoded(std::string& out, uint64_t prev_id, const entry& e) {
  codec::put_varint(out, e.id - prev_id);
  codec::put_varint(out, uint64_t{e.doc_length} * 4 + role_code(e.role));
  codec::put_varint(out, e.tf);
  out.append(e.positions.data(), e.positions.size());
}

bool decode(std::string_view block, uint64_t first_id,
            std::vector<entry>& out) {
  out.clear();
  uint64_t id = first_id;
  while (!block.empty()) {
    uint64_t delta = 0, doc = 0, tf = 0;
    if (!codec::get_varint(block, delta) || !codec::get_varint(block, doc)
        || !codec::get_varint(block, tf) || tf == 0 || tf > UINT32_MAX
        || (delta == 0 && !out.empty()))
      return false;
    id += delta;
    entry e;
    e.id = id;
    e.doc_length = static_cast<uint32_t>(doc >> 2);
    e.role = role_of_code(doc & 3u);
    e.tf = static_cast<uint32_t>(tf);
    auto before = block;
    if (!skip_varints(block, tf))
      return false;
    e.positions = before.substr(0, before.size() - block.size());
    out.push_back(e);
  }
  return !out.empty();
}

bool positions(std::string_view v, uint32_t tf, std::vector<uint32_t>& out) {
  out.clear();
  uint64_t pos = 0;
  for (uint32_t i = 0; i < tf; ++i) {
    uint64_t d = 0;
    if (!codec::get_varint(v, d))
      return false;
    pos += d;
    out.push_back(static_cast<uint32_t>(pos));
  }
  return true;
}

std::string key(std::string_view term, uint64_t first_id) {
  std::string k;
  k.reserve(term.size() + 9);
  k.append(term.data(), term.size());
  k.push_back('\0');
  codec::put_be64(k, first_id);
  return k;
}

} // namespace mibyan::fts_block
