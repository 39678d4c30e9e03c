#include "base/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "base/log.hpp"

namespace mibyan::metrics {

namespace {

const char* type_name(kind k) {
  switch (k) {
  case kind::counter:
    return "counter";
  case kind::gauge:
    return "gauge";
  case kind::histogram:
    return "histogram";
  }
  return "untyped";
}

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size())
      return false;
    for (size_t k = 1; k <= n; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800)
        || (n == 3 && cp < 0x10000) || cp > 0x10FFFF
        || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

// A label value as stored: "other" when it cannot be shown as given.
std::string_view clean(std::string_view v) {
  // \x1f separates the values in the table's keys.
  if (v.empty() || v.size() > max_label_bytes
      || v.find('\x1f') != std::string_view::npos || !valid_utf8(v))
    return "other";
  return v;
}

std::string key_of(const std::vector<std::string>& values) {
  std::string key;
  for (auto& v : values) {
    key += v;
    key += '\x1f';
  }
  return key;
}

void append_labels(std::string& out, const std::vector<std::string>& names,
                   const std::vector<std::string>& values,
                   std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  if (names.empty() && extra_name.empty())
    return;
  out += '{';
  bool first = true;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    if (!first)
      out += ',';
    first = false;
    out += names[i];
    out += "=\"";
    append_escaped_label(out, values[i]);
    out += '"';
  }
  if (!extra_name.empty()) {
    if (!first)
      out += ',';
    out += extra_name;
    out += "=\"";
    append_escaped_label(out, extra_value);
    out += '"';
  }
  out += '}';
}

void append_u64(std::string& out, uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

std::vector<std::string> other_values(size_t n) {
  return std::vector<std::string>(n, "other");
}

} // namespace

bool valid_metric_name(std::string_view s) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
              || c == ':' || (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

bool valid_label_name(std::string_view s) {
  if (s.empty() || s.rfind("__", 0) == 0)
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'
              || (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

void append_escaped_label(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

void append_escaped_help(std::string& out, std::string_view v) {
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
}

void append_value(std::string& out, double v) {
  if (std::isnan(v)) {
    out += "NaN";
    return;
  }
  if (std::isinf(v)) {
    out += v > 0 ? "+Inf" : "-Inf";
    return;
  }
  char buf[64];
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<int64_t>(v));
    out.append(buf, r.ptr);
    return;
  }
  // Plain decimals where they are short (Go's client writes 0.0001, not
  // 1e-04); exponents for the extremes.
  auto a = std::fabs(v);
  auto r = a >= 1e-6 && a < 1e15
             ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed)
             : std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// -- gauge, histogram ---------------------------------------------------------

void gauge::add(double d) noexcept {
  double cur = v_.load(std::memory_order_relaxed);
  while (!v_.compare_exchange_weak(cur, cur + d, std::memory_order_relaxed))
    ;
}

histogram::histogram(const std::vector<double>& bounds)
  : bounds_(bounds),
    buckets_(new std::atomic<uint64_t>[bounds.size() + 1]) {
  for (size_t i = 0; i <= bounds.size(); ++i)
    buckets_[i].store(0, std::memory_order_relaxed);
}

void histogram::observe(double v) noexcept {
  size_t i = bounds_.size();
  if (!std::isnan(v))
    i = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(),
                                             v)
                            - bounds_.begin());
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  if (std::isnan(v))
    return;
  double cur = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(cur, cur + v, std::memory_order_relaxed))
    ;
}

histogram::snapshot histogram::read() const {
  snapshot s;
  s.cumulative.resize(bounds_.size() + 1);
  uint64_t acc = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    acc += buckets_[i].load(std::memory_order_relaxed);
    s.cumulative[i] = acc;
  }
  // The count is the +Inf bucket by construction, so a scrape never shows
  // a count that disagrees with its buckets.
  s.count = acc;
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

// -- family_base --------------------------------------------------------------

family_base::family_base(std::string name, std::string help, kind k,
                         std::vector<std::string> labels, size_t max_series)
  : name_(std::move(name)),
    help_(std::move(help)),
    kind_(k),
    labels_(std::move(labels)),
    max_series_(std::max<size_t>(1, max_series)) {}

family_base::~family_base() = default;

void* family_base::find_or_create(const std::string_view* values, size_t n,
                                  const std::function<void*()>& make) {
  // The key is the cleaned values, each ended by \x1f: short label sets
  // fit the string's inline buffer, so a hit allocates nothing.
  std::string key;
  for (size_t i = 0; i < labels_.size(); ++i) {
    key += i < n ? clean(values[i]) : std::string_view{"other"};
    key += '\x1f';
  }
  for (;;) {
    auto& sh = shards_[std::hash<std::string>{}(key) % shard_count];
    {
      std::lock_guard<std::mutex> g{sh.mtx};
      auto it = sh.by_key.find(key);
      if (it != sh.by_key.end())
        return it->second.metric;
      bool overflow = key == key_of(other_values(labels_.size()));
      if (overflow || count_.load(std::memory_order_relaxed) < max_series_) {
        series s;
        for (size_t b = 0, e; (e = key.find('\x1f', b)) != std::string::npos;
             b = e + 1)
          s.values.push_back(key.substr(b, e - b));
        s.metric = make();
        count_.fetch_add(1, std::memory_order_relaxed);
        return sh.by_key.emplace(key, std::move(s)).first->second.metric;
      }
    }
    // Full: the label set collapses into the all-"other" series.
    key = key_of(other_values(labels_.size()));
  }
}

