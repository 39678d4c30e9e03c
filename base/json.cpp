#include "base/json.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include <simdjson.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace mibyan::json {

const char* kind_name(kind k) {
  switch (k) {
    case kind::null: return "null";
    case kind::boolean: return "boolean";
    case kind::integer: return "integer";
    case kind::number: return "number";
    case kind::string: return "string";
    case kind::array: return "array";
    case kind::object: return "object";
  }
  return "unknown";
}

value::value(unsigned long x) {
  if (x <= static_cast<unsigned long>(std::numeric_limits<int64_t>::max()))
    data_ = static_cast<int64_t>(x);
  else
    data_ = static_cast<double>(x);
}

value::value(unsigned long long x) {
  if (x
      <= static_cast<unsigned long long>(std::numeric_limits<int64_t>::max()))
    data_ = static_cast<int64_t>(x);
  else
    data_ = static_cast<double>(x);
}

value::value(const value& other) {
  *this = other;
}

value& value::operator=(const value& other) {
  if (this == &other)
    return *this;
  // Deep copy: values have value semantics even though containers are held
  // by pointer (which keeps sizeof(value) small and moves cheap).
  if (auto a = std::get_if<std::shared_ptr<array>>(&other.data_))
    data_ = std::make_shared<array>(**a);
  else if (auto o = std::get_if<std::shared_ptr<object>>(&other.data_))
    data_ = std::make_shared<object>(**o);
  else
    data_ = other.data_;
  return *this;
}

kind value::type() const {
  switch (data_.index()) {
    case 0: return kind::null;
    case 1: return kind::boolean;
    case 2: return kind::integer;
    case 3: return kind::number;
    case 4: return kind::string;
    case 5: return kind::array;
    default: return kind::object;
  }
}

bool value::as_bool() const {
  assert(is_bool());
  return std::get<bool>(data_);
}

int64_t value::as_int() const {
  if (auto d = std::get_if<double>(&data_))
    return static_cast<int64_t>(*d);
  assert(is_int());
  return std::get<int64_t>(data_);
}

double value::as_double() const {
  if (auto i = std::get_if<int64_t>(&data_))
    return static_cast<double>(*i);
  assert(type() == kind::number);
  return std::get<double>(data_);
}

const std::string& value::as_string() const {
  assert(is_string());
  return std::get<std::string>(data_);
}

const array& value::as_array() const {
  assert(is_array());
  return *std::get<std::shared_ptr<array>>(data_);
}

array& value::as_array() {
  assert(is_array());
  return *std::get<std::shared_ptr<array>>(data_);
}

const object& value::as_object() const {
  assert(is_object());
  return *std::get<std::shared_ptr<object>>(data_);
}

object& value::as_object() {
  assert(is_object());
  return *std::get<std::shared_ptr<object>>(data_);
}

const value* value::find(std::string_view key) const {
  if (!is_object())
    return nullptr;
  for (auto& [k, v] : as_object())
    if (k == key)
      return &v;
  return nullptr;
}

value* value::find(std::string_view key) {
  return const_cast<value*>(std::as_const(*this).find(key));
}

value& value::operator[](std::string_view key) {
  if (is_null())
    data_ = std::make_shared<object>();
  assert(is_object());
  if (auto v = find(key))
    return *v;
  auto& obj = as_object();
  obj.emplace_back(std::string{key}, value{});
  return obj.back().second;
}

void value::push_back(value x) {
  if (is_null())
    data_ = std::make_shared<array>();
  assert(is_array());
  as_array().push_back(std::move(x));
}

void value::set(std::string_view key, value x) {
  (*this)[key] = std::move(x);
}

bool value::erase(std::string_view key) {
  if (!is_object())
    return false;
  auto& obj = as_object();
  for (auto i = obj.begin(); i != obj.end(); ++i) {
    if (i->first == key) {
      obj.erase(i);
      return true;
    }
  }
  return false;
}

