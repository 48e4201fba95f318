#include "nimbus/monitor/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace nimbus::monitor {

std::string html_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

namespace {

constexpr double kWidth = 640, kHeight = 280;
constexpr double kLeft = 64, kRight = 150, kTop = 28, kBottom = 40;  // margins; the legend sits on the right
const char* const kColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

std::string tick_text(double value) {
  if (value == 0) return "0";
  if (std::abs(value) >= 1e6 || std::abs(value) < 1e-3) return fmt::format("{:.1e}", value);
  // Whole numbers in full (15000, not 1.5e+04).
  if (value == std::round(value)) return fmt::format("{:.0f}", value);
  return fmt::format("{:.4g}", value);
}

// A round step (1, 2, 2.5 or 5 times a power of ten) that cuts `range` into about five parts, so
// that ticks read 0, 0.5, 1, 1.5 rather than 0, 0.5784, 1.157.
double round_step(double range) {
  const double rough = range / 5, magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  for (const double factor : {1.0, 2.0, 2.5, 5.0}) {
    if (rough <= factor * magnitude * (1 + 1e-9)) return factor * magnitude;
  }
  return 10 * magnitude;
}

}  // namespace

std::string render_svg(const Chart& chart) {
  // The stacked tops of each series (equal to the series itself when not stacked).
  std::vector<std::vector<std::pair<double, double>>> tops;
  double x_min = std::numeric_limits<double>::max(), x_max = std::numeric_limits<double>::lowest();
  double y_min = chart.stacked ? 0 : std::numeric_limits<double>::max(), y_max = std::numeric_limits<double>::lowest();
  for (size_t s = 0; s < chart.series.size(); ++s) {
    std::vector<std::pair<double, double>> top = chart.series[s].points;
    for (size_t i = 0; chart.stacked && s > 0 && i < top.size() && i < tops[s - 1].size(); ++i) {
      top[i].second += tops[s - 1][i].second;
    }
    for (const auto& [x, y] : top) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      y_min = std::min(y_min, y);
      y_max = std::max(y_max, y);
    }
    tops.push_back(std::move(top));
  }
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\">"
      "<title>{}</title><text x=\"{}\" y=\"18\" font-size=\"14\" font-weight=\"bold\">{}</text>",
      kWidth, kHeight, kWidth, kHeight, html_escape(chart.title), kLeft, html_escape(chart.title));
  if (x_min > x_max) {
    return svg + fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"12\" fill=\"#666\">no data recorded</text></svg>",
                             kLeft, kHeight / 2);
  }
  if (x_max == x_min) x_max = x_min + 1;
  // Every figure plotted here (times, rates, bytes, shares, losses) is read against zero.
  if (y_min > 0) y_min = 0;
  if (y_max == y_min) y_max = y_min + 1;
  // The y axis ends on round ticks; the x axis spans the data exactly, with round ticks inside it.
  const double x_step = round_step(x_max - x_min), y_step = round_step(y_max - y_min);
  y_min = std::floor(y_min / y_step) * y_step;
  y_max = std::ceil(y_max / y_step - 1e-9) * y_step;
  const double plot_w = kWidth - kLeft - kRight, plot_h = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * plot_w; };
  auto py = [&](double y) { return kTop + plot_h - (y - y_min) / (y_max - y_min) * plot_h; };

  // Axes, round ticks, labels.
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>", kLeft, kTop,
                     plot_w, plot_h);
  // Ticks are whole multiples of the step (k * step), so no rounding error accumulates along an axis.
  const auto x_first = static_cast<int64_t>(std::ceil(x_min / x_step - 1e-9));
  const auto x_last = static_cast<int64_t>(std::floor(x_max / x_step + 1e-9));
  for (int64_t k = x_first; k <= x_last; ++k) {
    const double fx = static_cast<double>(k) * x_step;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\">{}</text>", px(fx),
                       kTop + plot_h + 14, tick_text(fx));
  }
  const auto y_first = std::llround(y_min / y_step), y_last = std::llround(y_max / y_step);
  for (int64_t k = y_first; k <= y_last; ++k) {
    const double fy = static_cast<double>(k) * y_step;
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"end\">{}</text>", kLeft - 4,
                       py(fy) + 3, tick_text(fy));
  }
  svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                     kLeft + plot_w / 2, kHeight - 6, html_escape(chart.x_label));
  svg += fmt::format(
      "<text x=\"12\" y=\"{:.1f}\" font-size=\"11\" text-anchor=\"middle\" transform=\"rotate(-90 12 "
      "{:.1f})\">{}</text>",
      kTop + plot_h / 2, kTop + plot_h / 2, html_escape(chart.y_label));

  // Stacked areas are drawn top series first so that lower ones stay visible over them.
  for (size_t n = 0; n < tops.size(); ++n) {
    const size_t s = chart.stacked ? tops.size() - 1 - n : n;
    const char* color = kColors[s % std::size(kColors)];
    const auto& top = tops[s];
    if (top.empty()) continue;
    std::string path;
    for (size_t i = 0; i < top.size(); ++i) {
      path += fmt::format("{}{:.1f},{:.1f} ", i == 0 ? "M" : "L", px(top[i].first), py(top[i].second));
    }
    if (chart.stacked) {
      // Close the area down to the series below (or the axis).
      for (size_t i = top.size(); i-- > 0;) {
        const double below = s > 0 && i < tops[s - 1].size() ? tops[s - 1][i].second : 0;
        path += fmt::format("L{:.1f},{:.1f} ", px(top[i].first), py(below));
      }
      path += "Z";
      svg += fmt::format("<path class=\"series\" d=\"{}\" fill=\"{}\" fill-opacity=\"0.8\" stroke=\"{}\"/>", path,
                         color, color);
    } else {
      svg +=
          fmt::format("<path class=\"series\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"/>", path, color);
      // Points as dots too, so that a series of one point (one epoch) shows.
      for (size_t i = 0; top.size() <= 50 && i < top.size(); ++i) {
        svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>", px(top[i].first),
                           py(top[i].second), color);
      }
    }
  }
  for (size_t s = 0; s < chart.series.size(); ++s) {
    const double y = kTop + 12 + 16 * double(s);
    svg += fmt::format(
        "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"11\">{}</text>",
        kWidth - kRight + 10, y - 9, kColors[s % std::size(kColors)], kWidth - kRight + 24, y,
        html_escape(chart.series[s].name));
  }
  return svg + "</svg>";
}

}  // namespace nimbus::monitor
