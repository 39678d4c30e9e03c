#include "tools/args.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace mibyan {

namespace {

bool parse_integer(const std::string& s, int64_t& out) {
  if (s.empty() || s.size() > 20)
    return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size())
    return false;
  out = v;
  return true;
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty() || s.size() > 64)
    return false;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v))
    return false;
  out = v;
  return true;
}

// Tries to bring `v` to `type`; leaves it unchanged when no rule applies.
void coerce(const std::string& type, json::value& v) {
  if (type == "integer") {
    int64_t i;
    if (v.is_string() && parse_integer(v.as_string(), i))
      v = json::value{i};
    else if (v.type() == json::kind::number) {
      double d = v.as_double();
      if (std::floor(d) == d && std::fabs(d) < 9.0e15)
        v = json::value{static_cast<int64_t>(d)};
    }
  } else if (type == "number") {
    double d;
    if (v.is_string() && parse_double(v.as_string(), d))
      v = json::value{d};
  } else if (type == "boolean") {
    if (v.is_string()) {
      auto& s = v.as_string();
      if (s == "true" || s == "True")
        v = json::value{true};
      else if (s == "false" || s == "False")
        v = json::value{false};
    }
  } else if (type == "array" || type == "object") {
    if (v.is_string()) {
      auto& s = v.as_string();
      auto first = s.find_first_not_of(" \t\r\n");
      if (first != std::string::npos
          && (s[first] == '[' || s[first] == '{')) {
        if (auto parsed = json::parse(s);
            parsed && parsed.v->is_array() == (type == "array")
            && parsed.v->is_object() == (type == "object")) {
          v = std::move(*parsed.v);
          return;
        }
      }
    }
    if (type == "array" && !v.is_array() && !v.is_null() && !v.is_object())
      v = json::value{json::array{std::move(v)}};
  }
}

bool has_type(const std::string& type, const json::value& v) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_int();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_bool();
  if (type == "array") return v.is_array();
  if (type == "object") return v.is_object();
  if (type == "null") return v.is_null();
  return true; // unknown schema types are not enforced
}

std::optional<std::string> check(const std::string& name,
                                 const json::value& prop, json::value& v) {
  auto type = prop.get_string("type");
  if (!type.empty()) {
    coerce(type, v);
    if (!has_type(type, v))
      return "Invalid argument '" + name + "': expected " + type + ", got "
             + json::kind_name(v.type());
  }
  if (auto e = prop.find("enum"); e && e->is_array()) {
    bool found = false;
    for (auto& x : e->as_array())
      found = found || x == v;
    if (!found) {
      std::string allowed;
      for (auto& x : e->as_array())
        allowed += (allowed.empty() ? "" : ", ") + x.dump();
      return "Invalid argument '" + name + "': must be one of " + allowed;
    }
  }
  if (v.is_number()) {
    if (auto m = prop.find("minimum"); m && m->is_number()
                                       && v.as_double() < m->as_double())
      return "Invalid argument '" + name + "': must be >= " + m->dump();
    if (auto m = prop.find("maximum"); m && m->is_number()
                                       && v.as_double() > m->as_double())
      return "Invalid argument '" + name + "': must be <= " + m->dump();
  }
  if (v.is_array()) {
    if (auto items = prop.find("items"); items && items->is_object()) {
      auto item_type = items->get_string("type");
      if (!item_type.empty()) {
        size_t index = 0;
        for (auto& x : v.as_array()) {
          coerce(item_type, x);
          if (!has_type(item_type, x))
            return "Invalid argument '" + name + "[" + std::to_string(index)
                   + "]': expected " + item_type + ", got "
                   + json::kind_name(x.type());
          ++index;
        }
      }
    }
  }
  return std::nullopt;
}

} // namespace

status coerce_and_validate(const json::value& schema, json::value& args) {
  auto bad = [](std::string msg) {
    return status::failure(status_code::invalid_argument, std::move(msg));
  };
  if (!args.is_object())
    return bad(std::string{"Tool arguments must be a JSON object, got "}
               + json::kind_name(args.type()));
  auto props = schema.find("properties");
  if (props && props->is_object()) {
    for (auto& [name, prop] : props->as_object()) {
      auto v = args.find(name);
      // An explicit null means "use the default", as Python stubs send it.
      if (v == nullptr || v->is_null()) {
        if (v != nullptr)
          args.erase(name);
        continue;
      }
      if (auto err = check(name, prop, *v))
        return bad(std::move(*err));
    }
  }
  if (auto req = schema.find("required"); req && req->is_array()) {
    for (auto& r : req->as_array()) {
      if (r.is_string() && args.find(r.as_string()) == nullptr)
        return bad("Missing required argument '" + r.as_string() + "'");
    }
  }
  return {};
}

} // namespace mibyan