std::vector<family_base::series> family_base::sorted() const {
  std::vector<series> all;
  all.reserve(size());
  for (auto& sh : shards_) {
    std::lock_guard<std::mutex> g{sh.mtx};
    for (auto& [k, s] : sh.by_key)
      all.push_back(s);
  }
  std::sort(all.begin(), all.end(), [](const series& a, const series& b) {
    return a.values < b.values;
  });
  return all;
}

void family_base::render(std::string& out) const {
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped_help(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += ' ';
  out += type_name(kind_);
  out += '\n';
  for (auto& s : sorted())
    render_series(out, s);
}

// -- typed families -----------------------------------------------------------

namespace {

std::vector<std::string_view> views(const std::vector<std::string>& v) {
  return {v.begin(), v.end()};
}

void append_number(std::string& out, uint64_t v) { append_u64(out, v); }
void append_number(std::string& out, double v) { append_value(out, v); }

// One sample line: `name``suffix`{labels[,extra]} value.
template <class V>
void append_sample(std::string& out, const std::string& name,
                   std::string_view suffix,
                   const std::vector<std::string>& names,
                   const std::vector<std::string>& values, V v,
                   std::string_view extra_name = {},
                   std::string_view extra_value = {}) {
  out += name;
  out += suffix;
  append_labels(out, names, values, extra_name, extra_value);
  out += ' ';
  append_number(out, v);
  out += '\n';
}

} // namespace

template <class M>
scalar_family<M>::scalar_family(std::string name, std::string help, kind k,
                                std::vector<std::string> labels,
                                size_t max_series)
  : family_base(std::move(name), std::move(help), k, std::move(labels),
                max_series) {}

template <class M>
scalar_family<M>::~scalar_family() {
  for (auto& s : sorted())
    destroy(s.metric);
}

template <class M>
M& scalar_family<M>::with(std::initializer_list<std::string_view> values) {
  return metric<M>(values.begin(), values.size(), [] { return new M; });
}

template <class M>
M& scalar_family<M>::with(const std::vector<std::string>& values) {
  auto v = views(values);
  return metric<M>(v.data(), v.size(), [] { return new M; });
}

template <class M>
void scalar_family<M>::destroy(void* m) const {
  delete static_cast<M*>(m);
}

template <class M>
void scalar_family<M>::render_series(std::string& out,
                                     const series& s) const {
  append_sample(out, name_, {}, labels_, s.values,
                static_cast<const M*>(s.metric)->value());
}

template class scalar_family<counter>;
template class scalar_family<gauge>;

histogram_family::histogram_family(std::string name, std::string help,
                                   std::vector<std::string> labels,
                                   std::vector<double> bounds,
                                   size_t max_series)
  : family_base(std::move(name), std::move(help), kind::histogram,
                std::move(labels), max_series) {
  std::sort(bounds.begin(), bounds.end());
  for (double b : bounds)
    if (std::isfinite(b) && (bounds_.empty() || b > bounds_.back()))
      bounds_.push_back(b);
}

histogram_family::~histogram_family() {
  for (auto& s : sorted())
    destroy(s.metric);
}

histogram&
histogram_family::with(std::initializer_list<std::string_view> values) {
  return metric<histogram>(values.begin(), values.size(),
                           [this] { return new histogram(bounds_); });
}

histogram& histogram_family::with(const std::vector<std::string>& values) {
  auto v = views(values);
  return metric<histogram>(v.data(), v.size(),
                           [this] { return new histogram(bounds_); });
}

void histogram_family::destroy(void* m) const {
  delete static_cast<histogram*>(m);
}

void histogram_family::render_series(std::string& out,
                                     const series& s) const {
  auto snap = static_cast<const histogram*>(s.metric)->read();
  std::string le;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    le.clear();
    if (i < bounds_.size())
      append_value(le, bounds_[i]);
    else
      le = "+Inf";
    append_sample(out, name_, "_bucket", labels_, s.values,
                  snap.cumulative[i], "le", le);
  }
  append_sample(out, name_, "_sum", labels_, s.values, snap.sum);
  append_sample(out, name_, "_count", labels_, s.values, snap.count);
}

// -- callback gauges ----------------------------------------------------------

void sample_sink::add(std::initializer_list<std::string_view> values,
                      double v) {
  std::vector<std::string> vals;
  vals.reserve(values.size());
  for (auto x : values)
    vals.emplace_back(x);
  add(vals, v);
}

callback_family::callback_family(std::string name, std::string help,
                                 std::vector<std::string> labels,
                                 size_t max_series)
  : family_base(std::move(name), std::move(help), kind::gauge,
                std::move(labels), max_series) {}

