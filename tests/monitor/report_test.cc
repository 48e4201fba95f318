// nimbus report end to end: `nimbus train --run-dir`, then `nimbus report`, then headless Chromium
// opens the page: no console errors, every plot has drawn paths, and the screenshot shows them.
#include "nimbus/monitor/report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <png.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include "nimbus/monitor/svg_chart.h"
#include "tests/monitor/monitor_test_util.h"
#include "tests/support/run_command.h"

namespace nimbus::monitor {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Pixels of the screenshot within a small distance of `rgb`.
int64_t pixels_near(const std::string& png_path, uint32_t rgb) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, png_path.c_str())) return -1;
  image.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> pixels(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, pixels.data(), 0, nullptr)) return -1;
  const int r = int(rgb >> 16), g = int((rgb >> 8) & 0xff), b = int(rgb & 0xff);
  int64_t count = 0;
  for (size_t i = 0; i + 2 < pixels.size(); i += 3) {
    count += std::abs(pixels[i] - r) + std::abs(pixels[i + 1] - g) + std::abs(pixels[i + 2] - b) < 24;
  }
  return count;
}

TEST(SvgChart, LinesAndStackedAreas) {
  Chart lines{.title = "a < b", .x_label = "x", .y_label = "y", .series = {}, .stacked = false};
  lines.series.push_back({.name = "one", .points = {{0, 1}, {1, 2}, {2, 1.5}}});
  const std::string svg = render_svg(lines);
  EXPECT_NE(svg.find("a &lt; b"), std::string::npos);
  EXPECT_NE(svg.find("<path class=\"series\" d=\"M64.0,"), std::string::npos) << svg;
  Chart stacked{.title = "s", .x_label = "x", .y_label = "y", .series = {}, .stacked = true};
  stacked.series.push_back({.name = "low", .points = {{0, 1}, {1, 1}}});
  stacked.series.push_back({.name = "high", .points = {{0, 1}, {1, 1}}});
  const std::string areas = render_svg(stacked);
  // The top series is drawn first and closes down onto the lower one: "Z"-terminated areas.
  EXPECT_EQ(std::count(areas.begin(), areas.end(), 'Z'), 2) << areas;
  Chart empty{.title = "none", .x_label = "", .y_label = "", .series = {}, .stacked = false};
  EXPECT_NE(render_svg(empty).find("no data recorded"), std::string::npos);
}

TEST(Report, OpensInHeadlessChromiumWithoutErrorsAndDrawsEveryPlot) {
  // Skips only on a machine set up by hand without scripts/install-deps, which installs it on every
  // machine that runs the suite (CI included): the skip names the package rather than failing obscurely.
  if (std::system("command -v chromium > /dev/null") != 0) {
    GTEST_SKIP() << "chromium not installed (Debian package chromium; scripts/install-deps installs it)";
  }
  testing::TempDir dir("nimbus-report");
  const std::string run_dir = dir.path() + "/run";
  const std::string train = fmt::format(
      "{} train examples/fashion_mnist_mlp.yaml --set fit.epochs=2 --set fit.steps_per_epoch=60 --set fit.verbose=0 "
      "--run-dir {} > {}/train.log 2>&1",
      NIMBUS_CLI, run_dir, dir.path());
  ASSERT_EQ(std::system(train.c_str()), 0) << train << "\n" << read_file(dir.path() + "/train.log");
  const std::string report_path = dir.path() + "/report.html";
  ASSERT_EQ(std::system(fmt::format("{} report {} -o {} > /dev/null", NIMBUS_CLI, run_dir, report_path).c_str()), 0);
  const std::string html = read_file(report_path);
  EXPECT_EQ(html.find("<script"), std::string::npos) << "the report must work without scripts";
  // Nothing to fetch: no src or href attribute and no CSS url() (the SVG namespace URI is a name, not a fetch).
  EXPECT_FALSE(std::regex_search(html, std::regex("(src|href)=|url\\("))) << "the report must not reach the network";

  const std::string chromium = "chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 ";
  const std::string dom =
      testing::run_command(chromium + "--dump-dom file://" + report_path + " 2> " + dir.path() + "/chromium.log");
  const std::string console = read_file(dir.path() + "/chromium.log");
  EXPECT_EQ(console.find("CONSOLE"), std::string::npos) << console;
  EXPECT_EQ(console.find("Uncaught"), std::string::npos) << console;
  // Five plots, each with at least one drawn path with points in it.
  size_t plots = 0;
  for (size_t at = dom.find("<svg "); at != std::string::npos; at = dom.find("<svg ", at + 1)) ++plots;
  EXPECT_EQ(plots, 5u) << dom;
  const std::regex path("<path class=\"series\" d=\"M[0-9.]+,[0-9.]+ L[0-9.]+,[0-9.]+");
  const auto paths = std::distance(std::sregex_iterator(dom.begin(), dom.end(), path), std::sregex_iterator());
  EXPECT_GE(paths, 1 + 1 + 8 + 1 + 1) << "loss, throughput, 8 breakdown areas, CPU, memory";
  for (const char* title :
       {"Loss and metrics per epoch", "Throughput", "Step time breakdown", "Utilization", "Memory"}) {
    EXPECT_NE(dom.find(title), std::string::npos) << title;
  }
  EXPECT_LT(dom.find("Doctor"), dom.find("Plots")) << "the doctor's findings come first";

  const std::string screenshot = dir.path() + "/report.png";
  testing::run_command(chromium + "--window-size=1400,1600 --screenshot=" + screenshot + " file://" + report_path +
                       " 2> /dev/null");
  // The first series' color (the loss line, the throughput line, the input-wait area) is on screen.
  EXPECT_GT(pixels_near(screenshot, 0x1f77b4), 500) << "the plots did not render in " << screenshot;
}

}  // namespace
}  // namespace nimbus::monitor
