// The HTML report of `loom simulate --report`: escaping of every untrusted string, the
// elements each part draws, byte-identical output, and the CLI's handling of bad paths.
// The browser test (tests/cli/report_browser.py) loads a report in headless Chromium.
#include <doctest/doctest.h>

#include <fmt/format.h>
#include <set>

#include <sys/wait.h>  // WIFEXITED (POSIX)

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>

#include "cli/html_escape.hpp"
#include "cli/report_html.hpp"
#include "common/units.hpp"
#include "models/model_loader.hpp"
#include "tests/cli/cli_run.hpp"
#include "tests/temp_dir.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;

namespace {

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A small llama-style model named `name`, tp 2 x pp 2 x dp 2 on one DGX A100.
struct Simulated {
  models::ModelSpec model;
  models::TrainingPlan plan;
  topo::Cluster cluster;
  strategies::SimulateOptions options;
  strategies::StepReport report;
};

// `tweak` changes the plan or cluster before the step is simulated.
Simulated simulate(const std::string& name, int layers = 8, std::int64_t hidden = 1024,
                   const std::function<void(Simulated&)>& tweak = nullptr) {
  Simulated s;
  s.model = models::load_model("llama3-8b", "--model");
  s.model.name = name;
  s.model.layers = layers;
  s.model.hidden = hidden;
  s.model.heads = 8;
  s.model.kv_heads = 8;
  s.model.head_dim = hidden / 8;
  s.model.ffn = 4 * hidden;
  s.plan.tp = 2;
  s.plan.pp = 2;
  s.plan.dp = 2;
  s.plan.gbs = 8;
  s.plan.seq = 512;
  s.cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, std::nullopt});
  s.options.keep_timeline = true;
  if (tweak) tweak(s);
  s.report = strategies::simulate_step(s.model, s.plan, s.cluster, s.options);
  return s;
}

std::string render(const Simulated& s, const std::string& calibration = "") {
  const strategies::PlanSources sources = strategies::PlanSources::command_line();
  return cli::render_html_report(
      {s.model, s.plan, sources, s.cluster, s.options, s.report, "flow", calibration});
}

struct Run {
  int exit_code;
  std::string err;
};

Run run_loom(const std::string& args, const loom::testing::TempDir& dir) {
  const std::string err_file = dir.file("stderr.txt");
  const std::string cmd = std::string(LOOM_BINARY) + " " + args + " > /dev/null 2> " + err_file;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, loom::testing::read_all(err_file)};
}

const std::string SMALL_RUN =
    "simulate --model gpt-1.7b --cluster dgx-a100 --tp 2 --pp 2 --gbs 8 --seq 512 ";

}  // namespace

