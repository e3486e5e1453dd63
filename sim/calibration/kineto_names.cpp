// Kernel-name classification and GEMM shapes for the Kineto importer. Names are matched in
// lower case by substrings that the libraries put in their kernel names: cuBLAS/cuBLASLt
// ("gemm", "xmma", "nvjet", "cublas"), CUTLASS ("cutlass"), FlashAttention ("flash"),
// xFormers/PyTorch memory-efficient attention ("fmha"), cuDNN SDPA ("sdpa"), NCCL
// ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", "ncclKernel_AllGather_RING_LL_Sum_int8_t").
#include <algorithm>
#include <cctype>
#include <initializer_list>

#include "sim/calibration/kineto.hpp"
#include "sim/calibration/kineto_shapes.hpp"

namespace loom::calibration {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool has_any(const std::string& s, std::initializer_list<std::string_view> words) {
  return std::any_of(words.begin(), words.end(),
                     [&](std::string_view w) { return s.find(w) != std::string::npos; });
}

}  // namespace

std::optional<sim::CollectiveOp> collective_of(std::string_view name) {
  std::string s = lower(name);
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  using Op = sim::CollectiveOp;
  // Longer names first: "allreduce" holds "reduce", "reducescatter" holds "scatter".
  const std::pair<std::string_view, Op> table[] = {{"allreduce", Op::ALL_REDUCE},
                                                   {"allgather", Op::ALL_GATHER},
                                                   {"reducescatter", Op::REDUCE_SCATTER},
                                                   {"alltoall", Op::ALL_TO_ALL},
                                                   {"sendrecv", Op::SEND_RECV},
                                                   {"send", Op::SEND_RECV},
                                                   {"recv", Op::SEND_RECV},
                                                   {"broadcast", Op::BROADCAST},
                                                   {"reduce", Op::REDUCE},
                                                   {"gather", Op::GATHER},
                                                   {"scatter", Op::SCATTER},
                                                   {"barrier", Op::BARRIER}};
  for (const auto& [word, op] : table) {
    if (s.find(word) != std::string::npos) return op;
  }
  return std::nullopt;
}

std::string classify_activity(std::string_view category, std::string_view name,
                              std::string_view collective) {
  if (category == "gpu_memcpy") return "memcpy";
  if (category == "gpu_memset") return "memset";
  const std::string s = lower(name);
  if (s.find("nccl") != std::string::npos) {
    std::optional<sim::CollectiveOp> op;
    if (!collective.empty()) op = collective_of(collective);
    if (!op) op = collective_of(name.substr(std::min(name.find('_'), name.size())));
    return "nccl:" + (op ? sim::to_string(*op) : std::string("unknown"));
  }
  // Attention before GEMM: FlashAttention-3 and cuDNN SDPA kernels are CUTLASS/wgmma code.
  if (has_any(s, {"flash", "fmha", "sdpa", "attention", "attn"})) return "attention";
  if (has_any(s, {"gemm", "cutlass", "cublas", "xmma", "nvjet", "gemv", "matmul"})) return "gemm";
  if (has_any(s, {"layer_norm", "layernorm", "rms_norm", "rmsnorm", "batch_norm", "batchnorm",
                  "group_norm", "groupnorm", "softmax"})) {
    return "normalization";
  }
  if (has_any(s,
              {"elementwise", "vectorized", "unrolled", "reduce_kernel", "triton_poi", "triton_red",
               "triton_per", "pointwise", "fill_kernel", "copy_kernel", "catarraybatchedcopy"})) {
    return "elementwise";
  }
  return "other";
}

namespace kineto {

std::pair<std::string, double> dtype_of(std::string_view torch_name) {
  std::string_view t = torch_name;
  if (t.substr(0, 5) == "c10::") t.remove_prefix(5);
  const std::string s = lower(t);
  if (s == "bfloat16") return {"bf16", 2};
  if (s == "half") return {"fp16", 2};
  if (s == "float") return {"fp32", 4};
  if (s == "double") return {"fp64", 8};
  if (s.rfind("float8", 0) == 0) return {"fp8", 1};
  if (s == "long" || s == "int64_t") return {"int64", 8};
  if (s == "int" || s == "int32_t") return {"int32", 4};
  if (s == "short") return {"int16", 2};
  if (s == "char" || s == "signed char" || s == "int8_t") return {"int8", 1};
  if (s == "byte" || s == "unsigned char" || s == "uint8_t" || s == "bool") return {"uint8", 1};
  return {std::string(torch_name), 0};
}

namespace {

// Dimensions of input `i` when it is an array of positive integers of rank >= 1 holding at
// most 2^48 elements (no real tensor is larger; products of its dims then fit 64 bits).
std::optional<std::vector<std::int64_t>> dims(const nlohmann::json& all, size_t i) {
  if (!all.is_array() || i >= all.size() || !all[i].is_array() || all[i].empty()) return {};
  constexpr std::int64_t max_elements = std::int64_t{1} << 48;
  std::vector<std::int64_t> out;
  std::int64_t elements = 1;
  for (const auto& d : all[i]) {
    if (!d.is_number_integer() || d.get<std::int64_t>() <= 0) return {};
    const std::int64_t n = d.get<std::int64_t>();
    if (n > max_elements / elements) return {};
    elements *= n;
    out.push_back(n);
  }
  return out;
}

std::int64_t product(const std::vector<std::int64_t>& v, size_t end) {
  std::int64_t p = 1;
  for (size_t i = 0; i < end; ++i) p *= v[i];
  return p;
}

// a: [..., M, K] (leading dims are batch); b: [..., K, N]. nullopt unless both are matrices.
std::optional<GemmShape> batched(const std::vector<std::int64_t>& a,
                                 const std::vector<std::int64_t>& b) {
  if (a.size() < 2 || b.size() < 2) return {};
  GemmShape g;
  g.batch = product(a, a.size() - 2);
  g.m = a[a.size() - 2];
  g.k = a.back();
  g.n = b.back();
  return g;
}

}  // namespace

std::optional<GemmShape> gemm_shape(std::string_view op, const nlohmann::json& args) {
  if (!args.is_object() || !args.contains("Input Dims")) return {};
  const nlohmann::json& in = args["Input Dims"];
  size_t a = 0;  // the index of the left operand; its dtype is the GEMM's
  std::optional<GemmShape> g;
  if (op == "aten::mm" || op == "aten::bmm" || op == "aten::matmul" || op == "aten::_scaled_mm") {
    auto x = dims(in, 0), y = dims(in, 1);
    if (x && y) g = batched(*x, *y);
  } else if (op == "aten::addmm" || op == "aten::baddbmm" || op == "aten::_addmm_activation") {
    a = 1;  // (bias, mat1, mat2, beta, alpha)
    auto x = dims(in, 1), y = dims(in, 2);
    if (x && y) g = batched(*x, *y);
  } else if (op == "aten::linear") {
    // (input [..., K], weight [N, K], bias): rows are every leading dim of the input.
    auto x = dims(in, 0), w = dims(in, 1);
    if (x && w && w->size() == 2) {
      g = GemmShape{};
      g->m = product(*x, x->size() - 1);
      g->k = x->back();
      g->n = (*w)[0];
    }
  }
  if (!g) return {};
  const auto types = args.find("Input type");
  if (types != args.end() && types->is_array() && a < types->size() && (*types)[a].is_string()) {
    g->dtype = dtype_of((*types)[a].get<std::string>()).first;
  }
  return g;
}

}  // namespace kineto

}  // namespace loom::calibration
