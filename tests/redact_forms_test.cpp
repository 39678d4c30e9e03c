// The secret forms of issue 31 that redaction missed (item 2: a PEM body
// printed as a bytes repr, .netrc passwords, base64; item 12: secrets split
// by invisible characters, full-width letters, UTF-16 output) and benign
// look-alikes that must stay unchanged. The rows are in
// tests/data/redaction/forms.txt; the test prints, per item, how many
// listed and added forms were caught.
#define BOOST_TEST_MODULE redact_forms
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/redact.hpp"
#include "tests/support/paths.hpp"

using namespace mibyan;

namespace {

struct form {
  int line = 0;
  int item = 0;
  std::string kind; // listed, added, clean
  std::string name;
  std::string needle;
  std::string input;
  bool utf16 = false;
};

void put_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    char e = s[++i];
    auto hex = [&](size_t digits) {
      auto v = static_cast<uint32_t>(std::stoul(s.substr(i + 1, digits),
                                                nullptr, 16));
      i += digits;
      return v;
    };
    switch (e) {
      case 'n': out.push_back('\n'); break;
      case 'r': out.push_back('\r'); break;
      case 't': out.push_back('\t'); break;
      case '0': out.push_back('\0'); break;
      case '\\': out.push_back('\\'); break;
      case 'x': out.push_back(static_cast<char>(hex(2))); break;
      case 'u': put_utf8(out, hex(4)); break;
      case 'U': put_utf8(out, hex(8)); break;
      default: out.push_back('\\'); out.push_back(e);
    }
  }
  return out;
}

// UTF-8 to UTF-16 (little or big endian).
std::string to_utf16(const std::string& s, bool big) {
  std::string out;
  auto unit = [&](uint32_t u) {
    char lo = static_cast<char>(u & 0xff), hi = static_cast<char>(u >> 8);
    out.push_back(big ? hi : lo);
    out.push_back(big ? lo : hi);
  };
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    size_t len = c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    cp = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < len; ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    i += len;
    if (cp >= 0x10000) {
      cp -= 0x10000;
      unit(0xd800 | (cp >> 10));
      unit(0xdc00 | (cp & 0x3ff));
    } else {
      unit(cp);
    }
  }
  return out;
}

// What a reader would see: invisible characters removed, full-width ASCII
// folded (an independent, small version of the redactor's normalisation).
std::string visible(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      if (c == 0x1b && i + 1 < s.size() && s[i + 1] == '[') {
        size_t j = i + 2;
        while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7e))
          ++j;
        i = j + 1;
        continue;
      }
      if (c >= 0x20 || c == '\n' || c == '\t' || c == '\r')
        if (c != 0x7f)
          out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    size_t len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t k = 1; k < len && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    bool invisible = cp == 0xad || (cp >= 0x200b && cp <= 0x200f)
                     || (cp >= 0x202a && cp <= 0x202e)
                     || (cp >= 0x2060 && cp <= 0x2064) || cp == 0xfeff
                     || (cp >= 0xfe00 && cp <= 0xfe0f)
                     || (cp >= 0xe0000 && cp <= 0xe007f);
    if (cp >= 0xff01 && cp <= 0xff5e)
      out.push_back(static_cast<char>(cp - 0xfee0));
    else if (cp >= 0x1d400 && cp <= 0x1d6a3) {
      auto k = (cp - 0x1d400) % 52;
      out.push_back(static_cast<char>(k < 26 ? 'A' + k : 'a' + (k - 26)));
    } else if (!invisible)
      out.append(s, i, len);
    i += len;
  }
  return out;
}

std::string strip_nul(const std::string& s) {
  std::string out;
  for (char c : s)
    if (c != '\0')
      out.push_back(c);
  return out;
}

