// The fast tier's caches that its threads share (strategies/search/fast_model.hpp): the
// memory model's op lists are built once per layer key for every thread, not copied into
// each (issue 34: a DeepSeek-V3 / 2,048 H100 search peaked at 1.65 GB on 2 threads, 1.09 GB
// on one); the answers are those of an estimator of its own.
#include <doctest/doctest.h>

#include <memory>

#include "models/model_loader.hpp"
#include "strategies/search/fast_estimate.hpp"
#include "strategies/search/fast_model.hpp"
#include "topologies/cluster_presets.hpp"

using namespace loom;
using namespace loom::strategies;

TEST_CASE("strategies::FastEstimator: threads share one copy of the memory model's op lists") {
  const auto model = models::load_model("llama3-8b");
  const auto cluster = topo::load_cluster(topo::ClusterRequest{"dgx-h100", 1, std::nullopt});
  models::TrainingPlan a;
  a.tp = 2;
  a.pp = 2;
  a.dp = 2;
  a.seq = 4096;
  a.mbs = 1;
  a.gbs = 16;
  models::TrainingPlan b = a;
  b.tp = 4;
  b.dp = 1;
  const auto shared = std::make_shared<SharedCollectiveTimes>();
  FastEstimator one(model, cluster, {}, shared), two(model, cluster, {}, shared);
  FastEstimator alone(model, cluster);
  const double a1 = one.peak_memory_bytes(a);
  CHECK(shared->memory_ops_built() == 1);
  // The second "thread" asks for the same layer key: no second copy (counted, not timed).
  const double a2 = two.peak_memory_bytes(a);
  CHECK(shared->memory_ops_built() == 1);
  CHECK(a1 == a2);
  CHECK(a1 == alone.peak_memory_bytes(a));
  // Another layer key (tp 4) is one more entry, whichever thread asks.
  CHECK(two.peak_memory_bytes(b) == alone.peak_memory_bytes(b));
  CHECK(shared->memory_ops_built() == 2);
  CHECK(one.step_time_s(b) == two.step_time_s(b));
  CHECK(shared->memory_ops_built() == 2);
}
