// Collective ops, the algorithm registry and protocol names: the vocabulary of
// collectives.hpp. Lowering lives in collective_*.cpp (map: sim/README.md).
#include "sim/collectives.hpp"

#include <algorithm>

#include "common/error.hpp"
#include "sim/collective_lowering.hpp"

namespace loom::sim {

namespace {

const std::vector<std::pair<CollectiveOp, std::string>>& op_table() {
  static const std::vector<std::pair<CollectiveOp, std::string>> table = {
      {CollectiveOp::SEND_RECV, "send_recv"},
      {CollectiveOp::BROADCAST, "broadcast"},
      {CollectiveOp::SCATTER, "scatter"},
      {CollectiveOp::GATHER, "gather"},
      {CollectiveOp::REDUCE, "reduce"},
      {CollectiveOp::ALL_GATHER, "all_gather"},
      {CollectiveOp::REDUCE_SCATTER, "reduce_scatter"},
      {CollectiveOp::ALL_REDUCE, "all_reduce"},
      {CollectiveOp::ALL_TO_ALL, "all_to_all"},
      {CollectiveOp::BARRIER, "barrier"},
      {CollectiveOp::NODE_ALL_TO_ALL, "node_all_to_all"},
      {CollectiveOp::RAIL_ALL_TO_ALL, "rail_all_to_all"},
  };
  return table;
}

using Op = CollectiveOp;

}  // namespace

std::string to_string(CollectiveOp op) {
  for (const auto& [o, name] : op_table())
    if (o == op) return name;
  return "?";
}

std::vector<std::string> collective_op_names() {
  std::vector<std::string> names;
  for (const auto& entry : op_table()) names.push_back(entry.second);
  return names;
}

CollectiveOp parse_collective_op(std::string_view name, std::string_view field) {
  for (const auto& [o, n] : op_table())
    if (n == name) return o;
  throw ValidationError::unknown_name(field, name, collective_op_names());
}

double bus_bandwidth_factor(CollectiveOp op, int n) {
  if (n <= 0) return 1.0;
  switch (op) {
    case Op::ALL_REDUCE:
      return 2.0 * (n - 1) / n;
    case Op::ALL_GATHER:
    case Op::REDUCE_SCATTER:
    case Op::ALL_TO_ALL:
    case Op::GATHER:
    case Op::SCATTER:
      return static_cast<double>(n - 1) / n;
    default:
      return 1.0;
  }
}

const std::vector<AlgorithmInfo>& collective_algorithms() {
  static const std::vector<AlgorithmInfo> registry = {
      {Algorithm::AUTO,
       "auto",
       "least predicted time among ring, tree, nvls and nvls_tree (direct for point-to-point "
       "ops), "
       "protocol LL/LL128/Simple chosen likewise, as NCCL's tuner does",
       {Op::SEND_RECV, Op::BROADCAST, Op::SCATTER, Op::GATHER, Op::REDUCE, Op::ALL_GATHER,
        Op::REDUCE_SCATTER, Op::ALL_REDUCE, Op::ALL_TO_ALL, Op::BARRIER, Op::NODE_ALL_TO_ALL,
        Op::RAIL_ALL_TO_ALL}},
      {Algorithm::RING,
       "ring",
       "ring over the group (one ring per local GPU, i.e. per rail, across nodes); broadcast "
       "and reduce as a pipelined chain",
       {Op::BROADCAST, Op::REDUCE, Op::ALL_GATHER, Op::REDUCE_SCATTER, Op::ALL_REDUCE,
        Op::BARRIER}},
      {Algorithm::TREE,
       "tree",
       "NCCL's double binary tree, each tree carrying half the data, reduce and broadcast "
       "pipelined in chunks",
       {Op::ALL_REDUCE, Op::BARRIER}},
      {Algorithm::DIRECT,
       "direct",
       "naive: every rank sends its share straight to every rank that needs it",
       {Op::SEND_RECV, Op::BROADCAST, Op::SCATTER, Op::GATHER, Op::REDUCE, Op::ALL_GATHER,
        Op::REDUCE_SCATTER, Op::ALL_REDUCE, Op::ALL_TO_ALL, Op::BARRIER, Op::NODE_ALL_TO_ALL,
        Op::RAIL_ALL_TO_ALL}},
      {Algorithm::MASTER_WORKER,
       "master_worker",
       "gather everything to the root, reduce there, broadcast from the root",
       {Op::BROADCAST, Op::SCATTER, Op::GATHER, Op::REDUCE, Op::ALL_REDUCE, Op::BARRIER}},
      {Algorithm::HALVING_DOUBLING,
       "halving_doubling",
       "recursive halving (reduce-scatter) and doubling (all-gather), binomial trees for "
       "broadcast and reduce; power-of-two groups",
       {Op::BROADCAST, Op::REDUCE, Op::ALL_GATHER, Op::REDUCE_SCATTER, Op::ALL_REDUCE,
        Op::BARRIER}},
      {Algorithm::HIERARCHICAL,
       "hierarchical",
       "intra-node ring reduce-scatter, inter-node ring all-reduce per local rank, intra-node "
       "ring all-gather",
       {Op::ALL_REDUCE}},
      {Algorithm::NVLS,
       "nvls",
       "NVLink SHARP: the NVSwitch reduces and multicasts; one node whose NVSwitch supports "
       "in-switch reduction",
       {Op::ALL_REDUCE}},
      {Algorithm::NVLS_TREE,
       "nvls_tree",
       "NCCL's NVLSTree: NVLink SHARP inside each node, a double binary tree per rail between "
       "the nodes, pipelined; two or more nodes whose NVSwitches support in-switch reduction",
       {Op::ALL_REDUCE}},
  };
  return registry;
}

std::string to_string(Algorithm algorithm) {
  for (const auto& info : collective_algorithms())
    if (info.id == algorithm) return info.name;
  return "?";
}

Algorithm parse_algorithm(std::string_view name, std::string_view field) {
  std::vector<std::string> valid;
  for (const auto& info : collective_algorithms()) {
    if (info.name == name) return info.id;
    valid.push_back(info.name);
  }
  throw ValidationError::unknown_name(field, name, valid);
}

std::string to_string(Protocol protocol) {
  switch (protocol) {
    case Protocol::LL:
      return "LL";
    case Protocol::LL128:
      return "LL128";
    case Protocol::SIMPLE:
      return "Simple";
  }
  return "?";
}

BatchSpec CollectiveSchedule::batch(int p) const {
  BatchSpec b;
  auto begin = pattern_begin[static_cast<size_t>(p)];
  auto end = pattern_begin[static_cast<size_t>(p) + 1];
  b.flows = flows.data() + begin;
  b.count = end - begin;
  if (!routes.empty()) b.routes = routes.data() + begin;
  b.wire_factor = wire_factor;
  b.path_latency = path_latency;
  return b;
}

namespace {

const AlgorithmInfo& info_of(Algorithm a) {
  for (const auto& info : collective_algorithms())
    if (info.id == a) return info;
  throw InternalError("unregistered algorithm");
}

}  // namespace

bool implements(Algorithm a, Op op) {
  const auto& ops = info_of(a).ops;
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

}  // namespace loom::sim
