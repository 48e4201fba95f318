#include "nimbus/monitor/prometheus_text.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdlib>

#include "nimbus/base/error.h"

namespace nimbus::monitor {

std::string format_sample_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Integers up to 2^53 are exact in a double: print them as integers, as counters usually are.
  if (value == std::floor(value) && std::abs(value) < 9007199254740992.0) return fmt::format("{:.0f}", value);
  return fmt::format("{}", value);
}

namespace {

// Backslash and newline always; the double quote only inside label values.
std::string escape(std::string_view text, bool quote) {
  std::string out;
  for (char c : text) {
    if (c == '\\' || (quote && c == '"')) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string escape_help(std::string_view text) { return escape(text, false); }

std::string escape_label_value(std::string_view text) { return escape(text, true); }

namespace {

// {a="x",b="y"} with `extra` (the histogram's le) last; empty when there are no labels.
std::string label_set(const Labels& labels, const std::string& extra = {}) {
  if (labels.empty() && extra.empty()) return {};
  std::string out = "{";
  for (const auto& [name, value] : labels) {
    if (out.size() > 1) out += ",";
    out += fmt::format("{}=\"{}\"", name, escape_label_value(value));
  }
  if (!extra.empty()) out += (out.size() > 1 ? "," : "") + extra;
  return out + "}";
}

}  // namespace

std::string prometheus_text(const MetricRegistry& registry) {
  std::string out;
  const std::string* name = nullptr;
  registry.for_each(
      [&](const MetricRegistry::FamilyView& family) {
        name = &family.name;
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", family.name, escape_help(family.help), family.name,
                           metric_type_name(family.type));
      },
      [&](const MetricRegistry::SeriesView& series) {
        if (series.counter) {
          out +=
              fmt::format("{}{} {}\n", *name, label_set(series.labels), format_sample_value(series.counter->value()));
        } else if (series.gauge) {
          out += fmt::format("{}{} {}\n", *name, label_set(series.labels), format_sample_value(series.gauge->value()));
        } else {
          const Histogram::Snapshot snapshot = series.histogram->snapshot();
          for (size_t i = 0; i < snapshot.cumulative.size(); ++i) {
            const std::string le =
                i < snapshot.bounds.size() ? format_sample_value(snapshot.bounds[i]) : std::string("+Inf");
            out += fmt::format("{}_bucket{} {}\n", *name, label_set(series.labels, fmt::format("le=\"{}\"", le)),
                               snapshot.cumulative[i]);
          }
          out += fmt::format("{}_sum{} {}\n", *name, label_set(series.labels), format_sample_value(snapshot.sum));
          out += fmt::format("{}_count{} {}\n", *name, label_set(series.labels), snapshot.count);
        }
      });
  return out;
}

std::string ParsedSample::label(const std::string& key) const {
  for (const auto& [name, value] : labels) {
    if (name == key) return value;
  }
  return {};
}

std::vector<ParsedSample> parse_prometheus_text(std::string_view text) {
  std::vector<ParsedSample> samples;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty() || line[0] == '#') continue;
    auto fail = [&](const char* what) {
      return DataError(fmt::format("metrics text line {}: {}: '{}'", line_number, what, line));
    };
    ParsedSample sample;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    sample.name = std::string(line.substr(0, i));
    if (i < line.size() && line[i] == '{') {
      ++i;
      while (i < line.size() && line[i] != '}') {
        const size_t equals = line.find('=', i);
        if (equals == std::string_view::npos || equals + 1 >= line.size() || line[equals + 1] != '"') {
          throw fail("malformed label");
        }
        std::string name(line.substr(i, equals - i)), value;
        size_t j = equals + 2;
        for (; j < line.size() && line[j] != '"'; ++j) {
          if (line[j] == '\\' && j + 1 < line.size()) {
            ++j;
            value += line[j] == 'n' ? '\n' : line[j];
          } else {
            value += line[j];
          }
        }
        if (j >= line.size()) throw fail("unterminated label value");
        sample.labels.emplace_back(std::move(name), std::move(value));
        i = j + 1;
        if (i < line.size() && line[i] == ',') ++i;
      }
      if (i >= line.size()) throw fail("unterminated label set");
      ++i;
    }
    while (i < line.size() && line[i] == ' ') ++i;
    const std::string value(line.substr(i, line.find(' ', i) - i));
    if (value == "NaN") {
      sample.value = std::nan("");
    } else if (value == "+Inf" || value == "-Inf") {
      sample.value = value[0] == '+' ? HUGE_VAL : -HUGE_VAL;
    } else {
      char* parsed_end = nullptr;
      sample.value = std::strtod(value.c_str(), &parsed_end);
      if (value.empty() || *parsed_end != '\0') throw fail("malformed value");
    }
    samples.push_back(std::move(sample));
  }
  return samples;
}

}  // namespace nimbus::monitor
