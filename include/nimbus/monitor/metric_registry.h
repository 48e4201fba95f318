// Metric registry: every metric Nimbus exports is declared here once (name,
// help, type, labels); the Prometheus exporter only serializes what the
// registry holds.
//
//   monitor::MetricRegistry registry;
//   monitor::Counter& samples = registry.counter("nimbus_samples_total", "Training samples processed.");
//   monitor::Gauge& used = registry.gauge("nimbus_memory_bytes", "Device memory in use.", {{"kind", "parameters"}});
//   monitor::Histogram& step = registry.histogram("nimbus_step_seconds", "Step wall time.", {0.01, 0.1, 1});
//   samples.add(128);  used.set(4096);  step.observe(0.05);
//   std::string text = monitor::prometheus_text(registry);   // prometheus_text.h
//
// A family (one name) has one type and one help text; each distinct label set
// is one series of it. Asking again for a series returns the same object, so
// code that updates a metric can look it up once and keep the reference
// (references stay valid for the registry's life). Updates are thread-safe and
// lock-free for counters and gauges.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace nimbus::monitor {

enum class MetricType { kCounter, kGauge, kHistogram };

// "counter", "gauge", "histogram" (the words of a # TYPE line).
const char* metric_type_name(MetricType type);

// Label name -> value, in the order they are printed.
using Labels = std::vector<std::pair<std::string, std::string>>;

// A value that only goes up (Prometheus counter; its name ends in _total by convention).
class Counter {
 public:
  // Adds `amount` (>= 0; a negative amount is a broken invariant).
  void add(double amount = 1);
  // Mirrors a running total kept elsewhere (CPU seconds, elements produced): moves the counter up
  // to `total`, never down.
  void advance_to(double total);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A value that goes up and down.
class Gauge {
 public:
  void set(double value) { value_.store(value, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into cumulative buckets with upper bounds `bounds` (ascending; +Inf is implied).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);

  struct Snapshot {
    std::vector<double> bounds;        // without +Inf
    std::vector<uint64_t> cumulative;  // one per bound, then the +Inf bucket (== count)
    double sum = 0;
    uint64_t count = 0;
  };
  // A consistent copy (the +Inf bucket always equals the count).
  Snapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative; last is (bounds_.back(), +Inf)
  double sum_ = 0;
};

class MetricRegistry {
 public:
  MetricRegistry();
  ~MetricRegistry();
  MetricRegistry(const MetricRegistry&) = delete;
  MetricRegistry& operator=(const MetricRegistry&) = delete;

  // The series of family `name` with `labels`, created at zero on first use. Throws
  // InvalidArgument when the name or a label name is not a valid Prometheus name, or when
  // `name` was declared before with another type, help text, or label names (or histogram bounds).
  Counter& counter(const std::string& name, const std::string& help, const Labels& labels = {});
  Gauge& gauge(const std::string& name, const std::string& help, const Labels& labels = {});
  Histogram& histogram(const std::string& name, const std::string& help, const std::vector<double>& bounds,
                       const Labels& labels = {});

  // A read-only view of one family, for serializers.
  struct SeriesView {
    const Labels& labels;
    const Counter* counter;      // set for counters
    const Gauge* gauge;          // set for gauges
    const Histogram* histogram;  // set for histograms
  };
  struct FamilyView {
    const std::string& name;
    const std::string& help;
    MetricType type;
  };
  // Calls `visit_family` for each family in declaration order, then `visit_series` for each of
  // its series in creation order. Holds the registry's lock: the callbacks must not declare metrics.
  void for_each(const std::function<void(const FamilyView&)>& visit_family,
                const std::function<void(const SeriesView&)>& visit_series) const;

  // The value of a counter or gauge series; NaN when there is no such series.
  double value(const std::string& name, const Labels& labels = {}) const;

 private:
  struct Family;
  struct Series;
  Series& series(const std::string& name, const std::string& help, MetricType type, const Labels& labels,
                 const std::vector<double>* bounds);

  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<Family>> families_;
};

// Metric names match [a-zA-Z_:][a-zA-Z0-9_:]*; label names [a-zA-Z_][a-zA-Z0-9_]* without the
// reserved "__" prefix.
bool is_valid_metric_name(const std::string& name);
bool is_valid_label_name(const std::string& name);

}  // namespace nimbus::monitor
