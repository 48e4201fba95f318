#include "nimbus/monitor/metric_registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "nimbus/base/error.h"

namespace nimbus::monitor {

const char* metric_type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

void Counter::add(double amount) {
  NIMBUS_ASSERT(amount >= 0) << "a counter cannot go down (add " << amount << ")";
  value_.fetch_add(amount, std::memory_order_relaxed);
}

void Counter::advance_to(double total) {
  // One writer per counter (the sampler thread), so load-then-add does not race with another advance.
  const double current = value();
  if (total > current) add(total - current);
}

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  if (!std::is_sorted(bounds_.begin(), bounds_.end()) ||
      std::adjacent_find(bounds_.begin(), bounds_.end()) != bounds_.end()) {
    throw InvalidArgument("histogram bucket bounds must be strictly ascending");
  }
}

void Histogram::observe(double value) {
  // Bucket i counts values in (bounds[i-1], bounds[i]]: Prometheus's `le` is inclusive.
  const auto bucket = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
}

Histogram::Snapshot Histogram::snapshot() const {
  std::lock_guard lock(mutex_);
  Snapshot snapshot{.bounds = bounds_, .cumulative = {}, .sum = sum_, .count = 0};
  for (uint64_t count : counts_) {
    snapshot.count += count;
    snapshot.cumulative.push_back(snapshot.count);
  }
  return snapshot;
}

struct MetricRegistry::Series {
  Labels labels;
  std::unique_ptr<Counter> counter;
  std::unique_ptr<Gauge> gauge;
  std::unique_ptr<Histogram> histogram;
};

struct MetricRegistry::Family {
  std::string name, help;
  MetricType type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;
  std::deque<Series> series;
};

MetricRegistry::MetricRegistry() = default;
MetricRegistry::~MetricRegistry() = default;

bool is_valid_metric_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; });
}

bool is_valid_label_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0])) || name.rfind("__", 0) == 0) return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

MetricRegistry::Series& MetricRegistry::series(const std::string& name, const std::string& help, MetricType type,
                                               const Labels& labels, const std::vector<double>* bounds) {
  std::vector<std::string> label_names;
  for (const auto& [label, value] : labels) {
    if (!is_valid_label_name(label) || label == "le") {
      throw InvalidArgument(fmt::format("metric {}: '{}' is not a valid label name", name, label),
                            "label names match [a-zA-Z_][a-zA-Z0-9_]*, do not start with __ and are not 'le'");
    }
    label_names.push_back(label);
  }
  std::lock_guard lock(mutex_);
  auto found = std::find_if(families_.begin(), families_.end(), [&](const auto& f) { return f->name == name; });
  Family* family = nullptr;
  if (found == families_.end()) {
    if (!is_valid_metric_name(name)) {
      throw InvalidArgument(fmt::format("'{}' is not a valid metric name", name),
                            "metric names match [a-zA-Z_:][a-zA-Z0-9_:]*");
    }
    families_.push_back(std::make_unique<Family>(
        Family{.name = name, .help = help, .type = type, .label_names = label_names, .bounds = {}, .series = {}}));
    family = families_.back().get();
    if (bounds) family->bounds = *bounds;
  } else {
    family = found->get();
    if (family->type != type || family->help != help || family->label_names != label_names ||
        (bounds && family->bounds != *bounds)) {
      throw InvalidArgument(fmt::format("metric {} is declared twice, differently (a {} first, now a {})", name,
                                        metric_type_name(family->type), metric_type_name(type)),
                            "declare each metric once, with one help text and one set of label names");
    }
  }
  for (Series& existing : family->series) {
    if (existing.labels == labels) return existing;
  }
  Series& created = family->series.emplace_back();
  created.labels = labels;
  switch (type) {
    case MetricType::kCounter: created.counter = std::make_unique<Counter>(); break;
    case MetricType::kGauge: created.gauge = std::make_unique<Gauge>(); break;
    case MetricType::kHistogram: created.histogram = std::make_unique<Histogram>(family->bounds); break;
  }
  return created;
}

Counter& MetricRegistry::counter(const std::string& name, const std::string& help, const Labels& labels) {
  return *series(name, help, MetricType::kCounter, labels, nullptr).counter;
}

Gauge& MetricRegistry::gauge(const std::string& name, const std::string& help, const Labels& labels) {
  return *series(name, help, MetricType::kGauge, labels, nullptr).gauge;
}

Histogram& MetricRegistry::histogram(const std::string& name, const std::string& help,
                                     const std::vector<double>& bounds, const Labels& labels) {
  return *series(name, help, MetricType::kHistogram, labels, &bounds).histogram;
}

void MetricRegistry::for_each(const std::function<void(const FamilyView&)>& visit_family,
                              const std::function<void(const SeriesView&)>& visit_series) const {
  std::lock_guard lock(mutex_);
  for (const auto& family : families_) {
    visit_family({family->name, family->help, family->type});
    for (const Series& s : family->series) {
      visit_series({s.labels, s.counter.get(), s.gauge.get(), s.histogram.get()});
    }
  }
}

double MetricRegistry::value(const std::string& name, const Labels& labels) const {
  std::lock_guard lock(mutex_);
  for (const auto& family : families_) {
    if (family->name != name) continue;
    for (const Series& s : family->series) {
      if (s.labels != labels) continue;
      if (s.counter) return s.counter->value();
      if (s.gauge) return s.gauge->value();
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace nimbus::monitor
