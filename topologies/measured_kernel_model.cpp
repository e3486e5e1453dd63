#include "topologies/measured_kernel_model.hpp"

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace loom::topo {

namespace {

// The measured model's datasheet: memory-bound work at the measured bandwidth, if any.
GpuEfficiency datasheet_efficiency(const GpuSpec& gpu, GpuEfficiency efficiency,
                                   const MeasuredKernels& measured) {
  if (!measured.memory_Bps) return efficiency;
  check_invariant(*measured.memory_Bps > 0 && std::isfinite(*measured.memory_Bps),
                  "measured memory bandwidth must be finite and > 0");
  return with_memory_bandwidth(gpu, efficiency, *measured.memory_Bps);
}

// A single [m x k]·[k x n] GEMM as the datasheet model times it.
KernelOp single_gemm(std::int64_t m, std::int64_t n, std::int64_t k) {
  KernelOp op;
  op.kind = KernelKind::GEMM;
  op.m = m;
  op.n = n;
  op.k = k;
  op.forward_flops = 2.0 * double(m) * double(n) * double(k);
  return op;
}

}  // namespace

GpuEfficiency with_memory_bandwidth(const GpuSpec& gpu, GpuEfficiency efficiency,
                                    double bytes_per_second) {
  check_invariant(gpu.hbm_bandwidth_Bps > 0, "the GPU has no HBM bandwidth");
  efficiency.memory_bandwidth_fraction = bytes_per_second / gpu.hbm_bandwidth_Bps;
  return efficiency;
}

MeasuredKernelModel::MeasuredKernelModel(GpuSpec gpu, GpuEfficiency efficiency,
                                         MeasuredKernels measured)
    : datasheet_(gpu, datasheet_efficiency(gpu, efficiency, measured)) {
  for (const MeasuredGemm& g : measured.gemms) {
    check_invariant(g.m > 0 && g.n > 0 && g.k > 0 && g.seconds > 0 && std::isfinite(g.seconds),
                    "a measured GEMM needs a positive shape and time");
    const DType tensor = tensor_core_dtype(g.dtype);
    Point p;
    p.gemm = g;
    p.gemm.dtype = tensor;
    p.ratio =
        g.seconds / datasheet_.seconds(single_gemm(g.m, g.n, g.k), KernelPass::FORWARD, tensor);
    p.log_shape = {std::log(double(g.m)), std::log(double(g.n)), std::log(double(g.k))};
    points_[static_cast<size_t>(dtype_index(tensor))].push_back(p);
  }
}

const MeasuredKernelModel::Point* MeasuredKernelModel::exact(std::int64_t m, std::int64_t n,
                                                             std::int64_t k, DType tensor) const {
  for (const Point& p : points_[static_cast<size_t>(dtype_index(tensor))]) {
    if (p.gemm.m == m && p.gemm.n == n && p.gemm.k == k) return &p;
  }
  return nullptr;
}

std::optional<double> MeasuredKernelModel::gemm_ratio(std::int64_t m, std::int64_t n,
                                                      std::int64_t k, DType tensor) const {
  const auto& points = points_[static_cast<size_t>(dtype_index(tensor))];
  if (points.empty()) return std::nullopt;
  if (const Point* p = exact(m, n, k, tensor)) return p->ratio;
  // Squared distances in log-shape space: a shape twice as large in one dimension is as far
  // as one half as large, whatever the absolute size.
  const std::array<double, 3> at = {std::log(double(std::max<std::int64_t>(m, 1))),
                                    std::log(double(std::max<std::int64_t>(n, 1))),
                                    std::log(double(std::max<std::int64_t>(k, 1)))};
  std::vector<std::pair<double, double>> by_distance;  // (squared distance, log ratio)
  for (const Point& p : points) {
    double d2 = 0;
    for (size_t i = 0; i < 3; ++i) d2 += (p.log_shape[i] - at[i]) * (p.log_shape[i] - at[i]);
    by_distance.emplace_back(d2, std::log(p.ratio));
  }
  std::stable_sort(by_distance.begin(), by_distance.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  // Inverse-distance weighting (weights 1 / d²) of the nearest points' log ratios: at a
  // point it is that point's ratio; far from all it is their weighted geometric mean, so a
  // shape beyond the measured range keeps the ratio of the measured shapes nearest to it.
  double weight_sum = 0, log_sum = 0;
  const size_t used = std::min(by_distance.size(), static_cast<size_t>(NEIGHBOURS));
  for (size_t i = 0; i < used; ++i) {
    const double w = 1.0 / by_distance[i].first;
    weight_sum += w;
    log_sum += w * by_distance[i].second;
  }
  return std::exp(log_sum / weight_sum);
}

double MeasuredKernelModel::gemm_pass_s(const KernelOp& op, std::int64_t m, std::int64_t n,
                                        std::int64_t k, double flops, double datasheet_s,
                                        DType math) const {
  if (datasheet_s <= 0) return datasheet_s;
  const DType tensor = tensor_core_dtype(math);
  // A lone, stream-launched GEMM of a measured shape doing that shape's work is what the
  // harness timed: its measured time as it is.
  const double shape_flops = 2.0 * double(m) * double(n) * double(k);
  if (op.batch == 1 && !op.per_group_kernels && !op.graphed &&
      std::abs(flops - shape_flops) <= 1e-9 * shape_flops) {
    if (const Point* p = exact(m, n, k, tensor)) return p->gemm.seconds;
  }
  const std::optional<double> ratio = gemm_ratio(m, n, k, tensor);
  return ratio ? datasheet_s * *ratio : datasheet_s;
}

double MeasuredKernelModel::seconds(const KernelOp& op, KernelPass pass, DType math) const {
  const double t = datasheet_.seconds(op, pass, math);
  if (op.kind != KernelKind::GEMM) return t;
  // The shape of each pass as the datasheet model times it: dA = dC·Bᵀ is [m x n]·[n x k],
  // dB = Aᵀ·dC is [k x m]·[m x n].
  switch (pass) {
    case KernelPass::FORWARD:
      return gemm_pass_s(op, op.m, op.n, op.k, op.forward_flops, t, math);
    case KernelPass::BACKWARD_INPUT:
      return gemm_pass_s(op, op.m, op.k, op.n, op.backward_input_flops, t, math);
    case KernelPass::BACKWARD_WEIGHT:
      return gemm_pass_s(op, op.k, op.n, op.m, op.backward_weight_flops, t, math);
  }
  return t;
}

}  // namespace loom::topo
