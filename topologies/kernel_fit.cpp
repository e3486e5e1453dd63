#include "topologies/kernel_fit.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace loom::topo {
namespace {

// Output tiles the wave-quantisation fit compares: cuBLAS's Hopper and Ampere GEMM kernels
// use CTA tiles of 64 to 256 per edge (CUTLASS 3 default tile shapes 128x128 and 128x256;
// 64-wide tiles for small problems).
constexpr int TILES[] = {64, 128, 256};
// A tile other than the default must lower the chi-square by more than this (Akaike's cost
// of one more parameter, 2 per parameter): a wave pattern the data do not show keeps 128.
constexpr double TILE_CHI_SQUARE = 2.0;
// Bounds. A fraction of a datasheet figure is at most 1 (a kernel cannot beat the peak or
// the HBM bandwidth); 0.02 is far below any measured GEMM or stream (a floor, not a guess).
constexpr double MIN_FRACTION = 0.02;
// Half-throughput dimension: at least one element; at most the 8192 at which
// matmul_efficiency normalises its shape law (a larger one would make the reference shape
// itself slow).
constexpr double MIN_HALF_DIM = 1, MAX_HALF_DIM = 8192;
// Per-kernel overhead: at least the GPU time of an empty kernel launched back to back from a
// CUDA graph (harness launch; else 0.2 us, below the ~0.5 us NVIDIA reports for graphed
// launches), at most 50 us (over ten times the 4 us default).
constexpr double MIN_OVERHEAD_S = 0.2e-6, MAX_OVERHEAD_S = 50e-6;

KernelOp gemm_op(const GemmSample& s) {
  KernelOp op;
  op.kind = KernelKind::GEMM;
  op.m = s.m, op.n = s.n, op.k = s.k, op.batch = s.batch;
  op.forward_flops = 2.0 * double(s.m) * double(s.n) * double(s.k) * double(s.batch);
  return op;
}

KernelOp memory_op(double bytes) {
  KernelOp op;
  op.kind = KernelKind::MEMORY_BOUND;
  op.bytes = bytes;
  return op;
}

// A fused attention kernel runs one CTA per (sequence, head, 128-query tile): FlashAttention-2
// and cuDNN's SDPA kernels tile queries by 64-128 (Dao 2023 section 3.2; the cuDNN kernel
// names read 64x128). loom's attention model has no occupancy term, so a sample with fewer
// than this many waves of such tiles over the GPU's SMs (its kernel half empty for a share of
// its time) is outside the regime the two parameters describe: reported, not fitted.
constexpr std::int64_t ATTENTION_QUERY_TILE = 128;
constexpr double MIN_ATTENTION_WAVES = 4.0;

// The fused-attention backward's throughput relative to its forward: FlashAttention-2 reports
// its backward at 1.5-2x slower than its forward on A100 (Dao 2023, section 4.1), so a ratio
// well below 1; bounded by 0.1 and 1.5 (a backward faster than its forward would be new).
constexpr double MIN_BACKWARD_RATIO = 0.1, MAX_BACKWARD_RATIO = 1.5;

// Which parameters the samples constrain, in the parameter vector's order: per fitted dtype
// its fraction then half dimension, then the memory fraction, the overhead, then per head
// dimension of the attention samples its fraction and, with backward samples, its backward
// ratio. Fused attention runs a kernel per head dimension (cuDNN's SDPA kernel names carry
// the tile, 64x128x64 against 64x128x128; FlashAttention's templates are instantiated per
// head dimension), so each has its own.
struct Layout {
  std::vector<DType> dtypes;
  bool memory = false;
  bool overhead = false;
  std::vector<std::pair<std::int64_t, bool>> head_dims;  ///< (head dim, backward samples)
  double prior_backward_ratio = 0;  ///< kept when only forward attention samples are fitted
};

Layout layout_of(const KernelSamples& s) {
  Layout l;
  for (const GemmSample& g : s.gemms) {
    const DType d = tensor_core_dtype(g.dtype);
    if (std::find(l.dtypes.begin(), l.dtypes.end(), d) == l.dtypes.end()) l.dtypes.push_back(d);
  }
  std::sort(l.dtypes.begin(), l.dtypes.end(),
            [](DType a, DType b) { return dtype_index(a) < dtype_index(b); });
  l.memory = !s.memory.empty();
  l.overhead = !s.gemms.empty() || !s.memory.empty();
  for (const AttentionSample& a : s.attention) {
    auto it = std::find_if(l.head_dims.begin(), l.head_dims.end(),
                           [&](const auto& h) { return h.first == a.head_dim; });
    if (it == l.head_dims.end()) it = l.head_dims.insert(l.head_dims.end(), {a.head_dim, false});
    it->second |= a.backward_s.has_value();
  }
  std::sort(l.head_dims.begin(), l.head_dims.end());
  return l;
}

// The efficiencies at parameter values `x`: the base one, one per fitted dtype and one per
// fitted attention head dimension.
struct Efficiencies {
  GpuEfficiency base;
  std::array<std::optional<GpuEfficiency>, DTYPE_COUNT> gemm;
  std::vector<std::pair<std::int64_t, GpuEfficiency>> attention;
};

Efficiencies efficiencies_at(const GpuEfficiency& prior, const Layout& l,
                             const std::vector<double>& x, int tile) {
  Efficiencies e;
  e.base = prior;
  e.base.matmul_tile = tile;
  size_t i = 2 * l.dtypes.size();
  if (l.memory) e.base.memory_bandwidth_fraction = x[i++];
  if (l.overhead) e.base.kernel_overhead_s = x[i++];
  for (const auto& [dim, backward] : l.head_dims) {
    GpuEfficiency a = e.base;
    a.attention_fraction = x[i++];
    // A fitted forward fraction replaces the GPU's own backward figure: keep its ratio.
    a.attention_backward_ratio = backward ? x[i++] : l.prior_backward_ratio;
    e.attention.emplace_back(dim, a);
  }
  for (size_t d = 0; d < l.dtypes.size(); ++d) {
    GpuEfficiency g = e.base;
    g.matmul_peak_fraction = x[2 * d];
    g.matmul_half_dim = x[2 * d + 1];
    e.gemm[static_cast<size_t>(dtype_index(l.dtypes[d]))] = g;
  }
  return e;
}

// Model times of every sample (GEMMs, then memory) under `e`.
std::vector<double> model_times(const GpuSpec& gpu, const Efficiencies& e, const KernelSamples& s) {
  const DatasheetKernelModel base(gpu, e.base);
  std::array<std::optional<DatasheetKernelModel>, DTYPE_COUNT> gemm;
  for (size_t d = 0; d < gemm.size(); ++d)
    if (e.gemm[d]) gemm[d].emplace(gpu, *e.gemm[d]);
  std::vector<double> t;
  for (const GemmSample& g : s.gemms) {
    const auto& m = gemm[static_cast<size_t>(dtype_index(tensor_core_dtype(g.dtype)))];
    t.push_back((m ? *m : base).seconds(gemm_op(g), KernelPass::FORWARD, g.dtype));
  }
  for (const MemorySample& m : s.memory)
    t.push_back(base.seconds(memory_op(m.bytes), KernelPass::FORWARD, DType::BF16));
  for (const AttentionSample& a : s.attention) {
    const std::array<KernelOp, 2> ops = attention_ops(a);
    std::optional<DatasheetKernelModel> own;
    for (const auto& [dim, efficiency] : e.attention)
      if (dim == a.head_dim) own.emplace(gpu, efficiency);
    const DatasheetKernelModel& model = own ? *own : base;
    double forward = 0, backward = 0;
    for (const KernelOp& op : ops) {
      forward += model.seconds(op, KernelPass::FORWARD, DType::BF16);
      backward += model.seconds(op, KernelPass::BACKWARD_INPUT, DType::BF16);
    }
    t.push_back(forward);
    if (a.backward_s) t.push_back(backward);
  }
  return t;
}

// The measured times in model_times' order.
std::vector<std::pair<double, double>> measured_times(const KernelSamples& s) {
  std::vector<std::pair<double, double>> t;  // seconds, sigma
  for (const GemmSample& g : s.gemms) t.emplace_back(g.seconds, g.sigma);
  for (const MemorySample& m : s.memory) t.emplace_back(m.seconds, m.sigma);
  for (const AttentionSample& a : s.attention) {
    t.emplace_back(a.forward_s, a.sigma);
    if (a.backward_s) t.emplace_back(*a.backward_s, a.sigma);
  }
  return t;
}

std::vector<FitParameter> parameters_of(const GpuSpec& gpu, const GpuEfficiency& prior,
                                        const Layout& l, const LaunchFigures& launch) {
  const DatasheetKernelModel defaults(gpu, prior);
  std::vector<FitParameter> p;
  for (DType d : l.dtypes) {
    const double fraction = std::min(defaults.gemm_fraction(d), 1.0);
    p.push_back({fmt::format("gemm_fraction {}", to_string(d)), fraction, MIN_FRACTION, 1.0});
    const double half = std::clamp(defaults.matmul_half_dim(d), MIN_HALF_DIM, MAX_HALF_DIM);
    p.push_back(
        {fmt::format("matmul_half_dim {}", to_string(d)), half, MIN_HALF_DIM, MAX_HALF_DIM});
  }
  if (l.memory) {
    const double f = std::min(prior.memory_bandwidth_fraction, 1.0);
    p.push_back({"memory_bandwidth_fraction", f, MIN_FRACTION, 1.0});
  }
  if (l.overhead) {
    const double o = std::clamp(prior.kernel_overhead_s, MIN_OVERHEAD_S, MAX_OVERHEAD_S);
    double lower = MIN_OVERHEAD_S;
    if (launch.graph_back_to_back_s) lower = std::clamp(*launch.graph_back_to_back_s, lower, o);
    p.push_back({"kernel_overhead_s", o, lower, MAX_OVERHEAD_S});
  }
  for (const auto& [dim, backward] : l.head_dims) {
    const double f = std::clamp(defaults.attention_fraction(), MIN_FRACTION, 1.0);
    p.push_back({fmt::format("attention_fraction d{}", dim), f, MIN_FRACTION, 1.0});
    if (!backward) continue;
    const double r =
        std::clamp(defaults.attention_backward_fraction() / defaults.attention_fraction(),
                   MIN_BACKWARD_RATIO, MAX_BACKWARD_RATIO);
    p.push_back({fmt::format("attention_backward_ratio d{}", dim), r, MIN_BACKWARD_RATIO,
                 MAX_BACKWARD_RATIO});
  }
  return p;
}

void check_samples(const KernelSamples& s) {
  for (const GemmSample& g : s.gemms)
    check_invariant(g.m > 0 && g.n > 0 && g.k > 0 && g.batch > 0 && g.seconds > 0 &&
                        std::isfinite(g.seconds) && g.sigma > 0,
                    "a GEMM sample needs a positive shape, time and deviation");
  for (const MemorySample& m : s.memory)
    check_invariant(m.bytes > 0 && m.seconds > 0 && std::isfinite(m.seconds) && m.sigma > 0,
                    "a memory sample needs positive bytes, time and deviation");
  for (const AttentionSample& a : s.attention)
    check_invariant(a.batch > 0 && a.heads > 0 && a.seq > 0 && a.head_dim > 0 && a.forward_s > 0 &&
                        std::isfinite(a.forward_s) && a.sigma > 0 &&
                        (!a.backward_s || (*a.backward_s > 0 && std::isfinite(*a.backward_s))),
                    "an attention sample needs a positive shape, times and deviation");
}

std::string gemm_name(const GemmSample& g) {
  return g.batch > 1 ? fmt::format("{} {}x{}x{} x{}", to_string(g.dtype), g.m, g.n, g.k, g.batch)
                     : fmt::format("{} {}x{}x{}", to_string(g.dtype), g.m, g.n, g.k);
}

void add_residuals(KernelFit& fit, const GpuSpec& gpu, const GpuEfficiency& prior, const Layout& l,
                   const std::vector<double>& x, const KernelSamples& s) {
  Efficiencies none;
  none.base = prior;
  const std::vector<double> fitted = model_times(gpu, efficiencies_at(prior, l, x, fit.tile), s);
  const std::vector<double> plain = model_times(gpu, none, s);
  for (size_t i = 0; i < s.gemms.size(); ++i)
    fit.gemm_residuals.push_back(
        {gemm_name(s.gemms[i]), s.gemms[i].source, s.gemms[i].seconds, fitted[i], plain[i]});
  for (size_t i = 0; i < s.memory.size(); ++i) {
    const size_t j = s.gemms.size() + i;
    fit.memory_residuals.push_back({fmt::format("{:.0f} B", s.memory[i].bytes), s.memory[i].source,
                                    s.memory[i].seconds, fitted[j], plain[j]});
  }
  size_t j = s.gemms.size() + s.memory.size();
  for (const AttentionSample& a : s.attention) {
    const std::string what = fmt::format("b{} h{} s{} d{}", a.batch, a.heads, a.seq, a.head_dim);
    fit.attention_residuals.push_back({what + " fwd", a.source, a.forward_s, fitted[j], plain[j]});
    ++j;
    if (!a.backward_s) continue;
    fit.attention_residuals.push_back(
        {what + " bwd", a.source, *a.backward_s, fitted[j], plain[j]});
    ++j;
  }
}

// Waves of query tiles `a` puts on `gpu`'s SMs (0: the SM count is unknown).
double attention_waves(const AttentionSample& a, const GpuSpec& gpu) {
  if (gpu.sm_count <= 0) return 0;
  const std::int64_t tiles =
      a.batch * a.heads * ((a.seq + ATTENTION_QUERY_TILE - 1) / ATTENTION_QUERY_TILE);
  return double(tiles) / gpu.sm_count;
}

}  // namespace

