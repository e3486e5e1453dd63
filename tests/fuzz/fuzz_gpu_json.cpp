// Fuzz target: a GPU JSON object (a catalog entry plus overrides), then the datasheet
// kernel model timing a GEMM, an attention and a memory-bound kernel on it.
#include "tests/fuzz/fuzz_target.hpp"
#include "topologies/gpu_json.hpp"
#include "topologies/kernel_model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return loom::fuzz::guarded([&] {
    const nlohmann::json doc =
        loom::parse_json_text(loom::fuzz::text_of(data, size), "fuzz-gpu.json");
    loom::ObjectReader reader(doc, "fuzz-gpu.json", "");
    const loom::topo::GpuSpec gpu = loom::topo::read_gpu_spec(reader);
    const loom::topo::DatasheetKernelModel kernels(gpu);
    loom::topo::KernelOp gemm;
    gemm.m = gemm.n = gemm.k = 4096;
    gemm.forward_flops = 2.0 * 4096 * 4096 * 4096;
    gemm.backward_input_flops = gemm.backward_weight_flops = gemm.forward_flops;
    for (auto dtype : {loom::topo::DType::BF16, loom::topo::DType::FP32, loom::topo::DType::FP8})
      (void)kernels.pass_seconds(gemm, dtype);
    loom::topo::KernelOp attention;
    attention.kind = loom::topo::KernelKind::ATTENTION;
    attention.fused = true;
    attention.causal = true;
    attention.seq_q = attention.seq_kv = 4096;
    attention.head_dim = 128;
    attention.forward_flops = 1e12;
    attention.backward_input_flops = attention.backward_weight_flops = 1e12;
    (void)kernels.pass_seconds(attention, loom::topo::DType::BF16);
    (void)kernels.memory_time_s(1e9);
  });
}
