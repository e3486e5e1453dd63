// Single-process multi-thread DataParallel (plan.dp_mode DATAPARALLEL; torch.nn.DataParallel,
// torch/nn/parallel/data_parallel.py): one Python process drives every GPU of one node, the
// whole model on each (tp = pp = cp = 1). Each forward call (each micro-batch):
//
//   scatter    the input batch from GPU 0 to the others (Scatter.apply: device copies)
//   replicate  the parameters from GPU 0 to the others (replicate.py: Broadcast.apply, an
//              NCCL broadcast, torch/csrc/cuda/comm.cpp broadcast_coalesced)
//   forward    one thread per GPU (parallel_apply.py) whose kernel launches all hold Python's
//              GIL: one host thread launches them in turn, SimulateOptions::host_launch_s each
//   gather     the outputs to GPU 0 (Gather.apply: device copies)
//   loss       on GPU 0 over every replica's output; its gradient scattered back (Gather's
//              backward)
//   backward   on every GPU (autograd's per-device threads release the GIL: launches overlap)
//   reduce     the gradients to GPU 0 (Broadcast's backward: ReduceAddCoalesced, an NCCL
//              reduce into GPU 0's .grad)
//
// and after the last micro-batch the optimizer steps on GPU 0 only; the next step's first
// broadcast waits for it. The replicate and reduce collectives run on the dp streams (they
// are issued between passes the compute streams already hold), every other copy on no stream.
#include <fmt/format.h>

#include "models/flops.hpp"
#include "strategies/step/dp_lowering.hpp"

namespace loom::strategies {
namespace {

using sim::TaskId;

// The main head's loss op: the first loss after the LM head (or classifier) in head_ops (a
// soft-capping op may stand between them: Gemma 2).
models::OpCost loss_op(const StepGraph& g) {
  const auto ops = models::head_ops(g.model, g.plan);
  for (const models::OpCost& op : ops)
    if (op.kind == models::OpKind::LOSS) return op;
  check_invariant(false, "the head has no loss after its output layer");
  return {};
}

// The loss `loss` (loss_op) of one replica's micro-batch on GPU type `type`.
PassCost loss_cost(const StepGraph& g, const models::OpCost& loss, int type) {
  return cost_ops({loss}, g.plan, g.kernels_of(type), OpList::HEAD);
}

class SingleProcessLowering final : public DataParallelLowering {
 public:
  explicit SingleProcessLowering(StepGraph& g) : g_(g) {
    const int rank0 = g.gpus[0][0].rank;
    const int node = g.cluster.node_of_rank(rank0);
    host_ = g.engine.add_stream(fmt::format("node{}/python", node), rank0);
    // The one Python thread runs on GPU 0's host.
    launch_s_ = host_launch_for(g.options.host_launch_s,
                                g.cluster.gpu_type(g.gpus[0][0].gpu_type).host_op_s);
    loss_stream_ = g.engine.add_stream(fmt::format("rank{}/loss", rank0), rank0);
    for (size_t ri = 0; ri < g.replicas.size(); ++ri) ranks_.push_back(g.gpus[ri][0].rank);
    const models::OpCost loss = loss_op(g);
    output_bytes_ = loss.input_bytes;  // the logits of one micro-batch
    // Token ids (int64) per replica; an MLP's input vectors.
    input_bytes_ = g.model.kind == models::ModelKind::MLP
                       ? models::tokens_per_gpu(g.model, g.plan) * double(g.model.hidden) *
                             models::activation_element_bytes(g.plan)
                       : models::tokens_per_gpu(g.model, g.plan) * 8.0;
    params_ = stage_params(g, 0, ParamSet::DENSE) + stage_params(g, 0, ParamSet::EXPERT);
    // GPU 0 runs every replica's loss, forward and backward, each micro-batch.
    const PassCost lc = loss_cost(g, loss, g.gpus[0][0].gpu_type);
    loss_s_ = static_cast<double>(g.replicas.size()) * (lc.fwd_s + lc.bwd_input_s);
  }