KernelFit fit_kernels(const GpuSpec& gpu, const GpuEfficiency& prior, const KernelSamples& given) {
  check_samples(given);
  // Attention samples that leave the GPU partly idle are left out (ATTENTION_QUERY_TILE);
  // their residuals are still reported.
  KernelSamples samples = given;
  samples.attention.clear();
  int few_waves = 0;
  for (const AttentionSample& a : given.attention) {
    if (gpu.sm_count > 0 && attention_waves(a, gpu) < MIN_ATTENTION_WAVES)
      ++few_waves;
    else
      samples.attention.push_back(a);
  }
  Layout l = layout_of(samples);
  const DatasheetKernelModel defaults(gpu, prior);
  l.prior_backward_ratio = defaults.attention_backward_fraction() / defaults.attention_fraction();
  const std::vector<FitParameter> params = parameters_of(gpu, prior, l, samples.launch);
  const std::vector<std::pair<double, double>> measured = measured_times(samples);
  const auto fit_at = [&](int tile) {
    return fit_bounded(params, [&](const std::vector<double>& x) {
      const std::vector<double> t = model_times(gpu, efficiencies_at(prior, l, x, tile), samples);
      std::vector<double> r(t.size());
      for (size_t i = 0; i < t.size(); ++i)
        r[i] = std::log(t[i] / measured[i].first) / measured[i].second;
      return r;
    });
  };
  KernelFit fit;
  fit.prior_tile = fit.tile = prior.matmul_tile;
  fit.launch = samples.launch;
  BoundedFit best = fit_at(fit.tile);
  if (!samples.gemms.empty()) {
    fit.tiles_tried.assign(std::begin(TILES), std::end(TILES));
    for (int tile : TILES) {
      if (tile == prior.matmul_tile) continue;
      BoundedFit other = fit_at(tile);
      if (other.chi_square + TILE_CHI_SQUARE < best.chi_square) best = other, fit.tile = tile;
    }
  }
  std::vector<double> x;
  for (const FittedParameter& p : best.parameters) x.push_back(p.value);
  const Efficiencies e = efficiencies_at(prior, l, x, fit.tile);
  fit.efficiency = e.base;
  fit.gemm = e.gemm;
  fit.attention = e.attention;
  fit.parameters = best.parameters;
  if (samples.launch.graph_back_to_back_s) {
    // A graphed kernel costs what an empty one does back to back in a graph; the rest of the
    // stream-launched overhead is what the graph saves.
    const double o = fit.efficiency.kernel_overhead_s;
    fit.graph_saving_s = std::clamp(o - *samples.launch.graph_back_to_back_s, 0.0, o);
    fit.efficiency.graph_launch_saving_s = *fit.graph_saving_s;
    for (auto& g : fit.gemm)
      if (g) g->graph_launch_saving_s = *fit.graph_saving_s;
    for (auto& [dim, a] : fit.attention) a.graph_launch_saving_s = *fit.graph_saving_s;
  }
  KernelSamples reported = samples;
  reported.attention = given.attention;
  add_residuals(fit, gpu, prior, l, x, reported);
  if (few_waves > 0)
    fit.notes.push_back(fmt::format(
        "{} attention sample(s) with under {:.0f} waves of {}-query tiles on the {} SMs are "
        "reported, not fitted: loom's attention model has no occupancy term",
        few_waves, MIN_ATTENTION_WAVES, ATTENTION_QUERY_TILE, gpu.sm_count));
  if (samples.gemms.empty()) fit.notes.push_back("no GEMM samples: every GEMM keeps its defaults");
  if (samples.memory.empty())
    fit.notes.push_back("no memory samples: memory-bound kernels keep the default bandwidth");
  if (given.attention.empty())
    fit.notes.push_back("no attention samples: fused attention keeps its default fraction");
  return fit;
}