size_t value::size() const {
  if (is_array())
    return as_array().size();
  if (is_object())
    return as_object().size();
  return 0;
}

std::string value::get_string(std::string_view key,
                              std::string_view fallback) const {
  auto v = find(key);
  return v && v->is_string() ? v->as_string() : std::string{fallback};
}

int64_t value::get_int(std::string_view key, int64_t fallback) const {
  auto v = find(key);
  return v && v->is_number() ? v->as_int() : fallback;
}

bool value::get_bool(std::string_view key, bool fallback) const {
  auto v = find(key);
  return v && v->is_bool() ? v->as_bool() : fallback;
}

bool operator==(const value& x, const value& y) {
  if (x.type() != y.type()) {
    if (x.is_number() && y.is_number())
      return x.as_double() == y.as_double();
    return false;
  }
  switch (x.type()) {
    case kind::null: return true;
    case kind::boolean: return x.as_bool() == y.as_bool();
    case kind::integer: return x.as_int() == y.as_int();
    case kind::number: return x.as_double() == y.as_double();
    case kind::string: return x.as_string() == y.as_string();
    case kind::array: return x.as_array() == y.as_array();
    case kind::object: {
      auto& a = x.as_object();
      auto& b = y.as_object();
      if (a.size() != b.size())
        return false;
      for (auto& [k, v] : a) {
        auto other = y.find(k);
        if (!other || *other != v)
          return false;
      }
      return true;
    }
  }
  return false;
}

// -- serialisation -----------------------------------------------------------

namespace {

// Returns the length of the valid UTF-8 sequence starting at s[i], or 0.
size_t utf8_sequence_length(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (c < 0x80)
    return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + n > s.size())
    return 0;
  for (size_t k = 1; k < n; ++k) {
    auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80)
      return 0;
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Reject overlong forms, surrogates and values past U+10FFFF.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800)
      || (n == 4 && cp < 0x10000) || cp > 0x10FFFF
      || (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

constexpr std::string_view replacement = "\xEF\xBF\xBD";

void append_number(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  // Shortest representation that round-trips.
  for (int prec = 15; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*g", prec, d);
    if (std::strtod(buf, nullptr) == d)
      break;
  }
  std::string_view s{buf};
  out += s;
  // Keep a double recognisably non-integral so it parses back as a number.
  if (s.find_first_of(".eEn") == std::string_view::npos)
    out += ".0";
}

void newline(std::string& out, int indent, int depth) {
  if (indent <= 0)
    return;
  out += '\n';
  out.append(static_cast<size_t>(indent * depth), ' ');
}

} // namespace

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto n = utf8_sequence_length(s, i);
    if (n == 0) {
      out += replacement;
      ++i;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

namespace {

// The length of the run at the start of [p, p + n) that is copied as it
// is: printable ASCII other than '"' and '\\'.
size_t plain_run(const char* p, size_t n) {
  size_t i = 0;
#ifdef __SSE2__
  const __m128i space = _mm_set1_epi8(0x20);
  const __m128i del = _mm_set1_epi8(0x7f);
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  for (; i + 16 <= n; i += 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    // Below 0x20 as a signed byte: controls and every byte from 0x80.
    __m128i odd = _mm_or_si128(
      _mm_or_si128(_mm_cmplt_epi8(v, space), _mm_cmpeq_epi8(v, del)),
      _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)));
    auto m = static_cast<unsigned>(_mm_movemask_epi8(odd));
    if (m != 0)
      return i + static_cast<size_t>(__builtin_ctz(m));
  }
#endif
  for (; i < n; ++i) {
    auto c = static_cast<unsigned char>(p[i]);
    if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
      break;
  }
  return i;
}

} // namespace

