#include "models/parallel_dim.hpp"

namespace loom::models {

std::string to_string(Dim dim) {
  switch (dim) {
    case Dim::TP:
      return "tp";
    case Dim::CP:
      return "cp";
    case Dim::EP:
      return "ep";
    case Dim::DP:
      return "dp";
    case Dim::PP:
      return "pp";
    case Dim::EDP:
      return "edp";
  }
  return "?";
}

}  // namespace loom::models