TEST_CASE("cli::HtmlEscape: markup characters become entities") {
  CHECK(cli::html_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&#39;");
  CHECK(cli::html_escape("</script><script>") == "&lt;/script&gt;&lt;script&gt;");
}

TEST_CASE("cli::HtmlEscape: valid UTF-8 passes through, invalid bytes become visible") {
  CHECK(cli::html_escape("llama \xc3\xa9\xe2\x86\x92 \xf0\x9f\x90\x91") ==
        "llama \xc3\xa9\xe2\x86\x92 \xf0\x9f\x90\x91");
  CHECK(cli::html_escape("a\xff"
                         "b") == "a\\xffb");
  CHECK(cli::html_escape("\xc3") == "\\xc3");                             // cut-off sequence
  CHECK(cli::html_escape("\xc0\xaf") == "\\xc0\\xaf");                    // overlong '/'
  CHECK(cli::html_escape("\xed\xa0\x80") == "\\xed\\xa0\\x80");           // a UTF-16 surrogate
  CHECK(cli::html_escape("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
}

TEST_CASE("cli::HtmlEscape: control and bidirectional characters become visible escapes") {
  CHECK(cli::html_escape("a\x1b[31mb") == "a\\x1b[31mb");
  CHECK(cli::html_escape(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(cli::html_escape("a\x7f\xc2\x85") == "a\\x7f\\u0085");
  CHECK(cli::html_escape("abc\xe2\x80\xae"
                         "def") == "abc\\u202edef");
  CHECK(cli::html_escape("a\tb\nc") == "a\tb\\x0ac");
  CHECK(cli::html_escape("a\tb\nc", true) == "a\tb\nc");
}

TEST_CASE("cli::HtmlReport: has every part, one timeline block and one memory bar per stage") {
  const Simulated s = simulate("tiny");
  const std::string html = render(s);
  REQUIRE(s.report.stage_ranks.size() == 2);
  for (const char* id :
       {"id=\"summary-table\"", "id=\"timeline-svg\"", "id=\"memory-svg\"", "id=\"memory-table\"",
        "id=\"comm-svg\"", "id=\"comm-table\"", "id=\"plan-table\"", "id=\"config-table\"",
        "id=\"assumptions-table\"", "id=\"ops-table-0\""})
    CHECK_MESSAGE(html.find(id) != std::string::npos, id);
  for (int stage = 0; stage < 2; ++stage) {
    const std::string heading = "stage " + std::to_string(stage) + " (rank " +
                                std::to_string(s.report.stage_ranks[static_cast<size_t>(stage)]) +
                                ")";
    CHECK(count(html, heading) == 1);
  }
  // Five parts per memory bar; compute, tp and dp slices on the timeline.
  CHECK(count(html, "<rect class=\"m-weights\"") == 2);
  CHECK(count(html, "<rect class=\"m-other\"") == 2);
  CHECK(count(html, "<rect class=\"slice c-compute c-forward\"") >= 2);
  CHECK(count(html, "<rect class=\"slice c-compute c-backward\"") >= 2);
  CHECK(count(html, "<rect class=\"slice c-tp\"") >= 2);
  CHECK(count(html, "<rect class=\"slice c-dp\"") >= 2);
  CHECK(html.find("id=\"fit-warning\"") == std::string::npos);
  // The op lists: the embedding, the one kind of layer (8 alike), the head; the layer's
  // matmuls are rows of its table.
  CHECK(html.find("id=\"ops-table-2\"") != std::string::npos);
  CHECK(html.find("id=\"ops-table-3\"") == std::string::npos);
  CHECK(count(html, "layer 0 (dense) × 8") == 1);
  CHECK(count(html, "<tr><td>qkv_proj</td>") == 1);
  // MFU names its peak: bf16 on an A100 (312 TFLOP/s dense, NVIDIA A100 datasheet).
  CHECK(html.find("of the BF16 dense peak (312.0 TFLOP/s per GPU)") != std::string::npos);
  // No network access: nothing is loaded from anywhere.
  CHECK(html.find("http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'") !=
        std::string::npos);
  CHECK(html.find("src=") == std::string::npos);
  CHECK(html.find("url(") == std::string::npos);
  CHECK(html.find("@import") == std::string::npos);
}

TEST_CASE("cli::HtmlReport: every legend button has a style rule that hides its slices") {
  const std::string html = render(simulate("tiny"));
  int buttons = 0;
  const std::string key = "data-toggle=\"";
  for (size_t at = html.find(key); at != std::string::npos; at = html.find(key, at + 1)) {
    const size_t begin = at + key.size();
    const std::string category = html.substr(begin, html.find('"', begin) - begin);
    CAPTURE(category);
    CHECK(html.find(".hide-" + category + " .slice.c-" + category) != std::string::npos);
    ++buttons;
  }
  CHECK(buttons >= 3);  // compute, tp and dp at least
}

// Issue 33: forward, backward, recompute and optimizer in colours of their own, the legend's
// swatches the bars' classes, the plan and cluster in the title.
TEST_CASE("cli::HtmlReport: passes in colours of their own, the legend's equal to the bars'") {
  const Simulated s =
      simulate("tiny", 8, 1024, [](Simulated& x) { x.plan.recompute = models::Recompute::FULL; });
  const std::string html = render(s);
  // Every colour class a timeline bar uses has a swatch of that class in the legend.
  std::set<std::string> bar_classes, swatch_classes;
  const std::string rect = "<rect class=\"slice ";
  for (size_t at = html.find(rect); at != std::string::npos; at = html.find(rect, at + 1)) {
    const size_t begin = at + rect.size();
    std::istringstream classes(html.substr(begin, html.find('"', begin) - begin));
    std::string c;
    std::string last;
    while (classes >> c) last = c;  // the most specific class gives the colour
    bar_classes.insert(last);
  }
  const size_t legend = html.find("id=\"timeline-legend\"");
  REQUIRE(legend != std::string::npos);
  const std::string legend_html = html.substr(legend, html.find("</div>", legend) - legend);
  const std::string swatch = "class=\"swatch ";
  for (size_t at = legend_html.find(swatch); at != std::string::npos;
       at = legend_html.find(swatch, at + 1)) {
    const size_t begin = at + swatch.size();
    swatch_classes.insert(legend_html.substr(begin, legend_html.find('"', begin) - begin));
  }
  for (const std::string& c : bar_classes) CHECK_MESSAGE(swatch_classes.count(c) == 1, c);
  for (const char* pass : {"c-forward", "c-backward", "c-recompute", "c-optimizer"})
    CHECK_MESSAGE(bar_classes.count(pass) == 1, pass);
  // Each colour class has one colour rule, and the four passes' colours differ.
  std::set<std::string> colours;
  for (const char* pass : {"c-forward", "c-backward", "c-recompute", "c-optimizer"}) {
    const size_t rule = html.find(std::string(".") + pass + "{fill:");
    REQUIRE(rule != std::string::npos);
    colours.insert(
        html.substr(rule, html.find(';', rule) - rule).substr(std::string(pass).size() + 7));
  }
  CHECK(colours.size() == 4);
  // The communication chart's legend names no kind's colour for all kinds.
  CHECK(html.find("swatch c-dp\"></span>exposed") == std::string::npos);
  CHECK(html.find("<title>loom simulate: tiny on ") != std::string::npos);
  CHECK(html.find("; tp 2 pp 2 dp 2</title>") != std::string::npos);
  CHECK(html.find("id=\"plan-line\">tp 2 pp 2 dp 2") != std::string::npos);
}

TEST_CASE("cli::HtmlReport: every untrusted string is escaped") {
  const std::string hostile = "<script>alert(1)</script>&\x1b[2J\"'\xff\xe2\x80\xae";
  const Simulated s = simulate(hostile);
  const std::string html = render(s, "prof<ile>.json");
  CHECK(html.find("<script>alert") == std::string::npos);
  CHECK(html.find("&lt;script&gt;alert(1)&lt;/script&gt;&amp;\\x1b[2J&quot;&#39;\\xff\\u202e") !=
        std::string::npos);
  // Only one script element (the report's own) and no raw control or invalid bytes at all.
  CHECK(count(html, "<script") == 1);
  const auto raw = std::count_if(html.begin(), html.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return (c < 0x20 && c != '\n') || c == 0x7f || c == 0xff;
  });
  CHECK(raw == 0);
}

TEST_CASE("cli::HtmlReport: a plan that does not fit says so at the top") {
  // 8 layers of width 16384 (about 4.3e9 parameters each: 4h^2 attention, 3h·4h SwiGLU)
  // over tp 2 x pp 2: over 9e9 parameters per GPU at 18 bytes each (bf16 weights, fp32
  // gradients, fp32 master and two Adam states; models/memory.hpp), far beyond 80 GB.
  const Simulated s = simulate("wide", 8, 16384);
  REQUIRE(s.report.memory.peak_bytes > s.cluster.gpu.hbm_bytes);
  const std::string html = render(s);
  const size_t warning = html.find("id=\"fit-warning\"");
  REQUIRE(warning != std::string::npos);
  CHECK(warning < html.find("id=\"summary-table\""));
  // The simulate table's wording of the misfit (memory_json.hpp misfit_text).
  CHECK(html.find("This plan does NOT fit: stage ") != std::string::npos);
  CHECK(html.find(" but the GPU has 79.15 GiB. The timings below assume it would.") !=
        std::string::npos);
  CHECK(html.find("<g class=\"mem-bar over\">") != std::string::npos);
}

TEST_CASE("cli::HtmlReport: fp32 is said to run as TF32 only where the GPU has TF32 cores") {
  const auto fp32 = [](Simulated& s) { s.plan.precision = models::Precision::FP32; };
  const std::string a100 = render(simulate("tiny", 8, 1024, fp32));
  CHECK(a100.find("fp32: matmuls on tf32 tensor cores (fp32 math runs as TF32)") !=
        std::string::npos);
  // The same GPU without TF32 tensor cores: the kernel model runs fp32 on the fp32 peak.
  const std::string no_tf32 = render(simulate("tiny", 8, 1024, [&](Simulated& s) {
    fp32(s);
    s.cluster.gpu.tf32_flops = 0;
  }));
  CHECK(no_tf32.find("fp32: matmuls on fp32 tensor cores; gradients") != std::string::npos);
  CHECK(no_tf32.find("runs as TF32") == std::string::npos);
}

TEST_CASE("cli::HtmlReport: a hybrid model's pattern and block counts") {
  // examples/models/small-hybrid.json is a hybrid Mamba-2 model: the model table gives its
  // pattern and how many blocks of each kind it holds; a transformer has no such rows.
  const Simulated hybrid = [] {
    Simulated s;
    s.model = models::load_model("examples/models/small-hybrid.json", "--model");
    s.plan.seq = 512;
    s.cluster = topo::load_cluster(topo::ClusterRequest{"dgx-a100", 1, std::nullopt});
    s.plan.dp = s.cluster.num_gpus();
    s.plan.gbs = s.plan.dp;
    s.report = strategies::simulate_step(s.model, s.plan, s.cluster, s.options);
    return s;
  }();
  const auto& m = hybrid.model;
  REQUIRE(m.has_mamba());
  const std::string html = render(hybrid);
  CHECK(html.find("<tr><th>pattern</th><td class=\"text\"><code>" + m.pattern + "</code>") !=
        std::string::npos);
  // MEM*EM-E: 3 Mamba-2, 1 attention, 1 MLP, 3 MoE.
  CHECK(html.find(fmt::format("3 Mamba-2 ({} heads of {}, state {}) · 1 attention · 1 MLP · 3 MoE",
                              m.mamba.heads, m.mamba.head_dim, m.mamba.state)) !=
        std::string::npos);
  CHECK(render(simulate("dense")).find("<tr><th>pattern</th>") == std::string::npos);
}

TEST_CASE("cli::HtmlReport: the kernel model row names what the calibration profile changed") {
  const loom::testing::TempDir dir("report_calibration");
  const auto report = [&](const std::string& profile) {
    const std::string file = dir.file("r.html");
    REQUIRE(run_loom(SMALL_RUN + "--calibration " + profile + " --report " + file, dir).exit_code ==
            0);
    return loom::testing::read_all(file);
  };
  // Fitted factors only (compute_efficiency bf16 0.85, memory_bound_time 1.14, link
  // efficiencies): the datasheet model, scaled; no measured kernel times.
  const std::string factors = report("examples/calibration/fitted_synthetic.json");
  CHECK(factors.find("measured kernel times") == std::string::npos);
  CHECK(factors.find("<tr><th>kernel model</th><td class=\"text\">the datasheet kernel model") !=
        std::string::npos);
  CHECK(factors.find("scaled by the fitted factors of the calibration profile "
                     "examples/calibration/fitted_synthetic.json (bf16 matmul efficiency x0.85") !=
        std::string::npos);
  CHECK(factors.find("memory-bound time x1.14") != std::string::npos);
  // Measured GEMMs and bandwidth, no factors.
  const std::string measured = report("tests/sim/calibration_data/harness_synthetic.json");
  CHECK(measured.find("<tr><th>kernel model</th><td class=\"text\">measured kernel times") !=
        std::string::npos);
  CHECK(measured.find("scaled by the fitted factors") == std::string::npos);
}

TEST_CASE("cli::HtmlReport: the same run writes the same bytes, with or without --trace") {
  const Simulated a = simulate("tiny"), b = simulate("tiny");
  CHECK(render(a) == render(b));
  const loom::testing::TempDir dir("report_rerun");
  const std::string first = dir.file("a.html"), second = dir.file("b.html");
  REQUIRE(run_loom(SMALL_RUN + "--report " + first, dir).exit_code == 0);
  // With --trace beside it the step also lays out each pass's collectives (trace_collectives),
  // which only the trace draws: the report is the same bytes.
  REQUIRE(run_loom(SMALL_RUN + "--report " + second + " --trace " + dir.file("t.json"), dir)
              .exit_code == 0);
  const std::string html = loom::testing::read_all(first);
  CHECK(html.size() > 1000);
  CHECK(html == loom::testing::read_all(second));
}

TEST_CASE("cli::Simulate: a bad --report path is exit 2, one line, before the simulation") {
  const loom::testing::TempDir dir("report_path");
  // The path is checked first: the unknown model would be the error otherwise.
  const std::string too_long(5000, 'a');  // over PATH_MAX: the check itself must not throw
  for (const std::string& path : {dir.file("no/such/dir/r.html"), dir.path().string(), too_long}) {
    const Run r =
        run_loom("simulate --model no-such-model --cluster dgx-a100 --report " + path, dir);
    CHECK(r.exit_code == 2);
    CHECK(r.err.rfind("loom: error: --report: ", 0) == 0);
    CHECK(count(r.err, "\n") == 1);
  }
  const Run empty = run_loom(SMALL_RUN + "--report ''", dir);
  CHECK(empty.exit_code == 2);
  CHECK(empty.err.find("--report: invalid value ''; allowed: a writable file path (the path is "
                       "empty)") != std::string::npos);
  // A path that accepts no bytes (a full disk) fails when written, still exit 2.
  const Run full = run_loom(SMALL_RUN + "--report /dev/full", dir);
  CHECK(full.exit_code == 2);
  CHECK(full.err.rfind("loom: error: --report: invalid value '/dev/full'", 0) == 0);
  CHECK(count(full.err, "\n") == 1);
}

// Issue 33: with many micro-batches and virtual stages (256 x 4 here) the timeline cannot draw
// every pass as a box; it draws each stage by phase, a bounded number of elements, and says
// how idle each stage is and what the pipeline bubble is. A small run keeps its boxes.
TEST_CASE("cli::HtmlReport: many micro-batches draw the timeline by phase, with the bubble") {
  const Simulated s = simulate("many", 8, 1024, [](Simulated& x) {
    x.plan.vpp = 4;
    x.plan.schedule = models::Schedule::INTERLEAVED;
    x.plan.gbs = 512;  // 256 micro-batches of 1 on dp 2
  });
  REQUIRE(s.report.stage_ranks.size() == 2);
  const std::string html = render(s);
  const size_t svg = html.find("<svg id=\"timeline-svg\"");
  REQUIRE(svg != std::string::npos);
  const std::string timeline = html.substr(svg, html.find("</svg>", svg) - svg);
  // Per stage, a box per phase and lane and a bar per kind of work in it: a few hundred
  // elements at most, where the passes alone are 2 x 256 x 4 per stage.
  CHECK(count(timeline, "<rect") < 300);
  CHECK(count(timeline, "<rect class=\"phase\"") >= 2 * 3);
  CHECK(count(timeline, "<rect class=\"slice c-compute c-forward\"") >= 2);
  CHECK(count(timeline, "<rect class=\"slice c-compute c-backward\"") >= 2);
  CHECK(html.find("id=\"phase-note\"") != std::string::npos);
  CHECK(html.find("id=\"phase-table\"") != std::string::npos);
  // The bubble, as the summary states it, and each stage's idle share in its heading.
  CHECK(html.find(fmt::format("Pipeline bubble: {} ({:.1f}% of the ",
                              format_time(s.report.bubble_time_s),
                              100 * s.report.bubble_fraction)) != std::string::npos);
  for (int stage = 0; stage < 2; ++stage) {
    const std::string heading = fmt::format("stage {} (rank {}): compute stream idle ", stage,
                                            s.report.stage_ranks[static_cast<size_t>(stage)]);
    CHECK(count(html, heading) == 1);
  }
  // Each stage's compute lane has its three pipeline phases, each box saying how busy it was.
  std::map<std::string, int> boxes;
  const std::string box = "<rect class=\"phase\"";
  for (size_t at = timeline.find(box); at != std::string::npos; at = timeline.find(box, at + 1)) {
    const size_t title = timeline.find("<title>", at) + 7;
    const std::string text = timeline.substr(title, timeline.find("</title>", title) - title);
    CHECK(text.find("; busy ") != std::string::npos);
    ++boxes[text.substr(0, text.find(':'))];
  }
  for (const char* phase : {"compute warm-up", "compute steady", "compute cool-down"})
    CHECK_MESSAGE(boxes[phase] == 2, phase);

  // A small run: every pass a box of its own, no phase view.
  const std::string small = render(simulate("tiny"));
  CHECK(small.find("id=\"phase-note\"") == std::string::npos);
  CHECK(small.find("<rect class=\"phase\"") == std::string::npos);
  CHECK(count(small, "<rect class=\"slice c-compute c-forward\"") >= 2);
}

// The summary's step bar adds up to the step time: the passes, the bubble, the optimizer and the
// rest, each part a rect whose width is its share of 1,000 units, in its legend's colour.
TEST_CASE("cli::HtmlReport: the step bar adds up to the step time, in its legend's colours") {
  const std::string html = render(simulate("tiny"));
  const size_t svg = html.find("<svg id=\"step-svg\"");
  REQUIRE(svg != std::string::npos);
  const std::string bar = html.substr(svg, html.find("</svg>", svg) - svg);
  const size_t legend_at = html.find("id=\"step-legend\"");
  REQUIRE(legend_at != std::string::npos);
  REQUIRE(legend_at < svg);
  const std::string legend = html.substr(legend_at, svg - legend_at);
  double width = 0;
  int parts = 0;
  const std::string rect = "<rect class=\"";
  for (size_t at = bar.find(rect); at != std::string::npos; at = bar.find(rect, at + 1)) {
    const size_t begin = at + rect.size();
    const std::string css = bar.substr(begin, bar.find('"', begin) - begin);
    CHECK_MESSAGE(legend.find("swatch " + css + "\"") != std::string::npos, css);
    CHECK(html.find("." + css + "{fill:") != std::string::npos);
    const size_t w = bar.find("width=\"", at) + 7;
    width += std::stod(bar.substr(w, bar.find('"', w) - w));
    ++parts;
  }
  CHECK(parts == 4);  // tp 2 pp 2 dp 2: passes, a bubble, the optimizer, the gradient all-reduce
  CHECK(width == doctest::Approx(1000).epsilon(0.002));
  CHECK(bar.find("<title>pipeline bubble") != std::string::npos);
}