std::array<KernelOp, 2> attention_ops(const AttentionSample& s) {
  std::array<KernelOp, 2> ops;
  const double square = double(s.batch) * double(s.heads) * double(s.seq) * double(s.seq);
  for (KernelOp& op : ops) {
    op.kind = KernelKind::ATTENTION;
    op.fused = true;
    op.kernel = s.kernel;
    op.causal = s.causal;
    op.seq_q = op.seq_kv = s.seq;
    op.head_dim = s.head_dim;
    op.batch = s.batch * s.heads;
    op.forward_flops = 2 * square * double(s.head_dim);
    op.backward_input_flops = 2 * op.forward_flops;
  }
  return ops;
}

FittedKernelModel::FittedKernelModel(GpuSpec gpu, const KernelFit& fit,
                                     std::vector<MeasuredGemm> raw)
    : base_(gpu, fit.efficiency), raw_(std::move(raw)) {
  for (size_t d = 0; d < gemm_.size(); ++d)
    if (fit.gemm[d]) gemm_[d].emplace(gpu, *fit.gemm[d]);
  for (const auto& [dim, efficiency] : fit.attention)
    attention_.emplace_back(dim, DatasheetKernelModel(gpu, efficiency));
  for (MeasuredGemm& g : raw_) {
    check_invariant(g.m > 0 && g.n > 0 && g.k > 0 && g.seconds > 0 && std::isfinite(g.seconds),
                    "a measured GEMM needs a positive shape and time");
    g.dtype = tensor_core_dtype(g.dtype);
  }
}

