// Small inline-SVG charts for the run report: lines, or stacked areas, over
// a numeric x axis, with axis ticks, labels and a legend. No script, no
// external resource: the SVG text goes straight into the HTML.
//
//   monitor::Chart chart{.title = "Loss per epoch", .x_label = "epoch", .y_label = "loss"};
//   chart.series.push_back({.name = "loss", .points = {{1, 0.6}, {2, 0.4}}});
//   std::string svg = monitor::render_svg(chart);
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nimbus::monitor {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  // Each series stacked on the ones before it, drawn as filled areas (all series share x values).
  bool stacked = false;
};

// An <svg> element; a chart without points says so in its place.
std::string render_svg(const Chart& chart);

// Text with &, <, >, " escaped for HTML and SVG.
std::string html_escape(const std::string& text);

}  // namespace nimbus::monitor
