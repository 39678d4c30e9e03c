#include "base/redact_base64.hpp"

#include <algorithm>
#include <cstring>

#include "base/redact_blocks.hpp"
#include "base/redact_names.hpp"

namespace mibyan::redact_detail {

namespace {

constexpr char alphabet[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= in.size(); i += 3) {
    uint32_t v = (static_cast<unsigned char>(in[i]) << 16)
                 | (static_cast<unsigned char>(in[i + 1]) << 8)
                 | static_cast<unsigned char>(in[i + 2]);
    for (int k = 3; k >= 0; --k)
      out.push_back(alphabet[(v >> (6 * k)) & 63]);
  }
  return out; // callers pad the input to a multiple of 3
}

} // namespace

std::vector<std::string> base64_fragments(std::string_view secret) {
  std::vector<std::string> out;
  const size_t n = secret.size();
  if (n < 6)
    return out;
  for (size_t a = 0; a < 3; ++a) {
    // `a` bytes before the secret; pad to a whole group.
    std::string in(a, '\0');
    in.append(secret);
    while (in.size() % 3 != 0)
      in.push_back('\0');
    auto enc = encode(in);
    // Characters whose six bits all come from the secret.
    size_t k0 = (8 * a + 5) / 6;
    size_t k1 = 8 * (a + n) / 6;
    auto frag = enc.substr(k0, k1 - k0);
    out.push_back(frag);
    if (frag.find_first_of("+/") != std::string::npos) {
      std::replace(frag.begin(), frag.end(), '+', '-');
      std::replace(frag.begin(), frag.end(), '/', '_');
      out.push_back(std::move(frag));
    }
  }
  return out;
}

namespace {

// The hash of the 8 bytes at p (fragments are at least 10 characters).
uint16_t prefix_hash(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return static_cast<uint16_t>((w * 0x9e3779b97f4a7c15ULL) >> 48);
}

} // namespace

base64_fragment_index::base64_fragment_index() : bits_(65536 / 64, 0) {}

void base64_fragment_index::add(std::string_view secret, uint32_t id) {
  for (auto& f : base64_fragments(secret)) {
    if (f.size() < 8)
      continue;
    auto h = prefix_hash(f.data());
    bits_[h >> 6] |= uint64_t{1} << (h & 63);
    entries_.push_back({h, std::move(f), id});
  }
}

int64_t base64_fragment_index::find(std::string_view run) const {
  if (entries_.empty() || run.size() < 8)
    return -1;
  for (size_t p = 0; p + 8 <= run.size(); ++p) {
    auto h = prefix_hash(run.data() + p);
    if (!(bits_[h >> 6] & (uint64_t{1} << (h & 63))))
      continue;
    for (auto& e : entries_)
      if (e.hash == h && run.size() - p >= e.text.size()
          && std::memcmp(run.data() + p, e.text.data(), e.text.size()) == 0)
        return e.id;
  }
  return -1;
}

namespace {

// Character classes of the base64 alphabet, for examine_base64_run.
constexpr uint8_t c_b64 = 1, c_upper = 2, c_lower = 4, c_non_hex = 8;

struct class_table {
  uint8_t t[256] = {};
  constexpr class_table() {
    for (int c = 0; c < 256; ++c) {
      char ch = static_cast<char>(c);
      if (!is_b64(ch))
        continue;
      uint8_t v = c_b64;
      if (is_upper(ch))
        v |= c_upper;
      if (is_lower(ch))
        v |= c_lower;
      bool hex = is_digit(ch) || ch == '-' || (ch >= 'a' && ch <= 'f')
                 || (ch >= 'A' && ch <= 'F');
      if (!hex)
        v |= c_non_hex;
      t[c] = v;
    }
  }
};
constexpr class_table classes{};

} // namespace

base64_run examine_base64_run(std::string_view s, size_t i) {
  base64_run r;
  uint8_t seen = 0;
  size_t e = i;
  // A run that opens with 16 hex digits (or dashes) is a digest or a UUID:
  // not looked at further.
  for (; e < s.size() && e - i < 16; ++e) {
    uint8_t v = classes.t[static_cast<unsigned char>(s[e])];
    if (v == 0 || (v & c_non_hex))
      break;
    seen |= v;
  }
  if (e - i == 16) {
    r.end = r.padded_end = e;
    r.hex_only = true;
    return r;
  }
  for (; e < s.size(); ++e) {
    uint8_t v = classes.t[static_cast<unsigned char>(s[e])];
    if (v == 0)
      break;
    seen |= v;
  }
  r.end = e;
  while (e < s.size() && s[e] == '=')
    ++e;
  r.padded_end = e;
  r.hex_only = (seen & c_non_hex) == 0;
  r.mixed_case = (seen & c_upper) && (seen & c_lower);
  r.decodable = r.end - i >= 24 && (seen & c_upper) && (seen & c_lower)
                && !r.hex_only;
  return r;
}

bool decoded_private_key(std::string_view b) {
  if (b.rfind("openssh-key-v1", 0) == 0)
    return true;
  if (b.find("PRIVATE KEY-----") != std::string_view::npos)
    return true;
  // DER: SEQUENCE (long or short length), INTEGER version 0 or 1, then an
  // INTEGER (PKCS#1 RSA), an OCTET STRING (SEC1 EC) or a SEQUENCE (PKCS#8
  // algorithm). Certificates and public keys start with a SEQUENCE
  // inside the SEQUENCE instead of the version.
  auto u = [&](size_t k) { return static_cast<unsigned char>(b[k]); };
  if (b.size() < 8 || u(0) != 0x30)
    return false;
  size_t k = 1;
  if (u(1) == 0x81)
    k = 3;
  else if (u(1) == 0x82)
    k = 4;
  else if (u(1) < 0x80)
    k = 2;
  else
    return false;
  if (b.size() < k + 4)
    return false;
  return u(k) == 0x02 && u(k + 1) == 0x01 && (u(k + 2) == 0 || u(k + 2) == 1)
         && (u(k + 3) == 0x02 || u(k + 3) == 0x04 || u(k + 3) == 0x30);
}

} // namespace mibyan::redact_detail