const DatasheetKernelModel& FittedKernelModel::gemm_model(DType tensor) const {
  const auto& m = gemm_[static_cast<size_t>(dtype_index(tensor))];
  return m ? *m : base_;
}

const DatasheetKernelModel& FittedKernelModel::attention_model(std::int64_t head_dim) const {
  // The fitted head dimension nearest in ratio (64 and 128 are a factor 2 apart either way).
  const DatasheetKernelModel* best = &base_;
  double distance = 0;
  for (const auto& [dim, model] : attention_) {
    const double d = head_dim > 0 ? std::abs(std::log(double(dim) / double(head_dim))) : 0;
    if (best == &base_ || d < distance) best = &model, distance = d;
  }
  return *best;
}

double FittedKernelModel::seconds(const KernelOp& op, KernelPass pass, DType math) const {
  const DType tensor = tensor_core_dtype(math);
  if (op.kind == KernelKind::ATTENTION && op.fused)
    return attention_model(op.head_dim).seconds(op, pass, math);
  const bool gemms = op.kind == KernelKind::GEMM || (op.kind == KernelKind::ATTENTION && !op.fused);
  const double t = (gemms ? gemm_model(tensor) : base_).seconds(op, pass, math);
  if (op.kind != KernelKind::GEMM || raw_.empty() || t <= 0 || op.batch != 1 ||
      op.per_group_kernels || op.graphed)
    return t;
  // A lone, stream-launched GEMM of a measured shape doing that shape's work is what the
  // harness timed: its measured time as it is (the shape of each pass as the model times it).
  std::int64_t m = op.m, n = op.n, k = op.k;
  double flops = op.forward_flops;
  if (pass == KernelPass::BACKWARD_INPUT) n = op.k, k = op.n, flops = op.backward_input_flops;
  if (pass == KernelPass::BACKWARD_WEIGHT) m = op.k, k = op.m, flops = op.backward_weight_flops;
  const double shape_flops = 2.0 * double(m) * double(n) * double(k);
  if (std::abs(flops - shape_flops) > 1e-9 * shape_flops) return t;
  for (const MeasuredGemm& g : raw_)
    if (g.dtype == tensor && g.m == m && g.n == n && g.k == k) return g.seconds;
  return t;
}

}  // namespace loom::topo