  std::vector<std::vector<TaskId>> before_optimizer(StageGroups&) override {
    std::vector<std::vector<TaskId>> waits(g_.replicas.size());
    std::vector<TaskId> start;
    if (last_optimizer_ >= 0) start.push_back(last_optimizer_);
    TaskId reduced = -1;
    const auto& order = g_.schedule.per_stage[0];
    for (int pi = 0; pi < static_cast<int>(order.size()); ++pi) {
      const Pass& pass = order[static_cast<size_t>(pi)];
      if (pass.kind != PassKind::FORWARD) continue;
      reduced = micro_batch(pi, pass.micro_batch, start);
      start = {reduced};
    }
    waits[0].push_back(reduced);
    for (size_t ri = 1; ri < g_.replicas.size(); ++ri)
      g_.step_ends[static_cast<size_t>(g_.step)][ri].push_back(reduced);
    return waits;
  }

  // The optimizer on GPU 0 only, over every parameter.
  std::vector<TaskId> optimizer(StepGraph& g, int stage,
                                const std::vector<std::vector<TaskId>>& waits) override {
    auto opts = lower_optimizer(g, stage, waits, false, {0});
    last_optimizer_ = opts[0];
    record("optimizer (GPU 0)", opts[0]);
    return opts;
  }

  bool sharded() const override { return false; }

  void measure(const StepGraph& g, DesignReport& r) const override {
    for (const auto& [what, tasks] : phases_)
      r.breakdown.emplace_back(what, union_seconds(g.engine, tasks));
  }

 private:
  // One forward call and its backward: micro-batch `mb` whose forward is pass `pi`, after
  // `start`. Returns the gradient reduce.
  TaskId micro_batch(int pi, int mb, const std::vector<TaskId>& start) {
    const size_t W = g_.replicas.size();
    const int k = g_.step;
    std::vector<TaskId> ready(W);  // per GPU: when its forward may be launched
    const TaskId bc =
        collective(sim::CollectiveOp::BROADCAST, params_ * gathered_param_bytes(g_.plan),
                   g_.label("dp-replicate mb{} step{}", mb, k), start);
    record("replicate (broadcast)", bc);
    for (size_t ri = 0; ri < W; ++ri) {
      ready[ri] = bc;
      if (ri == 0) continue;
      const TaskId sc = copy(0, ri, input_bytes_, g_.label("dp-scatter mb{} ->{}", mb, ri), start);
      record("scatter (inputs)", sc);
      ready[ri] = sc;
    }
    // Launches: unit by unit, GPU by GPU, on the one host thread.
    const auto& units = g_.work.units[0];
    for (size_t u = 0; u < units.size(); ++u) {
      for (size_t ri = 0; ri < W; ++ri) {
        const SimGpu& h = g_.gpus[ri][0];
        const double kernels = g_.work_of(h.gpu_type).units[0][u].cost.fwd_launches;
        std::vector<TaskId> deps{bc};
        if (u == 0) deps.push_back(ready[ri]);
        const TaskId launch = g_.add_compute(
            host_, kernels * launch_s_, g_.label("launch F mb{} {} gpu{}", mb, units[u].name, ri),
            TraceCategory::DP, deps);
        record("kernel launches (GIL)", launch);
        g_.engine.add_dependency(launch, h.units[static_cast<size_t>(pi)][u].first);
      }
    }
    // Gather the outputs; the loss on GPU 0; its gradient back to every replica.
    std::vector<TaskId> loss_deps;
    for (size_t ri = 0; ri < W; ++ri) {
      const TaskId fwd_end = g_.gpus[ri][0].units[static_cast<size_t>(pi)].back().last;
      if (ri == 0) {
        loss_deps.push_back(fwd_end);
        continue;
      }
      const TaskId ga =
          copy(ri, 0, output_bytes_, g_.label("dp-gather mb{} {}->0", mb, ri), {fwd_end});
      record("gather (outputs)", ga);
      loss_deps.push_back(ga);
    }
    const TaskId loss =
        g_.add_gpu_compute(0, 0, loss_stream_, loss_s_, g_.label("loss x{} mb{}", W, mb),
                           TraceCategory::COMPUTE, loss_deps);
    record("loss (GPU 0, every replica)", loss);
    std::vector<TaskId> reduce_deps;
    for (size_t ri = 0; ri < W; ++ri) {
      const PassTasks& b = g_.pass_tasks[ri][g_.pass_key(true, mb, 0)];
      TaskId grad = loss;
      if (ri > 0) {
        grad = copy(0, ri, output_bytes_, g_.label("dp-grad-scatter mb{} 0->{}", mb, ri), {loss});
        record("scatter (output gradients)", grad);
      }
      g_.engine.add_dependency(grad, b.first);
      reduce_deps.push_back(b.last);
    }
    const TaskId red = collective(sim::CollectiveOp::REDUCE, params_ * reduced_grad_bytes(g_.plan),
                                  g_.label("dp-reduce mb{} step{}", mb, k), reduce_deps);
    record("reduce (gradients to GPU 0)", red);
    return red;
  }