void append_quoted(std::string& out, std::string_view s) {
  if (out.capacity() - out.size() < s.size() + 2)
    out.reserve(std::max(out.capacity() * 2, out.size() + s.size() + 2));
  out += '"';
  for (size_t i = 0; i < s.size();) {
    // Runs of plain characters in one piece.
    size_t run = plain_run(s.data() + i, s.size() - i);
    if (run != 0) {
      out.append(s.data() + i, run);
      i += run;
      if (i == s.size())
        break;
    }
    auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      auto n = utf8_sequence_length(s, i);
      if (n == 0) {
        out += replacement;
        ++i;
      } else {
        out.append(s.data() + i, n);
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        // The other controls and DEL.
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      }
    }
    ++i;
  }
  out += '"';
}

std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_quoted(out, s);
  return out;
}

void value::dump_to(std::string& out, int indent, int depth) const {
  switch (type()) {
    case kind::null: out += "null"; break;
    case kind::boolean: out += as_bool() ? "true" : "false"; break;
    case kind::integer: out += std::to_string(as_int()); break;
    case kind::number: append_number(out, std::get<double>(data_)); break;
    case kind::string: append_quoted(out, as_string()); break;
    case kind::array: {
      auto& xs = as_array();
      out += '[';
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i > 0)
          out += ',';
        newline(out, indent, depth + 1);
        xs[i].dump_to(out, indent, depth + 1);
      }
      if (!xs.empty())
        newline(out, indent, depth);
      out += ']';
      break;
    }
    case kind::object: {
      auto& xs = as_object();
      out += '{';
      for (size_t i = 0; i < xs.size(); ++i) {
        if (i > 0)
          out += ',';
        newline(out, indent, depth + 1);
        append_quoted(out, xs[i].first);
        out += indent > 0 ? ": " : ":";
        xs[i].second.dump_to(out, indent, depth + 1);
      }
      if (!xs.empty())
        newline(out, indent, depth);
      out += '}';
      break;
    }
  }
}

std::string value::dump() const {
  std::string out;
  dump_to(out, 0, 0);
  return out;
}

std::string value::pretty() const {
  std::string out;
  dump_to(out, 2, 0);
  return out;
}

// -- parsing -----------------------------------------------------------------

namespace {

constexpr int max_depth = 1024;

bool convert(simdjson::dom::element e, value& out, int depth,
             std::string& error) {
  if (depth > max_depth) {
    error = "document nested too deeply";
    return false;
  }
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::NULL_VALUE: out = value{}; return true;
    case element_type::BOOL: out = value{bool(e.get_bool().value_unsafe())};
      return true;
    case element_type::INT64: out = value{e.get_int64().value_unsafe()};
      return true;
    case element_type::UINT64: out = value{e.get_uint64().value_unsafe()};
      return true;
    case element_type::DOUBLE: out = value{e.get_double().value_unsafe()};
      return true;
    case element_type::STRING: out = value{std::string{
                                 e.get_string().value_unsafe()}};
      return true;
    case element_type::ARRAY: {
      array xs;
      simdjson::dom::array items;
      if (e.get_array().get(items)) {
        error = "invalid array";
        return false;
      }
      for (auto child : items) {
        value v;
        if (!convert(child, v, depth + 1, error))
          return false;
        xs.push_back(std::move(v));
      }
      out = value{std::move(xs)};
      return true;
    }
    case element_type::OBJECT: {
      object xs;
      simdjson::dom::object members;
      if (e.get_object().get(members)) {
        error = "invalid object";
        return false;
      }
      for (auto field : members) {
        value v;
        if (!convert(field.value, v, depth + 1, error))
          return false;
        xs.emplace_back(std::string{field.key}, std::move(v));
      }
      out = value{std::move(xs)};
      return true;
    }
  }
  error = "unknown element type";
  return false;
}

} // namespace

