// The HTML report document: head (inline style, a content-security policy that forbids any
// network access), the summary, the drawn parts (report_timeline.cpp, report_charts.cpp),
// the plan, the resolved configuration and the assumptions, and a few lines of script
// (legend buttons hide a category of slices).
#include "cli/report_html.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "cli/html_escape.hpp"
#include "cli/memory_json.hpp"
#include "cli/plan_text.hpp"
#include "cli/report_parts.hpp"
#include "cli/simulate_output.hpp"
#include "common/document.hpp"
#include "common/strings.hpp"
#include "common/units.hpp"
#include "common/version.hpp"
#include "models/plan_dtypes.hpp"
#include "sim/network.hpp"
#include "strategies/plan/framework_profile.hpp"
#include "strategies/plan/plan_json.hpp"
#include "topologies/kernel_model.hpp"

namespace loom::cli {
namespace {

constexpr const char* STYLE = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:1.5em auto;max-width:1300px;padding:0 1em;color:#222;background:#fff}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
nav a{margin-right:1em}.sub{color:#555;margin-top:0}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ddd;padding:.2em .6em;text-align:right}
th:first-child,td:first-child{text-align:left}td.text{text-align:left}
thead th{background:#f3f3f3}.ok{color:#1a7f37}.bad{color:#c62828;font-weight:bold}
.warning{background:#fdecea;border:1px solid #c62828;padding:.5em .8em;font-weight:bold}
.note{color:#555;font-size:.9em;max-width:75em}pre{background:#f6f6f6;padding:.6em;overflow:auto}
svg{display:block;margin:.4em 0;font-size:11px}svg text{fill:#222}
.tick,.limit-label{text-anchor:middle;fill:#555}.stage{font-weight:bold}
.grid{stroke:#e4e4e4}.marker{stroke:#555;stroke-dasharray:4 3;stroke-width:1.5}
.limit{stroke:#c62828;stroke-dasharray:5 3;stroke-width:1.5}.limit-label{fill:#c62828}
.over .value{fill:#c62828;font-weight:bold}
.legend{margin:.3em 0;font-size:.9em}.legend span,.legend button{margin-right:1em}
.legend button{border:1px solid #ccc;background:#fafafa;border-radius:3px;cursor:pointer;padding:.1em .5em}
.legend button.off{opacity:.4;text-decoration:line-through}
.swatch{display:inline-block;width:.9em;height:.9em;margin-right:.3em;vertical-align:-.1em}
.c-compute{fill:#4e79a7;background:#4e79a7}.c-optimizer{fill:#76b7b2;background:#76b7b2}
.c-tp{fill:#f28e2b;background:#f28e2b}.c-cp{fill:#edc948;background:#edc948}
.c-ep{fill:#b07aa1;background:#b07aa1}.c-pp{fill:#59a14f;background:#59a14f}
.c-dp{fill:#e15759;background:#e15759}.c-forward{fill:#4e79a7;background:#4e79a7}
.c-backward{fill:#1f4e79;background:#1f4e79}.c-recompute{fill:#9ecae9;background:#9ecae9}
.c-weight-gradients{fill:#2c7fb8;background:#2c7fb8}.c-bubble{fill:#d0d0d0;background:#d0d0d0}.c-neutral{fill:#777;background:#777}.c-offload{fill:#ff9da7;background:#ff9da7}.overlapped{opacity:.35}
.m-weights{fill:#4e79a7;background:#4e79a7}.m-gradients{fill:#f28e2b;background:#f28e2b}
.m-optimizer{fill:#59a14f;background:#59a14f}.m-activations{fill:#b07aa1;background:#b07aa1}
.m-other{fill:#9c9c9c;background:#9c9c9c}
)";

// Every category the timeline draws gets a rule that hides its slices under body.hide-<name>
// (what its legend button toggles).
std::string hide_style() {
  std::string out;
  for (strategies::TraceCategory c : report::TIMELINE_CATEGORIES)
    out += fmt::format("{0}.hide-{1} .slice.c-{1}", out.empty() ? "" : ",", to_string(c));
  return out + "{display:none}\n";
}

constexpr const char* SCRIPT = R"(
(function () {
  var buttons = document.querySelectorAll('#timeline-legend button[data-toggle]');
  for (var i = 0; i < buttons.length; ++i) {
    buttons[i].addEventListener('click', function (event) {
      var button = event.currentTarget;
      document.body.classList.toggle('hide-' + button.getAttribute('data-toggle'));
      button.classList.toggle('off');
    });
  }
  document.body.setAttribute('data-loom-ready', '1');
})();
)";

// "tp 8 pp 4 dp 8" (cp and ep when above 1), for the page's title.
std::string plan_short(const models::TrainingPlan& p) {
  std::string out = fmt::format("tp {} pp {} dp {}", p.tp, p.pp, p.dp);
  if (p.cp > 1) out += fmt::format(" cp {}", p.cp);
  if (p.ep > 1) out += fmt::format(" ep {}", p.ep);
  return out;
}

std::string esc(std::string_view text) {
  return html_escape(text);
}

std::string row(std::string_view key, std::string_view value_html) {
  return fmt::format("<tr><th>{}</th><td class=\"text\">{}</td></tr>\n", key, value_html);
}

// The step time as one bar that adds up to it: the forward and backward passes of the least
// idle stage (with the collectives that block its compute stream), its pipeline bubble, then
// what follows the last pass (the optimizer step, the rest: data-parallel work the passes did
// not hide), each in the timeline's colour for it, with a legend.
std::string step_bar_html(const strategies::StepReport& r) {
  const double step = r.step_time_s;
  if (!(step > 0) || !std::isfinite(step)) return "";
  const double pipeline = std::clamp(r.pipeline_time_s, 0.0, step);
  const double bubble = std::clamp(r.bubble_time_s, 0.0, pipeline);
  const double after = step - pipeline;
  const double optimizer = std::clamp(r.optimizer_time_s, 0.0, after);
  struct Part {
    const char* css;
    const char* name;  // in the legend
    const char* what;  // in the tooltip
    double seconds;
  };
  const Part parts[] = {
      {"c-compute", "passes",
       "forward and backward passes with their blocking communication (the least idle stage)",
       pipeline - bubble},
      {"c-bubble", "pipeline bubble", "pipeline bubble (the least idle stage's idle time)", bubble},
      {"c-optimizer", "optimizer", "optimizer step", optimizer},
      {"c-dp", "other",
       "after the last pass, besides the optimizer: data-parallel work and the rest",
       after - optimizer}};
  constexpr double WIDTH = 1000, HEIGHT = 22;
  std::string bar, legend;
  double x = 0;
  for (const Part& p : parts) {
    if (!(p.seconds > 0)) continue;
    const double w = WIDTH * p.seconds / step;
    const std::string share =
        fmt::format("{} ({:.1f}%)", format_time(p.seconds), 100 * p.seconds / step);
    bar += fmt::format(
        "<rect class=\"{}\" x=\"{}\" y=\"0\" width=\"{}\" height=\"{}\"><title>{}: {}</title>"
        "</rect>\n",
        p.css, report::num(x), report::num(std::max(w, 0.8)), report::num(HEIGHT), p.what, share);
    legend +=
        fmt::format("<span><span class=\"swatch {}\"></span>{} {}</span>", p.css, p.name, share);
    x += w;
  }
  return fmt::format(
      "<div class=\"legend\" id=\"step-legend\">step time {}: {}</div>\n<svg id=\"step-svg\" "
      "xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" "
      "role=\"img\" aria-label=\"where the step time went\">\n{}</svg>\n",
      format_time(step), legend, report::num(WIDTH), report::num(HEIGHT), report::num(WIDTH),
      report::num(HEIGHT), bar);
}

std::string summary_html(const ReportInputs& in) {
  const strategies::StepReport& r = in.report;
  const double cap = in.cluster.gpu.hbm_bytes;
  std::string out;
  const std::string misfit = misfit_text(r.memory, cap);
  if (!misfit.empty()) {
    out += fmt::format(
        "<p class=\"warning\" id=\"fit-warning\">This plan does NOT fit: {}. The timings below "
        "assume it would.</p>\n",
        esc(misfit));
  }
  out += "<table id=\"summary-table\">\n";
  for (const auto& [name, value] : metric_rows(in.plan, r)) out += row(name, esc(value));
  out += row("optimizer step", format_time(r.optimizer_time_s));
  out += row("peak memory per GPU",
             fmt::format("{} of {} ({})", format_bytes(r.memory.peak_bytes), format_bytes(cap),
                         misfit.empty() ? "fits" : "does NOT fit"));
  out += "</table>\n";
  out += step_bar_html(r);
  // The error bands (docs/simulate.md "Error bands").
  out += "<table id=\"band-table\">\n";
  for (const auto& line : band_lines(simulate_bands(in.model, in.plan, in.cluster), r))
    out += row("80% band", esc(line));
  return out + "</table>\n";
}

std::string plan_html(const models::TrainingPlan& p) {
  std::string out = "<table id=\"plan-table\">\n";
  out += row("parallelism",
             fmt::format("tp {} · pp {} · dp {} · cp {} · ep {}{}{}", p.tp, p.pp, p.dp, p.cp, p.ep,
                         p.vpp > 1 ? fmt::format(" · vpp {}", p.vpp) : "", p.sp ? " · sp" : ""));
  out += row("GPUs", std::to_string(p.gpus()));
  out += row(
      "batch",
      fmt::format("micro-batch {} · global batch {} · {} micro-batch{} per step · seq {}", p.mbs,
                  p.global_batch(), p.micro_batches(), p.micro_batches() == 1 ? "" : "es", p.seq));
  out += row("schedule", models::to_string(p.schedule));
  out += row(
      "precision",
      fmt::format("{}{}{} (gradients in {})", models::to_string(p.precision),
                  p.fp8_recipe ? fmt::format(", {} recipe", loom::to_string(*p.fp8_recipe)) : "",
                  p.scale_swizzle ? ", scale swizzles" : "", models::to_string(p.grad_dtype)));
  out += row("optimizer", fmt::format("{} · ZeRO {}", models::to_string(p.optimizer), p.zero));
  out += row("recompute", models::to_string(p.recompute));
  out += row("CUDA graphs",
             p.cuda_graphs ? models::graph_scope_text(p.cuda_graph_scope) : std::string("off"));
  out += row("overlap",
             fmt::format("grad reduce {} · param gather {} · tp comm {} · ep all-to-all {}",
                         p.overlap_grad_reduce ? "on" : "off",
                         p.overlap_param_gather ? "on" : "off", p.tp_comm_overlap ? "on" : "off",
                         p.overlap_moe_expert_parallel_comm ? "on" : "off"));
  out += row("framework", models::to_string(p.framework));
  return out + "</table>\n";
}

std::string configuration_html(const ReportInputs& in) {
  std::string out =
      "<h3>Plan, every field</h3>\n<table id=\"config-table\">\n<thead><tr><th>field</"
      "th><th>value</th><th>from</th></tr></thead>\n<tbody>\n";
  const OrderedJson fields = strategies::plan_to_json(in.plan);
  for (const auto& [key, value] : fields.items()) {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    out += fmt::format("<tr><td>{}</td><td class=\"text\">{}</td><td class=\"text\">{}</td></tr>\n",
                       esc(key), esc(text),
                       in.sources.has(key) ? esc(in.sources.where(key)) : "flag or default");
  }
  out += "</tbody>\n</table>\n<h3>Model</h3>\n<table id=\"model-table\">\n";
  const models::ModelSpec& m = in.model;
  out += row("name", esc(m.name));
  out += row("kind", models::to_string(m.kind));
  out += row("parameters", fmt::format("{:.3f} B", in.report.memory.parameters / 1e9));
  out += row("shape", fmt::format("{} layers · hidden {} · {} heads ({} kv) · ffn {} · vocab {}",
                                  m.layers, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab));
  if (m.has_mamba()) {
    // A hybrid's blocks: Mamba-2 mixers, attention, MLP and MoE layers in pattern order.
    const auto count = [&](char c) { return std::count(m.pattern.begin(), m.pattern.end(), c); };
    out += row("pattern", fmt::format("<code>{}</code>", esc(m.pattern)));
    out += row("blocks", fmt::format("{} Mamba-2 ({} heads of {}, state {}) · {} attention · {} "
                                     "MLP · {} MoE",
                                     count('M'), m.mamba.heads, m.mamba.head_dim, m.mamba.state,
                                     count('*'), count('-'), count('E')));
  }
  if (m.is_moe())
    out += row("experts", fmt::format("{} routed, top {}", m.moe.experts, m.moe.top_k));
  out += "</table>\n<h3>Cluster</h3>\n<table id=\"cluster-table\">\n";
  const topo::GpuSpec& g = in.cluster.gpu;
  out += row("name", esc(in.cluster.name));
  out += row("GPUs", fmt::format("{} × {}", in.cluster.num_gpus(), esc(g.display_name)));
  out += row("GPU memory", format_bytes(g.hbm_bytes));
  out += row("HBM bandwidth", format_bandwidth(g.hbm_bandwidth_Bps));
  return out + "</table>\n";
}

// The fitted factors that differ from 1: "bf16 matmul efficiency x0.85, memory-bound time
// x1.10".
std::string scales_text(const topo::KernelScales& s) {
  std::vector<std::string> parts;
  for (int i = 0; i < topo::DTYPE_COUNT; ++i) {
    const double x = s.compute[static_cast<size_t>(i)];
    if (x != 1)
      parts.push_back(fmt::format("{} matmul efficiency x{:.2f}", to_string(DType(i)), x));
  }
  if (s.memory_bound != 1)
    parts.push_back(fmt::format("memory-bound time x{:.2f}", s.memory_bound));
  return parts.empty() ? "all 1" : join(parts, ", ");
}

std::string kernel_model_text(const ReportInputs& in) {
  const KernelCalibration& used = in.kernel_calibration;
  const std::string scaled =
      used.scales ? fmt::format("; scaled by the fitted factors of the calibration profile {} ({})",
                                esc(in.calibration), scales_text(*used.scales))
                  : "";
  if (used.measured) {
    return fmt::format(
        "measured kernel times from the calibration profile {} (GEMMs at measured shapes, "
        "memory-bound work at the measured bandwidth; attention and unmeasured dtypes from the "
        "datasheet model){}",
        esc(in.calibration), scaled);
  }
  const topo::DatasheetKernelModel k(in.cluster.gpu, in.options.efficiency);
  const DType math = models::compute_dtype(in.plan.precision);
  const topo::GpuEfficiency& e = k.efficiency();
  return fmt::format(
      "the datasheet kernel model (topologies/kernel_model.hpp) of the {} ({}), default "
      "coefficients: large GEMMs at {} of the dense {} peak, fused attention at {}, "
      "memory-bound kernels at {} of HBM bandwidth, {} per kernel launch, sustained clock {} "
      "of boost{}",
      esc(in.cluster.gpu.display_name), esc(in.cluster.gpu.source),
      format_percent(k.gemm_fraction(math)), to_string(k.peak_dtype(math)),
      format_percent(k.attention_fraction()), format_percent(e.memory_bandwidth_fraction),
      format_time(e.kernel_overhead_s), format_percent(k.clock_fraction()), scaled);
}

std::string network_text(const std::string& name) {
  for (const auto& [mode, description] : sim::network_modes())
    if (mode == name) return fmt::format("{}: {}", esc(mode), esc(description));
  return esc(name);
}

std::string assumptions_html(const ReportInputs& in) {
  const models::TrainingPlan& p = in.plan;
  const strategies::FrameworkProfile& fw = strategies::framework_profile(p.framework);
  std::string out = "<table id=\"assumptions-table\">\n";
  out += row("framework profile",
             p.framework == models::Framework::NONE
                 ? std::string("none: loom's own defaults (Megatron-LM's with its flags off)")
                 : fmt::format("{}: defaults for choices the plan leaves unset, read from {}; "
                               "explicit flags win (docs/defaults.md)",
                               models::to_string(p.framework), esc(fw.source)));
  out += row("kernel model", kernel_model_text(in));
  // The tensor cores the kernel model runs the matmuls on (a GPU without the plan's dtype
  // runs it on wider ones): the same dtype MFU is measured against.
  out +=
      row("precision",
          fmt::format("{}: matmuls on {} tensor cores{}; gradients accumulate in {}",
                      models::to_string(p.precision), to_string(in.report.peak_dtype),
                      p.precision == models::Precision::FP32 && in.report.peak_dtype == DType::TF32
                          ? " (fp32 math runs as TF32)"
                          : "",
                      models::to_string(p.grad_dtype)));
  out += row("MFU and HFU against",
             fmt::format("the dense (non-sparse) {} peak of one {}: {}; model FLOPs leave "
                         "recompute out, hardware FLOPs count it",
                         to_string(in.report.peak_dtype), esc(in.cluster.gpu.display_name),
                         format_flop_rate(in.report.peak_flops)));
  out += row("network", network_text(in.network));
  out += row("simulated GPUs",
             fmt::format("{} ({})", in.report.simulated_gpus,
                         in.options.full ? "full: every GPU"
                                         : "symmetric: one GPU per distinct role (pipeline "
                                           "stage, GPU type, straggler factor, data-parallel "
                                           "design), its peers as concurrent traffic"));
  out += row("collectives",
             (in.options.collective_override
                  ? fmt::format("measured times from {} where they cover a collective, the "
                                "flow-level model elsewhere",
                                esc(in.calibration))
              : in.options.nccl_tuning.nvls_efficiency > 0  // set only by a fitted network
                  ? fmt::format("the flow-level cost of each collective's lowered schedule, "
                                "with the network parameters fitted in {}",
                                esc(in.calibration))
                  : std::string("the flow-level cost of each collective's lowered schedule")) +
                 (in.options.collective_time_scale != 1
                      ? fmt::format("; modelled times x{:.2f}, the fitted factor of the "
                                    "calibration profile {}",
                                    in.options.collective_time_scale, esc(in.calibration))
                      : ""));
  out +=
      row("memory capacity",
          fmt::format("{}, the datasheet HBM size; \"other\" holds the CUDA context ({}), "
                      "communication buffers and the allocator's fragmentation reserve; "
                      "ZeRO-3 gather buffers count as weights",
                      format_bytes(in.cluster.gpu.hbm_bytes), format_bytes(p.cuda_context_bytes)));
  return out + "</table>\n";
}

std::string section(const char* id, const char* title, const std::string& note,
                    const std::string& content) {
  return fmt::format("<section id=\"{}\">\n<h2>{}</h2>\n{}{}</section>\n", id, title,
                     note.empty() ? "" : fmt::format("<p class=\"note\">{}</p>\n", note), content);
}

}  // namespace

std::string render_html_report(const ReportInputs& in) {
  const std::string subject =
      fmt::format("{} on {} ({} × {})", esc(in.model.name), esc(in.cluster.name),
                  in.cluster.num_gpus(), esc(in.cluster.gpu.name));
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'; script-src 'unsafe-inline'\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      "<meta name=\"generator\" content=\"loom {0}\">\n<title>loom simulate: {1}; {4}</title>\n"
      "<style>{2}{3}</style>\n</head>\n<body>\n",
      VERSION, subject, STYLE, hide_style(), esc(plan_short(in.plan)));
  out += fmt::format(
      "<header>\n<h1>loom simulate: {}</h1>\n<p class=\"sub\" id=\"plan-line\">{}</p>\n"
      "<p class=\"sub\">one training step, {} network, loom {}</p>\n<nav><a "
      "href=\"#timeline\">timeline</a><a href=\"#memory\">memory</a><a "
      "href=\"#communication\">communication</a><a href=\"#ops\">ops</a><a "
      "href=\"#plan\">plan</a><a "
      "href=\"#configuration\">configuration</a><a href=\"#assumptions\">assumptions</a></nav>\n"
      "</header>\n",
      subject, esc(plan_summary(in.plan)), esc(in.network), VERSION);
  out += section("summary", "Summary", "", summary_html(in));
  out += section("timeline", "Step timeline",
                 "The representative GPU of each pipeline stage, one lane per stream; the "
                 "blocking tensor-, context- and expert-parallel collectives on the compute "
                 "stream have lanes of their own. Hover a slice for its name and times; "
                 "neighbours closer than half a pixel are drawn as one. The dashed line is the "
                 "end of the last forward/backward pass; data-parallel work and the optimizer "
                 "follow it.",
                 report::timeline_html(in.report));
  out += section("memory", "Memory per GPU",
                 "One GPU of each pipeline stage at its peak, against the GPU's capacity "
                 "(dashed).",
                 report::memory_html(in.report.memory, in.cluster.gpu.hbm_bytes));
  out += section("communication", "Communication",
                 "Busy time per GPU and step, mean over stages. Exposed: tensor-, context- and "
                 "expert-parallel collectives block the compute stream (all exposed, except "
                 "what tp comm overlap hides); data-parallel time counts as exposed while the "
                 "compute stream is idle; pipeline transfers overlap, their waits are the "
                 "bubble.",
                 report::comm_html(in.report));
  out += section(
      "ops", "Where a layer's time goes",
      "Every op of each distinct op list (the embedding, each kind of layer, the "
      "head) for one micro-batch on one GPU, as the pass costing times it before "
      "the engine schedules it; collectives by size only (the timeline has their "
      "times). What <code>loom simulate --ops</code> prints.",
      report::ops_html(strategies::op_breakdown(in.model, in.plan, in.cluster, in.options)));
  out += section("plan", "Plan", "", plan_html(in.plan));
  out += section("configuration", "Resolved configuration",
                 "Every plan field after defaults, framework profile and imports; what "
                 "<code>--print-config --format json</code> prints.",
                 configuration_html(in));
  out += section("assumptions", "Assumptions", "", assumptions_html(in));
  out += fmt::format("<script>{}</script>\n</body>\n</html>\n", SCRIPT);
  return out;
}

}  // namespace loom::cli