  // An NCCL collective rooted at GPU 0 over every GPU, on their dp streams.
  TaskId collective(sim::CollectiveOp op, double bytes, std::string label,
                    const std::vector<TaskId>& deps) {
    if (ranks_.size() < 2)  // one GPU: nothing to replicate or reduce
      return g_.add_compute(g_.gpus[0][0].dp, 0.0, std::move(label), TraceCategory::DP, deps);
    std::vector<sim::StreamId> streams;
    for (size_t ri = 0; ri < g_.replicas.size(); ++ri) streams.push_back(g_.gpus[ri][0].dp);
    const TaskId id = g_.add_collective(op, bytes, ranks_, std::move(streams), {}, std::move(label),
                                        TraceCategory::DP, deps);
    RepStage& rep = g_.reps[0];
    rep.dp_concurrent = true;
    rep.dp.push_back(id);
    rep.dp_bytes += bytes;
    return id;
  }

  // A device-to-device copy from GPU `from` to GPU `to` (replica indices).
  TaskId copy(size_t from, size_t to, double bytes, std::string label,
              const std::vector<TaskId>& deps) {
    sim::TransferSpec t;
    t.bytes = bytes;
    t.src_vertex = g_.cluster.gpu_vertex(ranks_[from]);
    t.dst_vertex = g_.cluster.gpu_vertex(ranks_[to]);
    t.label = std::move(label);
    const TaskId id = g_.add_transfer(t, TraceCategory::DP, deps);
    RepStage& rep = g_.reps[0];  // GPU 0 sends or receives every copy
    rep.dp.push_back(id);
    rep.dp_bytes += bytes;
    return id;
  }

  // Keeps the first step's tasks of a phase for the breakdown.
  void record(const std::string& what, TaskId id) {
    if (g_.step != 0) return;
    for (auto& [name, tasks] : phases_) {
      if (name != what) continue;
      tasks.push_back(id);
      return;
    }
    phases_.push_back({what, {id}});
  }

  StepGraph& g_;
  sim::StreamId host_ = sim::NO_STREAM, loss_stream_ = sim::NO_STREAM;
  std::vector<int> ranks_;
  double output_bytes_ = 0, input_bytes_ = 0, params_ = 0;
  double loss_s_ = 0;    ///< GPU 0's loss of every replica, one micro-batch, seconds
  double launch_s_ = 0;  ///< host seconds per kernel launch of the Python thread
  TaskId last_optimizer_ = -1;
  std::vector<std::pair<std::string, std::vector<TaskId>>> phases_;
};

}  // namespace

void remove_replica_loss(StepGraph& g) {
  if (g.plan.dp_mode != models::DpMode::DATAPARALLEL) return;
  const models::OpCost loss_op_of_head = loss_op(g);
  for (int type = 0; type <= static_cast<int>(g.extra_work.size()); ++type) {
    StageWork& work = type == 0 ? g.work : g.extra_work[static_cast<size_t>(type - 1)];
    const PassCost loss = loss_cost(g, loss_op_of_head, type);
    for (PassCost* c : {&work.units.back().back().cost, &work.chunk_cost.back()}) {
      c->fwd_s -= loss.fwd_s;
      c->bwd_input_s -= loss.bwd_input_s;
      c->bwd_weight_s -= loss.bwd_weight_s;
      c->fwd_launches -= loss.fwd_launches;
    }
  }
}

std::unique_ptr<DataParallelLowering> make_single_process_lowering(StepGraph& g) {
  return std::make_unique<SingleProcessLowering>(g);
}

}  // namespace loom::strategies
