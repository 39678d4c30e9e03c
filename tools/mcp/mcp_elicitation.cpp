#include "tools/mcp/mcp_elicitation.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "base/strings.hpp"

namespace mibyan {

namespace {

// Values and labels of an enum description: `enum` (+ legacy `enumNames`),
// `oneOf`/`anyOf` of {const, title}.
bool read_enum(const json::value& s, mcp_form_field& f) {
  if (auto e = s.find("enum"); e != nullptr && e->is_array()) {
    auto names = s.find("enumNames");
    size_t i = 0;
    for (auto& v : e->as_array()) {
      if (!v.is_string())
        return false;
      f.values.push_back(v.as_string());
      std::string label = v.as_string();
      if (names != nullptr && names->is_array() && i < names->size()
          && names->as_array()[i].is_string())
        label = names->as_array()[i].as_string();
      f.labels.push_back(label);
      ++i;
    }
    return true;
  }
  for (auto key : {"oneOf", "anyOf"}) {
    auto e = s.find(key);
    if (e == nullptr || !e->is_array())
      continue;
    for (auto& v : e->as_array()) {
      auto c = v.find("const");
      if (c == nullptr || !c->is_string())
        return false;
      f.values.push_back(c->as_string());
      f.labels.push_back(v.get_string("title", c->as_string()));
    }
    return true;
  }
  return true;
}

// Index of `text` among the field's values or labels (case-insensitive),
// or a 1-based number; -1 when none matches.
int pick(const mcp_form_field& f, const std::string& text) {
  auto t = strings::lower(strings::trim(text));
  for (size_t i = 0; i < f.values.size(); ++i)
    if (strings::lower(f.values[i]) == t || strings::lower(f.labels[i]) == t)
      return static_cast<int>(i);
  if (!t.empty() && t.size() <= 3
      && t.find_first_not_of("0123456789") == std::string::npos) {
    auto n = std::atoi(t.c_str());
    if (n >= 1 && n <= static_cast<int>(f.values.size()))
      return n - 1;
  }
  return -1;
}

bool valid_format(const std::string& format, const std::string& v) {
  if (format == "email") {
    auto at = v.find('@');
    return at != std::string::npos && at > 0 && at + 1 < v.size()
           && v.find(' ') == std::string::npos;
  }
  if (format == "uri")
    return v.find(':') != std::string::npos && v.find(' ') == std::string::npos;
  if (format == "date" || format == "date-time") {
    if (v.size() < 10)
      return false;
    for (size_t i = 0; i < 10; ++i) {
      bool dash = i == 4 || i == 7;
      if (dash ? v[i] != '-' : !std::isdigit(static_cast<unsigned char>(v[i])))
        return false;
    }
    return format == "date" ? v.size() == 10 : v.size() > 10;
  }
  return true;
}

// Checks one typed value; "" when it fits.
std::string check(const mcp_form_field& f, const json::value& v) {
  auto where = "field '" + f.name + "'";
  if (f.type == "boolean")
    return v.is_bool() ? "" : where + " must be true or false";
  if (f.type == "number" || f.type == "integer") {
    if (!v.is_number())
      return where + " must be a number";
    double d = v.as_double();
    if (f.type == "integer" && !v.is_int() && std::floor(d) != d)
      return where + " must be a whole number";
    if (f.minimum && d < *f.minimum)
      return where + " must be at least " + json::value{*f.minimum}.dump();
    if (f.maximum && d > *f.maximum)
      return where + " must be at most " + json::value{*f.maximum}.dump();
    return "";
  }
  if (f.type == "array") {
    if (!v.is_array())
      return where + " must be a list of choices";
    for (auto& x : v.as_array())
      if (!x.is_string()
          || std::find(f.values.begin(), f.values.end(), x.as_string())
               == f.values.end())
        return where + " has a value that is not one of its choices";
    auto n = static_cast<int64_t>(v.size());
    if (f.min_length && n < *f.min_length)
      return where + " needs at least " + std::to_string(*f.min_length)
             + " choices";
    if (f.max_length && n > *f.max_length)
      return where + " takes at most " + std::to_string(*f.max_length)
             + " choices";
    return "";
  }
  if (!v.is_string())
    return where + " must be text";
  auto& s = v.as_string();
  if (!f.values.empty()
      && std::find(f.values.begin(), f.values.end(), s) == f.values.end())
    return where + " must be one of its choices";
  auto n = static_cast<int64_t>(s.size());
  if (f.min_length && n < *f.min_length)
    return where + " must be at least " + std::to_string(*f.min_length)
           + " characters";
  if (f.max_length && n > *f.max_length)
    return where + " must be at most " + std::to_string(*f.max_length)
           + " characters";
  if (!f.format.empty() && !valid_format(f.format, s))
    return where + " is not a valid " + f.format;
  return "";
}

std::string describe_default(const mcp_form_field& f) {
  auto& d = f.default_value;
  if (d.is_string())
    return d.as_string();
  if (d.is_bool())
    return d.as_bool() ? "yes" : "no";
  if (d.is_array()) {
    std::string out;
    for (auto& x : d.as_array())
      if (x.is_string())
        out += (out.empty() ? "" : ", ") + x.as_string();
    return out;
  }
  return d.dump();
}

} // namespace

json::value mcp_elicit_result(const char* action) {
  json::value r;
  r["action"] = action;
  return r;
}

result<std::vector<mcp_form_field>> mcp_parse_form(const json::value& schema) {
  using R = result<std::vector<mcp_form_field>>;
  if (!schema.is_object() || schema.get_string("type", "object") != "object")
    return R::failure(status_code::invalid_argument,
                      "requestedSchema must be an object schema");
  std::vector<std::string> required;
  if (auto r = schema.find("required"); r != nullptr && r->is_array())
    for (auto& x : r->as_array())
      if (x.is_string())
        required.push_back(x.as_string());
  std::vector<mcp_form_field> out;
  auto props = schema.find("properties");
  if (props == nullptr)
    return out;
  if (!props->is_object())
    return R::failure(status_code::invalid_argument,
                      "requestedSchema.properties must be an object");
  for (auto& [name, s] : props->as_object()) {
    auto bad = [&](const std::string& why) {
      return R::failure(status_code::invalid_argument,
                        "property '" + name + "' " + why);
    };
    if (!s.is_object())
      return bad("is not a schema");
    mcp_form_field f;
    f.name = name;
    f.title = s.get_string("title", name);
    f.description = s.get_string("description", "");
    f.type = s.get_string("type", "");
    f.format = s.get_string("format", "");
    f.required = std::find(required.begin(), required.end(), name)
                 != required.end();
    if (auto d = s.find("default"))
      f.default_value = *d;
    if (auto m = s.find("minimum"); m != nullptr && m->is_number())
      f.minimum = m->as_double();
    if (auto m = s.find("maximum"); m != nullptr && m->is_number())
      f.maximum = m->as_double();
    for (auto [key, slot] : {std::pair{"minLength", &f.min_length},
                             std::pair{"maxLength", &f.max_length},
                             std::pair{"minItems", &f.min_length},
                             std::pair{"maxItems", &f.max_length}})
      if (auto m = s.find(key); m != nullptr && m->is_number())
        *slot = m->as_int();
    if (f.type == "array") {
      auto items = s.find("items");
      if (items == nullptr || !items->is_object() || !read_enum(*items, f)
          || f.values.empty())
        return bad("is an array without enum items (only multi-select "
                   "lists are supported)");
    } else if (f.type == "string") {
      if (!read_enum(s, f))
        return bad("has an enum that is not a list of strings");
    } else if (f.type != "number" && f.type != "integer"
               && f.type != "boolean") {
      return bad("has the unsupported type '" + f.type + "'");
    }
    out.push_back(std::move(f));
  }
  return out;
}

result<json::value> mcp_complete_form(const std::vector<mcp_form_field>& fields,
                                      const json::value& content) {
  json::value out = json::value::make_object();
  for (auto& f : fields) {
    const json::value* v = content.is_object() ? content.find(f.name) : nullptr;
    if (v == nullptr || v->is_null()) {
      if (!f.default_value.is_null())
        v = &f.default_value;
      else if (f.required)
        return result<json::value>::failure(
          status_code::invalid_argument,
          "field '" + f.name + "' is required");
      else
        continue;
    }
    if (auto why = check(f, *v); !why.empty())
      return result<json::value>::failure(status_code::invalid_argument, why);
    out[f.name] = *v;
  }
  return out;
}

result<json::value> mcp_form_value(const mcp_form_field& f,
                                   const std::string& text) {
  using R = result<json::value>;
  auto t = strings::trim(text);
  if (t.empty())
    return R::failure(status_code::invalid_argument, "no value");
  json::value v;
  if (f.type == "boolean") {
    auto l = strings::lower(t);
    if (l == "yes" || l == "y" || l == "true" || l == "1")
      v = true;
    else if (l == "no" || l == "n" || l == "false" || l == "0")
      v = false;
    else
      return R::failure(status_code::invalid_argument,
                        "answer yes or no");
  } else if (f.type == "number" || f.type == "integer") {
    char* end = nullptr;
    double d = std::strtod(t.c_str(), &end);
    if (end == t.c_str() || *end != '\0' || !std::isfinite(d))
      return R::failure(status_code::invalid_argument, "not a number");
    if (f.type == "integer" && std::floor(d) == d && std::fabs(d) < 9e15)
      v = static_cast<int64_t>(d);
    else
      v = d;
  } else if (f.type == "array") {
    json::value list = json::value::make_array();
    size_t from = 0;
    while (from <= t.size()) {
      auto comma = t.find(',', from);
      auto part = strings::trim(t.substr(from, comma == std::string::npos
                                        ? std::string::npos
                                        : comma - from));
      if (!part.empty()) {
        auto i = pick(f, part);
        if (i < 0)
          return R::failure(status_code::invalid_argument,
                            "'" + part + "' is not one of the choices");
        list.push_back(f.values[static_cast<size_t>(i)]);
      }
      if (comma == std::string::npos)
        break;
      from = comma + 1;
    }
    v = std::move(list);
  } else if (!f.values.empty()) {
    auto i = pick(f, t);
    if (i < 0)
      return R::failure(status_code::invalid_argument,
                        "not one of the choices");
    v = f.values[static_cast<size_t>(i)];
  } else {
    v = t;
  }
  if (auto why = check(f, v); !why.empty())
    return R::failure(status_code::invalid_argument, why);
  return v;
}

json::value mcp_elicit_by_questions(const mcp_elicitation_request& r,
                                    const clarify_callback& ask,
                                    std::chrono::seconds per_question) {
  auto fields = mcp_parse_form(r.schema);
  if (!fields)
    return mcp_elicit_result("decline");
  auto stopped = [&] { return r.cancelled != nullptr && r.cancelled->load(); };
  clarify_prompt p;
  p.session_id = r.session_id;
  p.timeout = per_question;
  p.cancelled = r.cancelled;
  std::string names;
  for (auto& f : *fields)
    names += (names.empty() ? "" : ", ") + f.title;
  p.question = "MCP server '" + r.server + "' asks: " + r.message
               + (fields->empty() ? std::string{}
                                  : "\nIt wants: " + names + ".")
               + "\nAnswer accept to fill it in, decline to refuse.";
  p.choices = {"accept", "decline", "cancel"};
  auto first = strings::lower(strings::trim(ask(p)));
  if (stopped() || first.empty() || first == "cancel" || first == "3")
    return mcp_elicit_result("cancel");
  if (first == "decline" || first == "no" || first == "n" || first == "2")
    return mcp_elicit_result("decline");
  json::value content = json::value::make_object();
  for (auto& f : *fields) {
    clarify_prompt q;
    q.session_id = r.session_id;
    q.timeout = per_question;
    q.cancelled = r.cancelled;
    q.question = f.title + (f.title != f.name ? " (" + f.name + ")" : "");
    if (!f.description.empty())
      q.question += ": " + f.description;
    if (f.type == "boolean") {
      q.choices = {"yes", "no"};
    } else if (!f.values.empty()) {
      if (f.labels.size() <= 4)
        q.choices = f.labels;
      std::string list;
      for (size_t i = 0; i < f.labels.size(); ++i)
        list += (i ? ", " : "") + f.labels[i];
      q.question += "\nChoices: " + list
                    + (f.type == "array" ? " (several: separate with commas)"
                                         : "");
    } else if (f.type == "number" || f.type == "integer") {
      q.question += "\nA " + std::string{f.type == "integer" ? "whole " : ""}
                    + "number";
      if (f.minimum)
        q.question += " from " + json::value{*f.minimum}.dump();
      if (f.maximum)
        q.question += " up to " + json::value{*f.maximum}.dump();
      q.question += ".";
    } else if (!f.format.empty()) {
      q.question += "\nFormat: " + f.format
                    + (f.format == "date" ? " (YYYY-MM-DD)" : "") + ".";
    }
    if (!f.default_value.is_null())
      q.question += "\nEnter (or -) keeps the default: " + describe_default(f)
                    + ".";
    else if (!f.required)
      q.question += "\nOptional: Enter (or -) skips it.";
    else
      q.question += "\nRequired.";
    for (int attempt = 0;; ++attempt) {
      auto answer = strings::trim(ask(q));
      if (stopped())
        return mcp_elicit_result("cancel");
      if (answer == "-")
        answer.clear(); // channels that take no empty answer (the dashboard)
      if (answer.empty()) {
        if (!f.default_value.is_null() || !f.required)
          break; // mcp_complete_form applies the default
        if (attempt >= 2)
          return mcp_elicit_result("cancel");
        continue;
      }
      auto v = mcp_form_value(f, answer);
      if (v) {
        content[f.name] = std::move(*v);
        break;
      }
      if (attempt >= 2)
        return mcp_elicit_result("cancel");
      q.question = "That is not valid (" + v.error + "). " + q.question;
    }
  }
  auto done = mcp_complete_form(*fields, content);
  if (!done)
    return mcp_elicit_result("cancel");
  json::value out = mcp_elicit_result("accept");
  out["content"] = std::move(*done);
  return out;
}

} // namespace mibyan