std::vector<form> load_forms() {
  std::ifstream in{test::test_source_dir() + "/data/redaction/forms.txt"};
  BOOST_REQUIRE(in.good());
  std::vector<form> forms;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#')
      continue;
    auto s1 = line.find(" ||| ");
    auto s2 = line.find(" ||| ", s1 + 5);
    BOOST_REQUIRE_MESSAGE(s1 != std::string::npos && s2 != std::string::npos,
                          "forms line " << number << " lacks ' ||| '");
    form f;
    f.line = number;
    std::istringstream head{line.substr(0, s1)};
    head >> f.item >> f.kind >> f.name;
    f.needle = unescape(line.substr(s1 + 5, s2 - s1 - 5));
    auto input = line.substr(s2 + 5);
    for (auto [prefix, big] : {std::pair{"utf16le:", false},
                               std::pair{"utf16be:", true}})
      if (input.rfind(prefix, 0) == 0) {
        f.utf16 = true;
        f.input = to_utf16(unescape(input.substr(8)), big);
      }
    if (!f.utf16)
      f.input = unescape(input);
    forms.push_back(std::move(f));
  }
  return forms;
}

redactor forms_redactor() {
  return redactor{{{"ACME_SERVICE_TOKEN", "pl4nted-secret-value-2718"},
                   {"ACME_DB_PASSWORD", "Tr0ub4dor&3-horse"}}};
}

bool caught(const form& f, const std::string& out) {
  auto seen = visible(f.utf16 ? strip_nul(out) : out);
  return seen.find(f.needle) == std::string::npos
         && seen.find("[REDACTED") != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_CASE(forms_are_caught_and_look_alikes_kept) {
  auto r = forms_redactor();
  struct tally {
    int listed = 0, listed_caught = 0, added = 0, added_caught = 0,
        clean = 0, clean_kept = 0;
  };
  std::map<int, tally> by_item;
  for (auto& f : load_forms()) {
    auto out = r.redacted(f.input);
    auto& t = by_item[f.item];
    BOOST_TEST_CONTEXT("forms line " << f.line << " (item " << f.item << ", "
                                     << f.name << ")\n  -> " << out) {
      if (f.kind == "clean") {
        ++t.clean;
        t.clean_kept += out == f.input;
        BOOST_TEST((out == f.input));
      } else {
        bool ok = caught(f, out);
        if (f.kind == "listed") {
          ++t.listed;
          t.listed_caught += ok;
        } else {
          ++t.added;
          t.added_caught += ok;
        }
        BOOST_TEST(ok);
        // Redacting again changes nothing.
        BOOST_TEST((r.redacted(out) == out));
      }
    }
  }
  for (auto& [item, t] : by_item)
    std::cout << "item " << item << ": listed forms caught "
              << t.listed_caught << "/" << t.listed << ", added forms caught "
              << t.added_caught << "/" << t.added << ", look-alikes unchanged "
              << t.clean_kept << "/" << t.clean << "\n";
  BOOST_TEST(by_item[2].listed >= 5);
  BOOST_TEST(by_item[12].listed >= 6);
}

// UTF-16 output stays UTF-16: the replacement is written in the same
// encoding, so the text around it still decodes.
BOOST_AUTO_TEST_CASE(utf16_replacement_keeps_the_encoding) {
  auto r = forms_redactor();
  auto in = to_utf16("a pl4nted-secret-value-2718 b", false);
  auto out = r.redacted(in);
  BOOST_TEST(out.size() % 2 == 0u);
  BOOST_TEST(strip_nul(out) == "a [REDACTED:ACME_SERVICE_TOKEN] b");
  for (size_t k = 1; k < out.size(); k += 2)
    BOOST_TEST(out[k] == '\0');
}

// A form split by an invisible character is replaced together with it;
// the text around keeps its bytes.
BOOST_AUTO_TEST_CASE(normalised_matches_map_back_to_the_original) {
  auto r = forms_redactor();
  BOOST_TEST(r.redacted("caf\xc3\xa9 Tr0ub\xe2\x80\x8b" "4dor&3-horse \xe2\x80\x8b!")
             == "caf\xc3\xa9 [REDACTED:ACME_DB_PASSWORD] \xe2\x80\x8b!");
  BOOST_TEST(r.redacted("\xef\xbd\x90l4nted-secret-value-2718.")
             == "[REDACTED:ACME_SERVICE_TOKEN].");
}
