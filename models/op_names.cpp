// The names output gives the op kinds and collectives, and the parallel dimension each
// collective runs over (declared in models/flops.hpp).
#include "common/error.hpp"
#include "models/flops.hpp"

namespace loom::models {

std::string to_string(OpKind value) {
  switch (value) {
    case OpKind::MATMUL:
      return "matmul";
    case OpKind::ATTENTION:
      return "attention";
    case OpKind::ELEMENTWISE:
      return "elementwise";
    case OpKind::EMBEDDING:
      return "embedding";
    case OpKind::LOSS:
      return "loss";
  }
  return "?";
}

std::string to_string(CommKind value) {
  switch (value) {
    case CommKind::NONE:
      return "none";
    case CommKind::TP_ALL_REDUCE:
      return "tp_all_reduce";
    case CommKind::TP_ALL_GATHER:
      return "tp_all_gather";
    case CommKind::TP_REDUCE_SCATTER:
      return "tp_reduce_scatter";
    case CommKind::EP_ALL_TO_ALL:
      return "ep_all_to_all";
    case CommKind::EP_TOKEN_EXCHANGE:
      return "ep_token_exchange";
    case CommKind::CP_KV_EXCHANGE:
      return "cp_kv_exchange";
  }
  return "?";
}

Dim comm_dim(CommKind value) {
  switch (value) {
    case CommKind::TP_ALL_REDUCE:
    case CommKind::TP_ALL_GATHER:
    case CommKind::TP_REDUCE_SCATTER:
      return Dim::TP;
    case CommKind::EP_ALL_TO_ALL:
    case CommKind::EP_TOKEN_EXCHANGE:
      return Dim::EP;
    case CommKind::CP_KV_EXCHANGE:
      return Dim::CP;
    case CommKind::NONE:
      break;
  }
  throw InternalError("comm_dim: an op without a collective has no dimension");
}

}  // namespace loom::models