callback_family::~callback_family() = default;

callback_family::handle&
callback_family::handle::operator=(handle&& o) noexcept {
  if (this != &o) {
    reset();
    fam_ = o.fam_;
    id_ = o.id_;
    o.fam_ = nullptr;
  }
  return *this;
}

void callback_family::handle::reset() {
  if (fam_ != nullptr) {
    fam_->detach(id_);
    fam_ = nullptr;
  }
}

callback_family::handle callback_family::attach(gauge_reader read) {
  std::lock_guard<std::mutex> g{cb_mtx_};
  auto id = next_id_++;
  readers_.emplace(id, std::move(read));
  return handle{this, id};
}

void callback_family::detach(uint64_t id) {
  std::lock_guard<std::mutex> g{cb_mtx_};
  readers_.erase(id);
}

void callback_family::destroy(void*) const {}

void callback_family::render_series(std::string&, const series&) const {}

void callback_family::render(std::string& out) const {
  struct collect : sample_sink {
    size_t labels, cap;
    std::map<std::vector<std::string>, double> samples;
    void add(const std::vector<std::string>& values, double v) override {
      std::vector<std::string> vals;
      vals.reserve(labels);
      for (size_t i = 0; i < labels; ++i)
        vals.emplace_back(i < values.size() ? clean(values[i])
                                            : std::string_view{"other"});
      if (samples.count(vals) == 0 && samples.size() >= cap)
        vals = other_values(labels);
      samples[vals] += v;
    }
  } sink;
  sink.labels = labels_.size();
  sink.cap = max_series_;
  {
    // Held while the callbacks run, so a detaching owner waits for them.
    std::lock_guard<std::mutex> g{cb_mtx_};
    for (auto& [id, read] : readers_) {
      try {
        read(sink);
      } catch (...) {
        // A failing reader loses its samples, not the scrape.
      }
    }
  }
  out += "# HELP ";
  out += name_;
  out += ' ';
  append_escaped_help(out, help_);
  out += "\n# TYPE ";
  out += name_;
  out += " gauge\n";
  for (auto& [vals, v] : sink.samples)
    append_sample(out, name_, {}, labels_, vals, v);
}

// -- registry -----------------------------------------------------------------

registry& registry::global() {
  // Never destroyed: series references and callbacks may be used by
  // threads that outlive static destruction.
  static registry* r = new registry;
  return *r;
}

template <class F, class... Args>
F& registry::get(const std::string& name, kind k,
                 const std::vector<std::string>& labels, Args&&... args) {
  std::lock_guard<std::mutex> g{mtx_};
  bool names_ok = valid_metric_name(name);
  for (auto& l : labels)
    names_ok = names_ok && valid_label_name(l) && l != "le";
  auto it = families_.find(name);
  if (names_ok && it == families_.end()) {
    auto f = std::make_unique<F>(name, std::forward<Args>(args)...);
    auto& ref = *f;
    families_.emplace(name, std::move(f));
    return ref;
  }
  if (names_ok) {
    auto* f = dynamic_cast<F*>(it->second.get());
    if (f != nullptr && f->type() == k && f->label_names() == labels)
      return *f;
  }
  MIBYAN_LOG(error, "metrics", "metric '" << name << "' is registered twice "
             "with different types or labels, or has an invalid name; this "
             "registration is not exported");
  auto f = std::make_unique<F>(name, std::forward<Args>(args)...);
  auto& ref = *f;
  detached_.push_back(std::move(f));
  return ref;
}

counter_family& registry::counter(const std::string& name,
                                  const std::string& help,
                                  std::vector<std::string> labels,
                                  size_t max_series) {
  auto l = labels;
  return get<counter_family>(name, kind::counter, l, help, std::move(labels),
                             max_series);
}

gauge_family& registry::gauge(const std::string& name,
                              const std::string& help,
                              std::vector<std::string> labels,
                              size_t max_series) {
  auto l = labels;
  return get<gauge_family>(name, kind::gauge, l, help, std::move(labels),
                           max_series);
}

histogram_family& registry::histogram(const std::string& name,
                                      const std::string& help,
                                      std::vector<std::string> labels,
                                      std::vector<double> bounds,
                                      size_t max_series) {
  auto l = labels;
  return get<histogram_family>(name, kind::histogram, l, help,
                               std::move(labels), std::move(bounds),
                               max_series);
}

callback_family& registry::callback_gauge(const std::string& name,
                                          const std::string& help,
                                          std::vector<std::string> labels,
                                          size_t max_series) {
  auto l = labels;
  return get<callback_family>(name, kind::gauge, l, help, std::move(labels),
                              max_series);
}

std::string registry::render() const {
  std::vector<const family_base*> fams;
  {
    std::lock_guard<std::mutex> g{mtx_};
    fams.reserve(families_.size());
    for (auto& [name, f] : families_)
      fams.push_back(f.get());
  }
  std::string out;
  out.reserve(fams.size() * 256);
  for (auto* f : fams)
    f->render(out);
  return out;
}

} // namespace mibyan::metrics
