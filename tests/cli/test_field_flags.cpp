// The CLI's spelling of library field keys: library errors name keys ("nodes"), and the
// commands pass flag_names() so that the user reads the flags they typed.
#include <doctest/doctest.h>

#include "cli/field_flags.hpp"
#include "common/error.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::cli;

TEST_CASE("cli::FieldFlags: a library key becomes its flag") {
  CHECK(flag_of("nodes") == "--nodes");
  CHECK(flag_of("algorithm") == "--algo");  // the one flag that is not "--" + key
  CHECK(flag_of("grad_dtype") == "--grad-dtype");
  CHECK(flag_names()("order") == "--order");
  CHECK(FieldNames()("order") == "order");
}

TEST_CASE("cli::FieldFlags: a library error spelled with flag_names() names the flags") {
  CHECK_THROWS_WITH_AS(topo::load_cluster(topo::ClusterRequest{"dgx-h100", {}, 12}, flag_names()),
                       "--gpus 12 is not a multiple of the 8 GPUs per node of 'dgx-h100'; use a "
                       "multiple or --nodes",
                       ValidationError);
  CHECK_THROWS_WITH_AS(topo::load_cluster(topo::ClusterRequest{"", {}, {}}, flag_names()),
                       doctest::Contains("--cluster is required"), ValidationError);
}
