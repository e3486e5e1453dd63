// The op list of a Mamba-2 layer (a hybrid pattern's 'M'), as Megatron-core trains it.
#include "models/fused_ops.hpp"
#include "models/layer_builders.hpp"

namespace loom::models::detail {

// Megatron-core megatron/core/ssm/mamba_layer.py and mamba_mixer.py (MambaMixer):
//  - the pre-norm (TELayerNormColumnParallelLinear fuses it into in_proj; loom times it as
//    its own kernel, as it does before the attention's QKV projection);
//  - in_proj, column-parallel, to z, x, B, C and dt: 2 d_inner + 2 groups x state + heads
//    features, heads and B/C groups split by tp (Megatron requires tp to divide both); no
//    bias (MambaMixer asserts bias=False);
//  - mamba_ssm's mamba_split_conv1d_scan_combined, called with rmsnorm_weight=None and
//    outproj_weight=None: the depthwise causal conv (kernel conv_kernel, with bias) and SiLU
//    over x, B and C, the SSD chunked scan (Dao & Gu 2024, "Transformers are SSMs", Sec. 6
//    and 7) in Triton kernels, and the gate y x silu(z) in its last kernel;
//  - the norm of the gated output (self.norm(out, gate=None)), per group on each rank's own
//    groups, so without a collective;
//  - out_proj, row-parallel, then the residual add.
// Under sequence parallelism the pre-norm and residual run on the sequence shard, as the
// transformer blocks do (mamba_mixer.py: input and output split along the sequence).
void mamba_ops(const Ctx& c, std::vector<OpCost>& ops) {
  const ModelSpec& m = c.m;
  const MambaSpec& s = m.mamba;
  const double h = static_cast<double>(m.hidden), T = c.T, t = c.t;
  const double seq_in = c.act * T * h / c.seq_div;
  const double inner = static_cast<double>(s.inner()) / t;
  const double heads = s.heads / t, groups = s.groups / t;
  const double N = static_cast<double>(s.state), P = static_cast<double>(s.head_dim);
  const double Q = static_cast<double>(s.chunk), K = s.conv_kernel;
  const double width = static_cast<double>(s.in_proj_width()) / t;
  const double conv = static_cast<double>(s.conv_channels()) / t;

  // Megatron's "layernorm" recompute module applies to transformer layers only.
  push_pre_norm(c, "mamba_norm", ops, false);
  // in_proj keeps its input (an FP8 copy under fp8: keep_fp8_linear_inputs).
  ops.push_back(linear(c, "mamba_in_proj", T, h, static_cast<double>(s.in_proj_width()),
                       Parallel::COLUMN, false, seq_in, c.wbytes));
  // The conv reads and writes x, B and C once; K multiply-adds per channel and token. The
  // fused conv-scan keeps in_proj's 16-bit output (zxbcdt) for its backward, where it
  // re-runs the conv.
  OpCost cv = elementwise("mamba_conv", c.act * T * conv, c.act * T * conv, c.act * T * width,
                          2 * K * T * conv);
  cv.params = conv * (K + 1);
  ops.push_back(cv);

  // The SSD scan over chunks of Q tokens. Matmul FLOPs per token: per group the chunk's
  // C·Bᵀ (Q x Q over N), per head the masked scores times x (Q over Q x P), the chunk state
  // Bᵀ·x (N x P) and the state's output C·state (P over N). Traffic of mamba_ssm's forward
  // (ops/triton/ssd_combined.py _mamba_chunk_scan_combined_fwd, five kernels: chunk_cumsum,
  // chunk_state, state_passing, bmm_chunk, chunk_scan): x, B and C read by two kernels each;
  // dt and its cumulative decay in fp32; the fp32 chunk states (T / Q of them, heads x P x N)
  // written, read and rewritten by the state passing and read by the scan; the fp32 C·Bᵀ
  // blocks written and read; z read and y written before and after the gate (the scan keeps
  // the first for its backward). Memory-bound at these sizes: the state traffic alone
  // exceeds the inputs' (fusing the five kernels is what speeds SSD up, PyTorch blog
  // "Accelerating Mamba2 with Kernel Fusion": 1.5-2.5x on A100 and H100). The backward
  // (_mamba_chunk_scan_combined_bwd) re-runs the state chain (chunk_state, state_passing)
  // and mirrors the forward for the gradients of x, B, C, dt, z and the states: twice the
  // forward's bytes plus the re-run states.
  const double xbc = c.act * T * (inner + 2 * groups * N);
  const double dt = 8 * T * heads;  // dt and the cumulative dA, fp32
  const double states = 4 * (T / Q) * heads * P * N;
  const double cb = 4 * T * groups * Q;
  const double y = c.act * T * inner;
  OpCost ssd = elementwise("mamba_ssd", 2 * xbc + y + dt + 2 * states + cb, 2 * y + 2 * states + cb,
                           y, T * (2 * Q * N * groups + heads * (2 * Q * P + 4 * N * P)));
  ssd.kernels = 5;
  ssd.backward_bytes = 2 * (ssd.input_bytes + ssd.output_bytes) + 3 * states;
  ssd.params = 3 * heads;  // A_log, D, dt_bias
  ops.push_back(ssd);
  // The norm reads the gated output and writes it normalised; it keeps its input and an
  // fp32 rstd per group and token.
  OpCost on = elementwise("mamba_out_norm", y, y, y + 4 * T * groups, 5 * T * inner);
  on.params = inner;
  ops.push_back(on);
  OpCost out = linear(c, "mamba_out_proj", T, static_cast<double>(s.inner()), h, Parallel::ROW,
                      false, y, c.wbytes);
  c.tp_reduce(out, c.act * T * h);
  ops.push_back(out);
  push_residual(c, "mamba_residual", ops);
}

}  // namespace loom::models::detail
