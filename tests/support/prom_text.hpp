// File: tests/support/prom_text.hpp
//
// A strict parser of the Prometheus text exposition format 0.0.4, for the
// metrics tests (tests/metrics_test.cpp, tests/metrics_http_test.cpp): any
// line that Prometheus would reject, and the rules of the format that
// Prometheus only warns about, fail the parse with the line's number:
//   * HELP and TYPE at most once per family, TYPE before the family's first
//     sample, every sample under a TYPE (our exporter never writes untyped
//     samples), a family's samples contiguous;
//   * metric and label names valid, label values and HELP texts with only
//     the escapes the format defines, no duplicate label, no duplicate
//     series, values that parse (floats, +Inf, -Inf, NaN);
//   * counters: the family name, non-negative; histograms: only _bucket
//     (with `le`), _sum and _count, buckets in increasing `le` and
//     cumulative, a +Inf bucket equal to _count;
//   * the text ends with a newline and has no carriage returns.
// Header-only; no Boost.Test in here (callers check `error`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace mibyan::test::prom {

struct sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct family {
  std::string name, help, type;
  bool has_help = false;
  std::vector<sample> samples;
};

struct document {
  /// "" when the text is valid; else "line N: why".
  std::string error;
  std::vector<family> families; // in text order
  /// Every sample by series_key.
  std::map<std::string, double> values;
};

inline std::string series_key(const std::string& name,
                              const std::map<std::string, std::string>& l) {
  std::string k = name + "{";
  bool first = true;
  for (auto& [n, v] : l) {
    if (!first)
      k += ",";
    first = false;
    k += n + "=\"" + v + "\"";
  }
  return k + "}";
}

namespace detail {

inline bool metric_name(const std::string& s) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
          || c == ':' || (i > 0 && c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

inline bool label_name(const std::string& s) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
          || (i > 0 && c >= '0' && c <= '9')))
      return false;
  }
  return true;
}

inline bool parse_value(const std::string& s, double& out) {
  if (s == "+Inf" || s == "Inf") {
    out = INFINITY;
    return true;
  }
  if (s == "-Inf") {
    out = -INFINITY;
    return true;
  }
  if (s == "NaN") {
    out = NAN;
    return true;
  }
  if (s.empty())
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E'
          || c == '+' || c == '-'))
      return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

inline bool unescape_help(const std::string& s, std::string& out) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size())
      return false;
    if (s[i] == '\\')
      out += '\\';
    else if (s[i] == 'n')
      out += '\n';
    else
      return false;
  }
  return true;
}

// The family a sample name belongs to, given the declared types.
inline std::string family_of(const std::string& name,
                             const std::map<std::string, family*>& by_name) {
  if (by_name.count(name))
    return name;
  for (auto suffix : {"_bucket", "_sum", "_count"}) {
    std::string sfx = suffix;
    if (name.size() > sfx.size()
        && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0) {
      auto base = name.substr(0, name.size() - sfx.size());
      auto it = by_name.find(base);
      if (it != by_name.end() && it->second->type == "histogram")
        return base;
    }
  }
  return name;
}

} // namespace detail

