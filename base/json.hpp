// File: base/json.hpp
//
// An owned JSON value. simdjson parses at the edge (`json::parse`); the
// result is copied into this tree so that it can be stored, passed between
// threads and put into messages as text. Objects keep insertion order, which
// keeps tool results readable and stable for tests.
//
// Thread safety: a value is a plain value type; concurrent reads are safe,
// concurrent writes need external synchronisation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace mibyan::json {

class value;

using array = std::vector<value>;
using member = std::pair<std::string, value>;
using object = std::vector<member>;

/// The kinds of JSON value. Integers that fit in int64 are kept exactly;
/// everything else numeric is a double.
enum class kind : uint8_t { null, boolean, integer, number, string, array,
                            object };

/// Returns "null", "boolean", "integer", "number", "string", "array" or
/// "object": the names used in error messages shown to models and users.
const char* kind_name(kind k);

class value {
public:
  // -- constructors ----------------------------------------------------------

  value() = default;
  value(std::nullptr_t) {}
  value(bool x) : data_(x) {}
  value(int x) : data_(static_cast<int64_t>(x)) {}
  value(long x) : data_(static_cast<int64_t>(x)) {}
  value(long long x) : data_(static_cast<int64_t>(x)) {}
  value(unsigned x) : data_(static_cast<int64_t>(x)) {}
  value(unsigned long x);
  value(unsigned long long x);
  value(double x) : data_(x) {}
  value(std::string x) : data_(std::move(x)) {}
  value(std::string_view x) : data_(std::string{x}) {}
  value(const char* x) : data_(std::string{x}) {}
  value(array x) : data_(std::make_shared<array>(std::move(x))) {}
  value(object x) : data_(std::make_shared<object>(std::move(x))) {}

  value(const value& other);
  value(value&&) noexcept = default;
  value& operator=(const value& other);
  value& operator=(value&&) noexcept = default;

  /// Returns an empty object (`{}`).
  static value make_object() { return value{object{}}; }
  /// Returns an empty array (`[]`).
  static value make_array() { return value{array{}}; }

  // -- observers -------------------------------------------------------------

  kind type() const;
  bool is_null() const { return type() == kind::null; }
  bool is_bool() const { return type() == kind::boolean; }
  bool is_int() const { return type() == kind::integer; }
  bool is_number() const {
    return type() == kind::integer || type() == kind::number;
  }
  bool is_string() const { return type() == kind::string; }
  bool is_array() const { return type() == kind::array; }
  bool is_object() const { return type() == kind::object; }

  /// Accessors. Calling one on a value of another kind is a programming
  /// error (asserted in debug builds); check the kind first.
  bool as_bool() const;
  int64_t as_int() const;     // a double is truncated
  double as_double() const;   // an integer is converted
  const std::string& as_string() const;
  const array& as_array() const;
  array& as_array();
  const object& as_object() const;
  object& as_object();

  /// Returns the member `key` of an object, or nullptr if this is not an
  /// object or has no such member.
  const value* find(std::string_view key) const;
  value* find(std::string_view key);

  /// Returns the member `key`, inserting null first if missing. Turns a null
  /// value into an object. Must not be called on other kinds.
  value& operator[](std::string_view key);

  /// Appends to an array. Turns a null value into an array.
  void push_back(value x);

  /// Sets `key` to `x`, replacing an existing member in place.
  void set(std::string_view key, value x);

  /// Removes member `key` if present; returns whether it was there.
  bool erase(std::string_view key);

  /// Number of elements of an array or members of an object, else 0.
  size_t size() const;

  // -- convenience getters with defaults (used by tools) ---------------------

  /// Returns the string member `key`, or `fallback` if absent or not a
  /// string.
  std::string get_string(std::string_view key,
                         std::string_view fallback = {}) const;
  int64_t get_int(std::string_view key, int64_t fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;

  // -- serialisation ---------------------------------------------------------

  /// Returns compact JSON text. Non-finite doubles become null. Invalid
  /// UTF-8 in strings is replaced by U+FFFD so the output is always valid.
  std::string dump() const;

  /// Returns indented JSON text (2 spaces), for humans.
  std::string pretty() const;

  friend bool operator==(const value& x, const value& y);
  friend bool operator!=(const value& x, const value& y) { return !(x == y); }

private:
  void dump_to(std::string& out, int indent, int depth) const;

  using storage = std::variant<std::monostate, bool, int64_t, double,
                               std::string, std::shared_ptr<array>,
                               std::shared_ptr<object>>;
  storage data_;
};

/// The outcome of `parse`: a value, or a message such as
/// "TAPE_ERROR at byte 12: ...".
struct parse_result {
  std::optional<value> v;
  std::string error;
  explicit operator bool() const { return v.has_value(); }
};

/// Parses JSON text with simdjson. Never throws; bad input (including
/// documents nested deeper than 1024 levels) yields an error message.
parse_result parse(std::string_view text);

/// Parses only the members named in `keys` of the top-level object of
/// `text` (the others are skipped without being materialised); returns an
/// object holding those found. For large documents of which a caller
/// needs a few fields (a turn result carries the whole conversation): it
/// touches about the size of the kept members instead of the document's
/// size several times over. Errors: not an object, malformed JSON.
parse_result parse_members(std::string_view text,
                           const std::vector<std::string_view>& keys);
/// As above; parses in place (no copy) when `text` has spare capacity.
parse_result parse_members(const std::string& text,
                           const std::vector<std::string_view>& keys);
inline parse_result parse_members(const char* text,
                                  const std::vector<std::string_view>& keys) {
  return parse_members(std::string_view{text}, keys);
}

/// Appends `s` to `out` as a quoted JSON string.
void append_quoted(std::string& out, std::string_view s);

/// Returns `s` as a quoted JSON string.
std::string quote(std::string_view s);

/// Returns `s` with invalid UTF-8 sequences replaced by U+FFFD.
std::string sanitize_utf8(std::string_view s);

} // namespace mibyan::json
