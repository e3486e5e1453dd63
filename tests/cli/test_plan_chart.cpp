// `loom plan --chart` writes an SVG: the same bytes for any thread count, a days line per GPU
// type with a fitting configuration, a dashed cost line per priced type, the --days choice
// ringed; its text escaped as HTML. Runs the loom binary.
#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/plan_chart.hpp"
#include "tests/temp_dir.hpp"

namespace {

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string plan(const std::string& chart, int threads) {
  return std::string(LOOM_BINARY) +
         " plan --model examples/models/tiny-gpt.json --tokens 1T --gpu a100 h100 --gpus 8 16 "
         "--gbs 16 --seq 1024 --price a100=1.5 h100=2.2 --days 7 --threads " +
         std::to_string(threads) + " --chart " + chart + " > /dev/null";
}

}  // namespace

TEST_CASE("cli::Plan: the chart is deterministic SVG with days and cost per GPU type") {
  const loom::testing::TempDir dir("plan_chart");
  const std::string one = dir.file("one.svg"), two = dir.file("two.svg");
  REQUIRE(std::system(plan(one, 1).c_str()) == 0);
  REQUIRE(std::system(plan(two, 2).c_str()) == 0);
  const std::string svg = read(one);
  CHECK(svg == read(two));
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(svg.find("</svg>\n") == svg.size() - 7);
  CHECK(count(svg, "<polyline") == 4);                 // days and cost, a100 and h100
  CHECK(count(svg, "stroke-dasharray=\"6 4\"") == 2);  // the two cost lines
  CHECK(count(svg, "r=\"8\"") == 1);                   // the --days choice, ringed
  CHECK(count(svg, "class=\"chosen-label\">chosen: ") == 1);
  CHECK(count(svg, "class=\"days-limit\"") == 1);  // --days 7 drawn
  CHECK(svg.find(">--days 7</text>") != std::string::npos);
  CHECK(svg.find(">a100</text>") != std::string::npos);
  CHECK(svg.find(">h100</text>") != std::string::npos);
}

TEST_CASE("cli::Plan: an unwritable chart path is bad input") {
  const std::string cmd = plan("/nonexistent-dir/x.svg", 1) + " 2> /dev/null";
  const int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 2);
}

TEST_CASE("cli::PlanChart: the title and GPU type names are escaped as HTML text") {
  // A cluster file's name is the user's: quotes, markup and control bytes come out inert.
  loom::cli::ChartSeries series;
  series.name = "it's<b>\x1b";
  series.days = {{8, 3.0}, {16, 1.6}};
  const std::string svg =
      loom::cli::render_plan_chart("a \"model\" & more", {series}, std::nullopt);
  CHECK(svg.find(">it&#39;s&lt;b&gt;\\x1b</text>") != std::string::npos);
  CHECK(svg.find(">a &quot;model&quot; &amp; more</text>") != std::string::npos);
  CHECK(svg.find('\x1b') == std::string::npos);
}

// Issue 33: the chosen point labelled, the --days limit drawn, GPU counts where nothing fits
// shown as such, thousands separators on the axes.
TEST_CASE("cli::PlanChart: the choice, the limit and the infeasible counts are drawn") {
  loom::cli::ChartSeries h100;
  h100.name = "h100";
  h100.days = {{1024, 3000.0}, {2048, 1500.0}, {4096, 800.0}};
  h100.infeasible = {256, 512};
  loom::cli::ChartSeries b200;
  b200.name = "b200";
  b200.infeasible = {256};  // no point fits: no line, but its crosses are shown
  const std::string svg =
      loom::cli::render_plan_chart("t", {h100, b200}, std::make_pair(std::size_t{0}, 2048.0), 2000);
  CHECK(count(svg, "class=\"infeasible\"") == 3);
  CHECK(svg.find("512 × h100: no plan fits or finishes") != std::string::npos);
  CHECK(svg.find("chosen: 2,048 × h100, 1,500 days") != std::string::npos);
  CHECK(svg.find(">--days 2,000</text>") != std::string::npos);
  CHECK(svg.find(">4,096</text>") != std::string::npos);  // GPU axis
  CHECK(svg.find(">1,000</text>") != std::string::npos);  // days axis
  CHECK(count(svg, "<polyline") == 1);
}
