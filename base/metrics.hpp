// File: base/metrics.hpp
//
// The process-wide metrics registry (docs/metrics.md): counters, gauges and
// histograms with label sets, rendered in the Prometheus text exposition
// format 0.0.4. No CAF, no JSON.
//
// Ownership: families live in `registry::global()`, which is never
// destroyed, and a series, once created, lives as long as the process: a
// reference from `family::with` stays valid for ever and values never
// reset. Callers on a hot path look a labelled series up once and keep the
// reference; `with` itself takes one short lock of one of 16 shards.
//
// Threads: everything here may be called from any thread. Increments and
// observations are lock-free (relaxed atomics). Rendering reads the atomics
// without stopping writers: each value is exact, a scrape is not a
// snapshot across series.
//
// Label cardinality is bounded: a value that is empty, longer than
// `max_label_bytes` or not valid UTF-8 becomes "other", and once a family
// holds `max_series` series every new label set maps to the one series
// whose values are all "other". Callers pass "other" for values outside
// their known set (an unknown tool name); never a session id.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mibyan::metrics {

/// Label values are at most this long (bytes); longer ones become "other".
constexpr size_t max_label_bytes = 128;
/// Default cap of series per family.
constexpr size_t default_max_series = 500;

/// A monotonically increasing count.
class counter {
public:
  void inc(uint64_t n = 1) noexcept {
    v_.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

private:
  std::atomic<uint64_t> v_{0};
};

/// A value that goes up and down.
class gauge {
public:
  void set(double v) noexcept { v_.store(v, std::memory_order_relaxed); }
  void add(double d) noexcept;
  void inc() noexcept { add(1); }
  void dec() noexcept { add(-1); }
  double value() const noexcept { return v_.load(std::memory_order_relaxed); }

private:
  std::atomic<double> v_{0};
};

/// Observations counted into fixed buckets (Prometheus `le` semantics: a
/// value v goes to the first bound b with v <= b, or +Inf), with their sum.
class histogram {
public:
  /// `bounds` are the family's, sorted, and outlive the histogram.
  explicit histogram(const std::vector<double>& bounds);
  void observe(double v) noexcept;

  struct snapshot {
    /// Cumulative counts per bound, then +Inf (== count).
    std::vector<uint64_t> cumulative;
    double sum = 0;
    uint64_t count = 0;
  };
  snapshot read() const;

private:
  const std::vector<double>& bounds_;
  std::unique_ptr<std::atomic<uint64_t>[]> buckets_; // bounds + 1 (+Inf)
  std::atomic<double> sum_{0};
};

enum class kind { counter, gauge, histogram };

/// What all families share: name, help, label names, the sharded series
/// table and its rendering. Not used directly: see the typed families.
class family_base {
public:
  family_base(std::string name, std::string help, kind k,
              std::vector<std::string> labels, size_t max_series);
  virtual ~family_base();
  family_base(const family_base&) = delete;
  family_base& operator=(const family_base&) = delete;

  const std::string& name() const { return name_; }
  const std::string& help() const { return help_; }
  kind type() const { return kind_; }
  const std::vector<std::string>& label_names() const { return labels_; }
  /// Series created so far.
  size_t size() const { return count_.load(std::memory_order_relaxed); }

  /// Appends HELP, TYPE and every series, sorted by label values.
  virtual void render(std::string& out) const;

protected:
  struct series {
    std::vector<std::string> values;
    void* metric = nullptr; // owned by the family (deleted in ~family)
  };
  /// The series of `values` (cleaned and capped), created on first use
  /// with `make`.
  void* find_or_create(const std::string_view* values, size_t n,
                       const std::function<void*()>& make);
  /// find_or_create for a family of M: `make` returns a new M*.
  template <class M, class Make>
  M& metric(const std::string_view* values, size_t n, Make make) {
    return *static_cast<M*>(find_or_create(
      values, n, [&make] { return static_cast<void*>(make()); }));
  }
  /// Every series, sorted by label values.
  std::vector<series> sorted() const;
  /// Deletes one metric of this family's type.
  virtual void destroy(void* metric) const = 0;
  virtual void render_series(std::string& out, const series& s) const = 0;

