#include "sim/calibration/kernel_fit_profile.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "common/error.hpp"
#include "common/json_util.hpp"
#include "common/strings.hpp"
#include "common/table.hpp"
#include "common/units.hpp"

namespace loom::calibration {
namespace {

// The deviation of ln(time) a harness row's interquartile spread implies: a normal
// distribution's IQR is 1.349 standard deviations.
constexpr double IQR_PER_SIGMA = 1.349;
// Floor of a sample's deviation: clocks, L2 state and the heuristic's algorithm move a
// repeated kernel's median by about 2% between runs of the same sweep.
constexpr double MIN_SIGMA = 0.02;
// Trace GEMM records: timed inside a training step (warm L2, other streams running), no
// spread recorded; weighted as 5% so the controlled harness sweep dominates where both exist.
constexpr double TRACE_SIGMA = 0.05;

double sigma_of(const std::optional<double>& spread) {
  return std::max(spread ? *spread / IQR_PER_SIGMA : 0.0, MIN_SIGMA);
}

std::optional<topo::DType> trace_dtype(const std::string& dtype) {
  if (dtype == "bf16") return topo::DType::BF16;
  if (dtype == "fp16") return topo::DType::FP16;
  if (dtype == "fp8") return topo::DType::FP8;
  return std::nullopt;  // fp32 may run on TF32 or FP32 cores: the trace does not say which
}

topo::LaunchFigures read_launch(const std::string& text, const std::string& origin) {
  topo::LaunchFigures out;
  if (text.empty()) return out;
  const nlohmann::json rows = nlohmann::json::parse(text);
  if (!rows.is_array())
    throw ConfigError::bad_value(origin, "/launch", json_excerpt(rows), "an array of launch rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    ObjectReader r(rows[i], origin, fmt::format("/launch/{}", i));
    const std::string what = r.get_string("what");
    const double us = r.get_number("time_us");
    if (!(us > 0) || !std::isfinite(us)) r.fail("time_us", fmt::format("{}", us), "a time > 0");
    if (what == "eager_host") out.eager_host_s = us * 1e-6;
    if (what == "eager_back_to_back") out.eager_back_to_back_s = us * 1e-6;
    if (what == "graph_back_to_back") out.graph_back_to_back_s = us * 1e-6;
  }
  return out;
}

// The `attention` rows: {"batch", "heads", "head_dim", "seq", "causal", "kernel" ("fa2" or
// "vendor"), "forward_us", "backward_us" (optional), "spread" (optional)}.
std::vector<topo::AttentionSample> read_attention(const std::string& text,
                                                  const std::string& origin) {
  std::vector<topo::AttentionSample> out;
  if (text.empty()) return out;
  const nlohmann::json rows = nlohmann::json::parse(text);
  if (!rows.is_array())
    throw ConfigError::bad_value(origin, "/attention", json_excerpt(rows),
                                 "an array of attention rows");
  for (size_t i = 0; i < rows.size(); ++i) {
    ObjectReader r(rows[i], origin, fmt::format("/attention/{}", i));
    topo::AttentionSample a;
    a.batch = r.get_int_in_range("batch", 1, 1 << 20);
    a.heads = r.get_int_in_range("heads", 1, 1 << 16);
    a.head_dim = r.get_int_in_range("head_dim", 1, 1 << 12);
    a.seq = r.get_int_in_range("seq", 1, std::int64_t{1} << 24);
    a.causal = r.get_bool_or("causal", true);
    const std::string kernel = r.get_string_or("kernel", "fa2");
    if (kernel != "fa2" && kernel != "vendor") r.fail("kernel", kernel, "\"fa2\" or \"vendor\"");
    a.kernel = kernel == "fa2" ? topo::AttentionKernel::FA2 : topo::AttentionKernel::VENDOR;
    const auto time = [&](const char* key) {
      const double us = r.get_number(key);
      if (!(us > 0) || !std::isfinite(us)) r.fail(key, fmt::format("{}", us), "a time > 0");
      return us * 1e-6;
    };
    a.forward_s = time("forward_us");
    if (r.has("backward_us")) a.backward_s = time("backward_us");
    a.sigma =
        sigma_of(r.has("spread") ? std::optional<double>(r.get_number("spread")) : std::nullopt);
    a.source = fmt::format("attention/{}", i);
    out.push_back(a);
  }
  return out;
}

}  // namespace

ProfileKernelSamples profile_kernel_samples(const Profile& profile, const std::string& origin) {
  ProfileKernelSamples out;
  for (size_t i = 0; i < profile.gemms.size(); ++i) {
    const GemmPoint& g = profile.gemms[i];
    out.samples.gemms.push_back(
        {g.dtype, g.m, g.n, g.k, 1, g.seconds, sigma_of(g.spread), fmt::format("gemm/{}", i)});
    out.raw.push_back({g.dtype, g.m, g.n, g.k, g.seconds});
  }
  int skipped = 0;
  for (const TraceSummary& t : profile.traces) {
    for (const GemmFigure& g : t.gemms) {
      const auto dtype = trace_dtype(g.dtype);
      if (!dtype || g.calls <= 0 || !(g.seconds > 0) || g.m <= 0 || g.n <= 0 || g.k <= 0 ||
          g.batch <= 0) {
        ++skipped;
        continue;
      }
      out.samples.gemms.push_back({*dtype, g.m, g.n, g.k, g.batch, g.seconds / g.calls, TRACE_SIGMA,
                                   fmt::format("{} {}", t.source, g.op)});
    }
  }
  if (skipped > 0)
    out.notes.push_back(fmt::format(
        "{} trace GEMM record(s) not fitted (fp32, whose tensor cores the trace does not name)",
        skipped));
  for (const char* kernel : {"elementwise", "copy"}) {
    for (size_t i = 0; i < profile.memory.size(); ++i) {
      const MemoryPoint& m = profile.memory[i];
      if (m.kernel == kernel)
        out.samples.memory.push_back(
            {m.bytes, m.seconds, sigma_of(m.spread), fmt::format("memory/{} {}", i, kernel)});
    }
    if (!out.samples.memory.empty()) break;
  }
  out.samples.launch = read_launch(profile.launch_json, origin);
  out.samples.attention = read_attention(profile.attention_json, origin);
  return out;
}

bool has_kernel_samples(const Profile& profile) {
  if (!profile.gemms.empty() || !profile.launch_json.empty() || !profile.attention_json.empty())
    return true;
  for (const MemoryPoint& m : profile.memory)
    if (m.kernel == "elementwise" || m.kernel == "copy") return true;
  for (const TraceSummary& t : profile.traces)
    for (const GemmFigure& g : t.gemms)
      if (trace_dtype(g.dtype)) return true;
  return false;
}

topo::KernelFit fit_profile_kernels(const Profile& profile, const std::string& origin,
                                    const topo::GpuSpec& gpu, const topo::GpuEfficiency& prior) {
  ProfileKernelSamples s = profile_kernel_samples(profile, origin);
  topo::KernelFit fit = topo::fit_kernels(gpu, prior, s.samples);
  fit.notes.insert(fit.notes.begin(), s.notes.begin(), s.notes.end());
  return fit;
}

std::shared_ptr<const topo::KernelTimeModel> fitted_kernel_model(const Profile& profile,
                                                                 const std::string& origin,
                                                                 const topo::GpuSpec& gpu,
                                                                 const topo::GpuEfficiency& prior,
                                                                 KernelFitUse& use) {
  ProfileKernelSamples s = profile_kernel_samples(profile, origin);
  const topo::KernelFit fit = topo::fit_kernels(gpu, prior, s.samples);
  auto model = std::make_shared<topo::FittedKernelModel>(gpu, fit, s.raw);
  use = {};
  for (topo::DType d : {topo::DType::TF32, topo::DType::BF16, topo::DType::FP16, topo::DType::FP8})
    (model->gemm_fitted(d) ? use.fitted : use.defaults)
        .push_back(fmt::format("{} GEMMs", to_string(d)));
  const bool memory = !s.samples.memory.empty();
  (memory ? use.fitted : use.defaults)
      .push_back("memory-bound kernels (elementwise, normalisation, FP8 casts, optimizer)");
  (s.samples.gemms.empty() && !memory ? use.defaults : use.fitted).push_back("per-kernel overhead");
  (fit.graph_saving_s ? use.fitted : use.defaults).push_back("CUDA-graph launch saving");
  (s.samples.attention.empty() ? use.defaults : use.fitted).push_back("fused attention");
  if (!s.raw.empty())
    use.measured.push_back(
        fmt::format("lone stream-launched GEMMs at the {} measured harness shapes", s.raw.size()));
  return model;
}

OrderedJson kernel_fit_use_json(const KernelFitUse& use) {
  OrderedJson j;
  j["fitted"] = use.fitted;
  j["defaults"] = use.defaults;
  j["measured"] = use.measured;
  return j;
}

std::string kernel_fit_use_text(const KernelFitUse& use) {
  const auto list = [](const std::vector<std::string>& v) {
    return v.empty() ? std::string("none") : join(v, ", ");
  };
  return fmt::format("kernels with fitted parameters: {}; with defaults: {}; as measured: {}",
                     list(use.fitted), list(use.defaults), list(use.measured));
}

std::optional<topo::GpuSpec> profile_gpu(const Profile& profile, const std::string& gpu) {
  if (!gpu.empty()) return topo::load_gpu(gpu, "--gpu");
  std::string name;
  if (!profile.device_json.empty()) {
    const nlohmann::json d = nlohmann::json::parse(profile.device_json);
    if (d.is_object() && d.contains("name") && d["name"].is_string())
      name = d["name"].get<std::string>();
  }
  if (name.empty() && !profile.traces.empty()) name = profile.traces.front().gpu;
  std::string key;
  for (char c : name) key += c == ' ' ? '-' : static_cast<char>(std::tolower(c));
  if (key.rfind("nvidia-", 0) == 0) key = key.substr(7);
  const std::string word = key.substr(0, key.find('-'));
  const auto names = topo::gpu_names();
  for (const std::string& candidate : {key, word, word + "-sxm"})
    if (!candidate.empty() && std::count(names.begin(), names.end(), candidate))
      return topo::find_gpu(candidate);
  return std::nullopt;
}

namespace {

std::string value_text(const std::string& name, double x) {
  if (name == "kernel_overhead_s") return format_time(x);
  if (name.rfind("matmul_half_dim", 0) == 0) return fmt::format("{:.0f}", x);
  return fmt::format("{:.4f}", x);
}

std::string pct(double ratio) {
  const double p = 100 * (ratio - 1);
  return std::abs(p) < 0.005 ? "0.00%" : fmt::format("{:+.2f}%", p);
}

Table residual_table(const std::vector<topo::SampleResidual>& rows, double& rms_default,
                     double& rms_fitted) {
  Table t({"sample", "measured", "default", "error", "fitted", "error", "source"});
  t.align_left(0);
  t.align_left(6);
  double sd = 0, sf = 0;
  for (const auto& r : rows) {
    t.add_row({r.what, format_time(r.measured_s), format_time(r.default_s),
               pct(r.default_s / r.measured_s), format_time(r.fitted_s),
               pct(r.fitted_s / r.measured_s), r.source});
    sd += std::pow(std::log(r.default_s / r.measured_s), 2);
    sf += std::pow(std::log(r.fitted_s / r.measured_s), 2);
  }
  const double n = std::max<double>(1, static_cast<double>(rows.size()));
  rms_default = 100 * std::sqrt(sd / n), rms_fitted = 100 * std::sqrt(sf / n);
  return t;
}

}  // namespace

std::string render_kernel_fit(const topo::KernelFit& fit, const topo::GpuSpec& gpu) {
  std::string out = fmt::format(
      "\nkernel fit on the {} (docs/calibration.md \"Fitting the kernels\"): each parameter from "
      "its default, within physical bounds\n",
      gpu.name);
  Table p({"parameter", "default", "fitted", "lower", "upper", "status", "±1σ"});
  p.align_left(0);
  p.align_left(5);
  for (const topo::FittedParameter& f : fit.parameters)
    p.add_row({f.name, value_text(f.name, f.prior), value_text(f.name, f.value),
               value_text(f.name, f.lower), value_text(f.name, f.upper),
               std::string(to_string(f.status)), fmt::format("{:.1f}%", 100 * f.log_sigma)});
  if (!fit.tiles_tried.empty())
    p.add_row({"matmul_tile", std::to_string(fit.prior_tile), std::to_string(fit.tile), "64", "256",
               "chosen of 64/128/256", "-"});
  if (fit.graph_saving_s)
    p.add_row({"graph_launch_saving_s", format_time(topo::GpuEfficiency{}.graph_launch_saving_s),
               format_time(*fit.graph_saving_s), "0", "overhead", "overhead - graph back-to-back",
               "-"});
  out += p.render();
  const auto& l = fit.launch;
  if (l.eager_host_s || l.eager_back_to_back_s || l.graph_back_to_back_s) {
    const auto t = [](const std::optional<double>& s) { return s ? format_time(*s) : "-"; };
    out += fmt::format(
        "launch (harness): host per eager cudaLaunchKernel {}, back-to-back per kernel eager {}, "
        "graphed {}; the host time is a floor of calibrate fit's host_launch (per eager op, "
        "Python and ATen add to it)\n",
        t(l.eager_host_s), t(l.eager_back_to_back_s), t(l.graph_back_to_back_s));
  }
  for (const std::string& note : fit.notes) out += "note: " + note + "\n";
  for (const auto* rows : {&fit.gemm_residuals, &fit.memory_residuals, &fit.attention_residuals}) {
    if (rows->empty()) continue;
    double rd = 0, rf = 0;
    const Table t = residual_table(*rows, rd, rf);
    const char* kind = rows == &fit.gemm_residuals     ? "GEMM"
                       : rows == &fit.memory_residuals ? "memory"
                                                       : "attention";
    out +=
        fmt::format("\n{} samples: RMS log error default {:.2f}%, fitted {:.2f}%\n", kind, rd, rf);
    out += t.render();
  }
  return out;
}

}  // namespace loom::calibration