parse_result parse(std::string_view text) {
  parse_result result;
  // One parser per thread: simdjson parsers are not thread-safe, and
  // reusing the allocation makes small parses cheap. A parser sizes its
  // buffers to the largest document it has seen (about 14 bytes of
  // address space per input byte), so big documents get a parser of their
  // own that is released afterwards instead of pinning that memory in the
  // thread for good.
  constexpr size_t reuse_limit = size_t{1} << 20;
  thread_local simdjson::dom::parser shared;
  std::unique_ptr<simdjson::dom::parser> own;
  if (text.size() > reuse_limit)
    own = std::make_unique<simdjson::dom::parser>();
  auto& parser = own ? *own : shared;
  simdjson::padded_string padded{text};
  simdjson::dom::element root;
  auto err = parser.parse(padded).get(root);
  if (err) {
    result.error = simdjson::error_message(err);
    return result;
  }
  value v;
  if (!convert(root, v, 0, result.error))
    return result;
  result.v = std::move(v);
  return result;
}

namespace {

parse_result members_of(simdjson::padded_string_view padded,
                        const std::vector<std::string_view>& keys) {
  parse_result result;
  simdjson::ondemand::parser parser;
  simdjson::ondemand::document doc;
  simdjson::ondemand::object obj;
  auto err = parser.iterate(padded).get(doc);
  if (!err)
    err = doc.get_object().get(obj);
  if (err) {
    result.error = simdjson::error_message(err);
    return result;
  }
  value out = value::make_object();
  for (auto member : obj) {
    simdjson::ondemand::field field;
    std::string_view key;
    if ((err = std::move(member).get(field))
        || (err = field.unescaped_key().get(key))) {
      result.error = simdjson::error_message(err);
      return result;
    }
    bool wanted = false;
    for (auto k : keys)
      wanted = wanted || k == key;
    if (!wanted)
      continue; // the iterator skips the value without building it
    std::string key_copy{key};
    simdjson::ondemand::value& v = field.value();
    simdjson::ondemand::json_type type;
    if ((err = v.type().get(type))) {
      result.error = simdjson::error_message(err);
      return result;
    }
    if (type == simdjson::ondemand::json_type::string) {
      std::string_view sv;
      if ((err = v.get_string().get(sv))) {
        result.error = simdjson::error_message(err);
        return result;
      }
      out[key_copy] = std::string{sv};
      continue;
    }
    switch (type) {
      case simdjson::ondemand::json_type::boolean: {
        bool b = false;
        err = v.get_bool().get(b);
        out[key_copy] = b;
        break;
      }
      case simdjson::ondemand::json_type::null:
        out[key_copy] = value{};
        break;
      case simdjson::ondemand::json_type::number: {
        double d = 0;
        int64_t i = 0;
        if (!v.get_int64().get(i))
          out[key_copy] = i;
        else if (!(err = v.get_double().get(d)))
          out[key_copy] = d;
        break;
      }
      default: {
        // Objects and arrays: small in practice; parse their raw text.
        std::string_view raw;
        if (type == simdjson::ondemand::json_type::object) {
          simdjson::ondemand::object o;
          if (!(err = v.get_object().get(o)))
            err = o.raw_json().get(raw);
        } else {
          simdjson::ondemand::array a;
          if (!(err = v.get_array().get(a)))
            err = a.raw_json().get(raw);
        }
        if (err)
          break;
        auto sub = parse(raw);
        if (!sub) {
          result.error = sub.error;
          return result;
        }
        out[key_copy] = std::move(*sub.v);
      }
    }
    if (err) {
      result.error = simdjson::error_message(err);
      return result;
    }
  }
  result.v = std::move(out);
  return result;
}

} // namespace

parse_result parse_members(std::string_view text,
                           const std::vector<std::string_view>& keys) {
  simdjson::padded_string padded{text};
  return members_of(padded, keys);
}

parse_result parse_members(const std::string& text,
                           const std::vector<std::string_view>& keys) {
  // simdjson may read SIMDJSON_PADDING bytes past the end; when the
  // string's own capacity has room, no padded copy is made.
  if (text.capacity() - text.size() >= simdjson::SIMDJSON_PADDING)
    return members_of(simdjson::padded_string_view(text.data(), text.size(),
                                                   text.capacity()),
                      keys);
  return parse_members(std::string_view{text}, keys);
}

} // namespace mibyan::json