  std::string name_, help_;
  kind kind_;
  std::vector<std::string> labels_;
  size_t max_series_;

private:
  struct shard {
    mutable std::mutex mtx;
    std::unordered_map<std::string, series> by_key;
  };
  static constexpr size_t shard_count = 16;
  shard shards_[shard_count];
  std::atomic<size_t> count_{0};
};

/// A family of one-number metrics (counter or gauge): M has value().
/// Instantiated for counter and gauge only (base/metrics.cpp).
template <class M>
class scalar_family : public family_base {
public:
  ~scalar_family() override;
  /// The series of these label values (as many as label names).
  M& with(std::initializer_list<std::string_view> values);
  M& with(const std::vector<std::string>& values);

protected:
  scalar_family(std::string name, std::string help, kind k,
                std::vector<std::string> labels, size_t max_series);

private:
  void destroy(void* m) const override;
  void render_series(std::string& out, const series& s) const override;
};

class counter_family : public scalar_family<counter> {
public:
  counter_family(std::string name, std::string help,
                 std::vector<std::string> labels,
                 size_t max_series = default_max_series)
    : scalar_family(std::move(name), std::move(help), kind::counter,
                    std::move(labels), max_series) {}
};

class gauge_family : public scalar_family<gauge> {
public:
  gauge_family(std::string name, std::string help,
               std::vector<std::string> labels,
               size_t max_series = default_max_series)
    : scalar_family(std::move(name), std::move(help), kind::gauge,
                    std::move(labels), max_series) {}
};

extern template class scalar_family<counter>;
extern template class scalar_family<gauge>;

class histogram_family : public family_base {
public:
  /// `bounds` are sorted and strictly increasing (others are dropped).
  histogram_family(std::string name, std::string help,
                   std::vector<std::string> labels, std::vector<double> bounds,
                   size_t max_series = default_max_series);
  ~histogram_family() override;
  histogram& with(std::initializer_list<std::string_view> values);
  histogram& with(const std::vector<std::string>& values);
  const std::vector<double>& bounds() const { return bounds_; }

private:
  void destroy(void* m) const override;
  void render_series(std::string& out, const series& s) const override;
  std::vector<double> bounds_;
};

/// Where a gauge callback reports its samples at scrape time.
class sample_sink {
public:
  virtual ~sample_sink() = default;
  /// One sample; `values` as many as the family's label names. Samples of
  /// equal label values (from several callbacks) are summed.
  virtual void add(const std::vector<std::string>& values, double v) = 0;
  void add(std::initializer_list<std::string_view> values, double v);
};

using gauge_reader = std::function<void(sample_sink&)>;

/// A gauge family whose values are read at scrape time from callbacks.
/// Several callbacks may be attached (e.g. one per runtime of a process);
/// rendering with none attached shows HELP and TYPE only.
class callback_family : public family_base {
public:
  callback_family(std::string name, std::string help,
                  std::vector<std::string> labels,
                  size_t max_series = default_max_series);
  ~callback_family() override;

  /// Detaches its callback when destroyed (waiting for a scrape that is
  /// running it). Move-only; an empty handle does nothing.
  class handle {
  public:
    handle() = default;
    handle(handle&& o) noexcept : fam_(o.fam_), id_(o.id_) { o.fam_ = nullptr; }
    handle& operator=(handle&& o) noexcept;
    handle(const handle&) = delete;
    handle& operator=(const handle&) = delete;
    ~handle() { reset(); }
    void reset();
    explicit operator bool() const { return fam_ != nullptr; }

  private:
    friend class callback_family;
    handle(callback_family* f, uint64_t id) : fam_(f), id_(id) {}
    callback_family* fam_ = nullptr;
    uint64_t id_ = 0;
  };

  /// Attaches `read`; it runs on the scraping thread, must be quick, must
  /// not block for long and must not use the registry.
  [[nodiscard]] handle attach(gauge_reader read);

  void render(std::string& out) const override;

private:
  void destroy(void* m) const override;
  void render_series(std::string& out, const series& s) const override;
  void detach(uint64_t id);

  mutable std::mutex cb_mtx_;
  std::map<uint64_t, gauge_reader> readers_;
  uint64_t next_id_ = 1;
};

/// The families of the process, by name.
class registry {
public:
  /// The process-wide registry (never destroyed).
  static registry& global();

  registry() = default;
  registry(const registry&) = delete;
  registry& operator=(const registry&) = delete;

  /// Get-or-create by name. A second call with the same name, type and
  /// label names returns the first family; a mismatch (a programming
  /// error) is logged and gets a detached family that is never rendered.
  counter_family& counter(const std::string& name, const std::string& help,
                          std::vector<std::string> labels = {},
                          size_t max_series = default_max_series);
  gauge_family& gauge(const std::string& name, const std::string& help,
                      std::vector<std::string> labels = {},
                      size_t max_series = default_max_series);
  histogram_family& histogram(const std::string& name,
                              const std::string& help,
                              std::vector<std::string> labels,
                              std::vector<double> bounds,
                              size_t max_series = default_max_series);
  callback_family& callback_gauge(const std::string& name,
                                  const std::string& help,
                                  std::vector<std::string> labels = {},
                                  size_t max_series = default_max_series);

  /// The text exposition format 0.0.4: families sorted by name, each with
  /// HELP and TYPE, series sorted by label values.
  std::string render() const;

private:
  template <class F, class... Args>
  F& get(const std::string& name, kind k,
         const std::vector<std::string>& labels, Args&&... args);

  mutable std::mutex mtx_;
  std::map<std::string, std::unique_ptr<family_base>> families_;
  std::vector<std::unique_ptr<family_base>> detached_;
};

/// The Content-Type of `render`'s output.
constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

/// Whether `s` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) or label
/// name ([a-zA-Z_][a-zA-Z0-9_]*, not starting with "__").
bool valid_metric_name(std::string_view s);
bool valid_label_name(std::string_view s);

/// Label-value escaping (\\, \" and \n) and HELP escaping (\\ and \n).
void append_escaped_label(std::string& out, std::string_view v);
void append_escaped_help(std::string& out, std::string_view v);

/// A sample value as Prometheus reads it: integers without a fraction,
/// others in the shortest form that reads back exactly; +Inf, -Inf, NaN.
void append_value(std::string& out, double v);

/// Increments `g` while alive (a connection, a kernel).
class gauge_hold {
public:
  explicit gauge_hold(gauge& g) : g_(&g) { g_->inc(); }
  ~gauge_hold() {
    if (g_ != nullptr)
      g_->dec();
  }
  gauge_hold(gauge_hold&& o) noexcept : g_(o.g_) { o.g_ = nullptr; }
  gauge_hold(const gauge_hold&) = delete;
  gauge_hold& operator=(const gauge_hold&) = delete;
  gauge_hold& operator=(gauge_hold&&) = delete;

private:
  gauge* g_;
};

} // namespace mibyan::metrics
