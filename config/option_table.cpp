#include "config/option_table.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "config/option_parsers.hpp"

namespace mibyan {

std::string option_row::name() const {
  return *section == '\0' ? std::string{key}
                          : std::string{section} + "." + key;
}

bool option_row::nested() const {
  return std::strchr(key, '.') != nullptr;
}

namespace {

using warnings_t = std::vector<std::string>;

// The member a row sets: section `sec` of options, member `mem` of it.
template <class Section, class T>
struct slot {
  Section options::*sec;
  T Section::*mem;
  T& of(options& o) const { return (o.*sec).*mem; }
  const T& of(const options& o) const { return (o.*sec).*mem; }
};

template <class Section, class T>
slot<Section, T> make_slot(Section options::*sec, T Section::*mem) {
  return {sec, mem};
}

option_row base_row(const char* section, const char* key, option_kind kind,
                    const char* doc) {
  option_row r;
  r.section = section;
  r.key = key;
  r.kind = kind;
  r.doc = doc;
  return r;
}

// The range check of an integer row: "" or the problem.
std::string check_range(int64_t v, int64_t min, int64_t max,
                        const std::string& text) {
  if (v < min || v > max)
    return "must be between " + std::to_string(min) + " and "
           + std::to_string(max) + ", got " + text;
  return {};
}

// A row's check (option_row::check) from a problem text ("" = valid).
status checked(std::string problem) {
  if (problem.empty())
    return {};
  return status::failure(status_code::config_invalid, std::move(problem));
}

template <class S>
option_row int_row(const char* section, const char* key, S s, int64_t min,
                   int64_t max, const char* doc) {
  auto r = base_row(section, key, option_kind::integer, doc);
  r.min = min;
  r.max = max;
  r.set = [=](const YAML::Node& node, options& o, warnings_t&) -> std::string {
    if (!node.IsScalar())
      return "expected an integer, got " + scalar_text(node);
    const auto& text = node.Scalar();
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(text.c_str(), &end, 10);
    if (text.empty() || errno != 0 || *end != '\0')
      return "expected an integer, got '" + text + "'";
    if (auto e = check_range(v, min, max, text); !e.empty())
      return e;
    s.of(o) = v;
    return {};
  };
  r.show = [=](const options& o) { return std::to_string(s.of(o)); };
  r.check = [=](const options& o) {
    return checked(check_range(s.of(o), min, max, std::to_string(s.of(o))));
  };
  return r;
}

template <class S>
option_row bool_row(const char* section, const char* key, S s,
                    const char* doc) {
  auto r = base_row(section, key, option_kind::boolean, doc);
  r.set = [=](const YAML::Node& node, options& o, warnings_t&) -> std::string {
    if (!node.IsScalar())
      return "expected true or false, got " + scalar_text(node);
    const auto& t = node.Scalar();
    if (t == "true" || t == "True" || t == "yes" || t == "on")
      s.of(o) = true;
    else if (t == "false" || t == "False" || t == "no" || t == "off")
      s.of(o) = false;
    else
      return "expected true or false, got '" + t + "'";
    return {};
  };
  r.show = [=](const options& o) {
    return std::string{s.of(o) ? "true" : "false"};
  };
  return r;
}

// A string row; `check` ("" or the problem) and a '|'-separated list of
// allowed values are optional.
template <class S>
option_row string_row(const char* section, const char* key, option_kind kind,
                      S s, const char* values,
                      std::string (*check)(const std::string&),
                      const char* doc) {
  auto r = base_row(section, key, kind, doc);
  r.values = values;
  std::vector<std::string> allowed;
  if (kind == option_kind::choice) {
    std::string v = values;
    for (size_t start = 0;;) {
      auto bar = v.find('|', start);
      allowed.push_back(v.substr(start, bar - start));
      if (bar == std::string::npos)
        break;
      start = bar + 1;
    }
  }
  // "" or why `v` is no value of this row.
  auto problem = [=](const std::string& v) -> std::string {
    if (!allowed.empty()) {
      bool ok = false;
      std::string list;
      for (auto& a : allowed) {
        ok = ok || a == v;
        list += (list.empty() ? "" : ", ") + a;
      }
      if (!ok)
        return "must be one of " + list + ", got '" + v + "'";
    }
    return check != nullptr ? check(v) : std::string{};
  };
  r.set = [=](const YAML::Node& node, options& o, warnings_t&) -> std::string {
    if (node.IsNull()) {
      s.of(o) = "";
      return {};
    }
    if (!node.IsScalar())
      return "expected a string, got " + scalar_text(node);
    auto v = node.Scalar();
    if (auto e = problem(v); !e.empty())
      return e;
    s.of(o) = std::move(v);
    return {};
  };
  // "" is what a null reads as, accepted by `set` for every string row.
  if (!allowed.empty() || check != nullptr)
    r.check = [=](const options& o) {
      return s.of(o).empty() ? status{} : checked(problem(s.of(o)));
    };
  if (kind == option_kind::secret)
    r.show = [=](const options& o) {
      return s.of(o).empty() ? std::string{"\"\""} : std::string{"\"***\""};
    };
  else
    r.show = [=](const options& o) { return quoted_for_show(s.of(o)); };
  return r;
}

template <class S>
option_row list_row(const char* section, const char* key, S s,
                    const char* doc) {
  auto r = base_row(section, key, option_kind::list, doc);
  r.set = [=](const YAML::Node& node, options& o, warnings_t&) -> std::string {
    if (node.IsNull()) {
      s.of(o).clear();
      return {};
    }
    if (!node.IsSequence())
      return "expected a list of strings, got " + scalar_text(node);
    std::vector<std::string> xs;
    for (const auto& item : node) {
      if (!item.IsScalar())
        return "expected a list of strings, found " + scalar_text(item)
               + " at line " + std::to_string(item.Mark().line + 1);
      xs.push_back(item.Scalar());
    }
    s.of(o) = std::move(xs);
    return {};
  };
  r.show = [=](const options& o) {
    std::string out = "[";
    for (auto& x : s.of(o))
      out += (out.size() > 1 ? ", " : "") + quoted_for_show(x);
    return out + "]";
  };
  return r;
}

template <class S>
option_row fraction_row(const char* section, const char* key, S s,
                        const char* doc) {
  auto r = base_row(section, key, option_kind::fraction, doc);
  r.set = [=](const YAML::Node& node, options& o, warnings_t&) -> std::string {
    if (!node.IsScalar())
      return "expected a number, got " + scalar_text(node);
    const auto& text = node.Scalar();
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(v > 0.0 && v <= 1.0))
      return "expected a number above 0 and at most 1, got '" + text + "'";
    s.of(o) = v;
    return {};
  };
  r.check = [=](const options& o) {
    auto v = s.of(o);
    std::ostringstream text;
    text << v;
    return checked(v > 0.0 && v <= 1.0
                     ? std::string{}
                     : "expected a number above 0 and at most 1, got '"
                         + text.str() + "'");
  };
  r.show = [=](const options& o) {
    std::ostringstream out;
    out << s.of(o);
    return out.str();
  };
  return r;
}

// A key whose value is a mapping of the rows "<key>.<name>" of `section`;
// names left out keep their value, and nothing changes on an error.
option_row mapping_row(const char* section, const char* key,
                       const char* doc) {
  auto r = base_row(section, key, option_kind::mapping, doc);
  auto prefix = std::string{key} + ".";
  auto subs = [section, prefix] {
    std::vector<const option_row*> out;
    for (auto& row : option_table())
      if (std::string{row.section} == section
          && std::string{row.key}.compare(0, prefix.size(), prefix) == 0)
        out.push_back(&row);
    return out;
  };
  r.set = [=](const YAML::Node& node, options& o,
              warnings_t& warnings) -> std::string {
    if (node.IsNull())
      return {};
    auto rows = subs();
    std::string known;
    for (auto* row : rows)
      known += (known.empty() ? "" : ", ")
               + std::string{row->key}.substr(prefix.size());
    if (!node.IsMap())
      return "expected a mapping of " + known + "; got " + scalar_text(node);
    auto copy = o;
    for (const auto& kv : node) {
      auto n = kv.first.as<std::string>();
      const option_row* match = nullptr;
      for (auto* row : rows)
        if (prefix + n == row->key)
          match = row;
      if (match == nullptr)
        return "unknown key '" + n + "' (known: " + known + ")";
      if (auto e = match->set(kv.second, copy, warnings); !e.empty())
        return n + ": " + e;
    }
    o = std::move(copy);
    return {};
  };
  r.show = [=](const options& o) {
    std::string out = "{";
    for (auto* row : subs())
      out += (out.size() > 1 ? ", " : "")
             + std::string{row->key}.substr(prefix.size()) + ": "
             + row->show(o);
    return out + "}";
  };
  return r;
}

// A key with its own parser and rendering (config/option_parsers.hpp).
template <class S, class T>
option_row custom_row(const char* section, const char* key, S s,
                      std::string (*parse)(const YAML::Node&, T&),
                      std::string (*show)(const T&), const char* values,
                      const char* doc) {
  auto r = base_row(section, key, option_kind::custom, doc);
  r.values = values;
  r.set = [=](const YAML::Node& node, options& o, warnings_t&) {
    return parse(node, s.of(o));
  };
  r.show = [=](const options& o) { return show(s.of(o)); };
  return r;
}

// A top-level key, a member of options itself.
template <class T>
option_row top_row(const char* key, T options::*mem,
                   std::string (*parse)(const YAML::Node&, T&, warnings_t&),
                   std::string (*show)(const T&), const char* values,
                   const char* doc) {
  auto r = base_row("", key, option_kind::custom, doc);
  r.values = values;
  r.set = [=](const YAML::Node& node, options& o, warnings_t& warnings) {
    return parse(node, o.*mem, warnings);
  };
  r.show = [=](const options& o) { return show(o.*mem); };
  return r;
}

std::vector<option_row> build_table() {
  std::vector<option_row> t;
#define MIBYAN_SECTION(type, member, name, doc)                               \
  {                                                                           \
    using S = type;                                                           \
    auto sec = &options::member;                                              \
    const char* section = name;
#define MIBYAN_SECTION_END() }
#define MIBYAN_INT(member, key, dflt, lo, hi, doc)                            \
  t.push_back(int_row(section, key, make_slot(sec, &S::member), lo, hi, doc));
#define MIBYAN_BOOL(member, key, dflt, doc)                                   \
  t.push_back(bool_row(section, key, make_slot(sec, &S::member), doc));
#define MIBYAN_STRING(member, key, dflt, doc)                                 \
  t.push_back(string_row(section, key, option_kind::string,                   \
                         make_slot(sec, &S::member), "", nullptr, doc));
#define MIBYAN_SECRET(member, key, dflt, doc)                                 \
  t.push_back(string_row(section, key, option_kind::secret,                   \
                         make_slot(sec, &S::member), "", nullptr, doc));
#define MIBYAN_CHOICE(member, key, dflt, values, doc)                         \
  t.push_back(string_row(section, key, option_kind::choice,                   \
                         make_slot(sec, &S::member), values, nullptr, doc));
#define MIBYAN_CHECKED(member, key, dflt, check, doc)                         \
  t.push_back(string_row(section, key, option_kind::checked,                  \
                         make_slot(sec, &S::member), "", check, doc));
#define MIBYAN_LIST(member, key, dflt, doc)                                   \
  t.push_back(list_row(section, key, make_slot(sec, &S::member), doc));
#define MIBYAN_FRACTION(member, key, dflt, doc)                               \
  t.push_back(fraction_row(section, key, make_slot(sec, &S::member), doc));
#define MIBYAN_MAPPING(key, doc) t.push_back(mapping_row(section, key, doc));
#define MIBYAN_CUSTOM(type, member, key, set, show, values, dflt, doc)        \
  t.push_back(custom_row<slot<S, type>, type>(                                \
    section, key, make_slot(sec, &S::member), set, show, values, doc));
#define MIBYAN_TOP(type, member, key, set, show, values, doc)                 \
  t.push_back(top_row<type>(key, &options::member, set, show, values, doc));
#include "config/option_table_defaults.hpp"
#include "config/option_table.def"
#include "config/option_table_undef.hpp"
  return t;
}

std::vector<option_section> build_sections() {
  std::vector<option_section> out;
#define MIBYAN_SECTION(type, member, name, doc) out.push_back({name, doc});
#include "config/option_table_defaults.hpp"
#include "config/option_table.def"
#include "config/option_table_undef.hpp"
  return out;
}

} // namespace

const std::vector<option_section>& option_sections() {
  static const std::vector<option_section> sections = build_sections();
  return sections;
}

const std::vector<option_row>& option_table() {
  static const std::vector<option_row> table = build_table();
  return table;
}

const option_row* find_option(const std::string& section,
                              const std::string& key) {
  for (auto& row : option_table())
    if (section == row.section && key == row.key)
      return &row;
  return nullptr;
}

} // namespace mibyan