inline document parse(const std::string& text) {
  document doc;
  std::map<std::string, family*> by_name;
  std::vector<std::unique_ptr<family>> owned;
  std::set<std::string> closed; // families whose samples ended
  std::string current;          // family of the previous sample
  auto fail = [&](size_t line, const std::string& why) {
    doc.error = "line " + std::to_string(line) + ": " + why;
    return doc;
  };
  if (!text.empty() && text.back() != '\n')
    return fail(0, "the text does not end with a newline");
  if (text.find('\r') != std::string::npos)
    return fail(0, "carriage return in the text");
  size_t pos = 0, lineno = 0;
  auto get_family = [&](const std::string& name) -> family& {
    auto it = by_name.find(name);
    if (it != by_name.end())
      return *it->second;
    owned.push_back(std::make_unique<family>());
    owned.back()->name = name;
    by_name[name] = owned.back().get();
    return *owned.back();
  };
  std::vector<std::string> order;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++lineno;
    if (line.empty())
      continue;
    if (line[0] == '#') {
      // "# HELP name text", "# TYPE name type", or a comment.
      auto rest = line.substr(1);
      size_t i = 0;
      while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t'))
        ++i;
      auto kw_end = rest.find_first_of(" \t", i);
      auto kw = rest.substr(i, kw_end == std::string::npos ? std::string::npos
                                                            : kw_end - i);
      if (kw != "HELP" && kw != "TYPE")
        continue;
      if (kw_end == std::string::npos)
        return fail(lineno, kw + " without a metric name");
      i = kw_end;
      while (i < rest.size() && (rest[i] == ' ' || rest[i] == '\t'))
        ++i;
      auto name_end = rest.find_first_of(" \t", i);
      auto name = rest.substr(i, name_end == std::string::npos
                                   ? std::string::npos
                                   : name_end - i);
      if (!detail::metric_name(name))
        return fail(lineno, "invalid metric name '" + name + "'");
      std::string arg = name_end == std::string::npos
                          ? std::string{}
                          : rest.substr(name_end + 1);
      auto& f = get_family(name);
      if (std::find(order.begin(), order.end(), name) == order.end())
        order.push_back(name);
      if (!f.samples.empty() || closed.count(name))
        return fail(lineno, kw + " of " + name + " after its samples");
      if (kw == "HELP") {
        if (f.has_help)
          return fail(lineno, "second HELP for " + name);
        f.has_help = true;
        if (!detail::unescape_help(arg, f.help))
          return fail(lineno, "invalid escape in HELP of " + name);
      } else {
        if (!f.type.empty())
          return fail(lineno, "second TYPE for " + name);
        if (arg != "counter" && arg != "gauge" && arg != "histogram"
            && arg != "summary" && arg != "untyped")
          return fail(lineno, "unknown type '" + arg + "'");
        f.type = arg;
      }
      continue;
    }
    // A sample: name [{labels}] value [timestamp]
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' '
           && line[i] != '\t')
      ++i;
    std::string name = line.substr(0, i);
    if (!detail::metric_name(name))
      return fail(lineno, "invalid metric name '" + name + "'");
    sample s;
    s.name = name;
    if (i < line.size() && line[i] == '{') {
      ++i;
      for (;;) {
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        auto eq = line.find('=', i);
        if (eq == std::string::npos)
          return fail(lineno, "label without '='");
        auto ln = line.substr(i, eq - i);
        if (!detail::label_name(ln))
          return fail(lineno, "invalid label name '" + ln + "'");
        i = eq + 1;
        if (i >= line.size() || line[i] != '"')
          return fail(lineno, "label value not quoted");
        ++i;
        std::string v;
        bool closed_quote = false;
        while (i < line.size()) {
          char c = line[i++];
          if (c == '"') {
            closed_quote = true;
            break;
          }
          if (c == '\\') {
            if (i >= line.size())
              return fail(lineno, "dangling escape");
            char e = line[i++];
            if (e == '\\')
              v += '\\';
            else if (e == '"')
              v += '"';
            else if (e == 'n')
              v += '\n';
            else
              return fail(lineno, std::string{"invalid escape \\"} + e);
          } else {
            v += c;
          }
        }
        if (!closed_quote)
          return fail(lineno, "unterminated label value");
        if (s.labels.count(ln))
          return fail(lineno, "duplicate label " + ln);
        s.labels[ln] = v;
        if (i < line.size() && line[i] == ',') {
          ++i;
          continue;
        }
        if (i < line.size() && line[i] == '}') {
          ++i;
          break;
        }
        return fail(lineno, "expected ',' or '}' after a label");
      }
    }
    if (i >= line.size() || (line[i] != ' ' && line[i] != '\t'))
      return fail(lineno, "no value");
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t'))
      ++i;
    auto vend = line.find_first_of(" \t", i);
    auto vs = line.substr(i, vend == std::string::npos ? std::string::npos
                                                        : vend - i);
    if (!detail::parse_value(vs, s.value))
      return fail(lineno, "invalid value '" + vs + "'");
    if (vend != std::string::npos) {
      auto ts = line.substr(vend);
      auto b = ts.find_first_not_of(" \t");
      ts = b == std::string::npos ? "" : ts.substr(b);
      if (!ts.empty()) {
        char* end = nullptr;
        std::strtoll(ts.c_str(), &end, 10);
        if (end != ts.c_str() + ts.size())
          return fail(lineno, "invalid timestamp '" + ts + "'");
      }
    }
    auto fam_name = detail::family_of(name, by_name);
    auto it = by_name.find(fam_name);
    if (it == by_name.end() || it->second->type.empty())
      return fail(lineno, "sample of " + name + " without a TYPE line");
    auto& f = *it->second;
    if (fam_name != current) {
      if (!current.empty())
        closed.insert(current);
      if (closed.count(fam_name))
        return fail(lineno, "samples of " + fam_name + " are not contiguous");
      current = fam_name;
    }
    if (f.type == "counter") {
      if (name != fam_name)
        return fail(lineno, "counter sample named " + name);
      if (!(s.value >= 0))
        return fail(lineno, "negative or NaN counter");
    } else if (f.type == "histogram") {
      if (name == fam_name)
        return fail(lineno, "histogram sample without a suffix");
      bool bucket = name == fam_name + "_bucket";
      if (bucket != (s.labels.count("le") == 1))
        return fail(lineno, "le label on a non-bucket or missing on a bucket");
      if (bucket) {
        double le = 0;
        if (!detail::parse_value(s.labels["le"], le) || std::isnan(le))
          return fail(lineno, "invalid le");
      }
    } else if (f.type == "gauge" || f.type == "untyped") {
      if (name != fam_name)
        return fail(lineno, "sample name " + name + " not the family's");
    }
    auto key = series_key(name, s.labels);
    if (doc.values.count(key))
      return fail(lineno, "duplicate series " + key);
    doc.values[key] = s.value;
    f.samples.push_back(std::move(s));
  }
  // Histogram consistency per label set.
  for (auto& name : order) {
    auto& f = *by_name[name];
    if (f.type != "histogram")
      continue;
    std::map<std::string, std::vector<std::pair<double, double>>> buckets;
    std::map<std::string, double> counts, sums;
    for (auto& s : f.samples) {
      auto l = s.labels;
      l.erase("le");
      auto k = series_key(name, l);
      if (s.name == name + "_bucket") {
        double le = 0;
        detail::parse_value(s.labels.at("le"), le);
        buckets[k].emplace_back(le, s.value);
      } else if (s.name == name + "_count") {
        counts[k] = s.value;
      } else if (s.name == name + "_sum") {
        sums[k] = s.value;
      } else {
        doc.error = "histogram " + name + " has a sample " + s.name;
        return doc;
      }
    }
    for (auto& [k, b] : buckets) {
      for (size_t j = 1; j < b.size(); ++j)
        if (!(b[j].first > b[j - 1].first) || b[j].second < b[j - 1].second) {
          doc.error = k + ": buckets not in increasing le or not cumulative";
          return doc;
        }
      if (b.empty() || !std::isinf(b.back().first)) {
        doc.error = k + ": no +Inf bucket";
        return doc;
      }
      if (!counts.count(k) || counts[k] != b.back().second
          || !sums.count(k)) {
        doc.error = k + ": _count missing or unequal to the +Inf bucket, or "
                        "_sum missing";
        return doc;
      }
    }
    if (counts.size() != buckets.size() || sums.size() != buckets.size()) {
      doc.error = name + ": _sum or _count without buckets";
      return doc;
    }
  }
  for (auto& name : order)
    doc.families.push_back(*by_name[name]);
  return doc;
}

} // namespace mibyan::test::prom
