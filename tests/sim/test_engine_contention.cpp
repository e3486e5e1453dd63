// Contention: compute on a stream slowed while a contending (communication) stream is busy.
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "sim/engine.hpp"
#include "star_cluster.hpp"

using namespace loom;
using namespace loom::sim;

using testing::raw;

TEST_CASE("sim::Engine: compute slows while a contending stream is busy, by hand") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  auto compute = e.add_stream("gpu0/compute", 0);
  auto comm = e.add_stream("gpu0/dp", 0);
  e.add_contention(compute, comm, 2.0);
  auto gemm = e.add_compute(compute, 1000, "gemm");
  auto nccl = e.add_compute(comm, 400, "nccl");  // any task on the contender counts
  e.run();
  // [0, 400): half speed, 200 of 1000 done; the remaining 800 at full speed: ends at 1200.
  CHECK(e.finish(nccl) == 400);
  CHECK(e.start(gemm) == 0);
  CHECK(e.finish(gemm) == 1200);
}

TEST_CASE("sim::Engine: contention re-times a task when the contender starts mid-way") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  auto compute = e.add_stream("c");
  auto comm = e.add_stream("d");
  auto other = e.add_stream("o");
  e.add_contention(compute, comm, 1.5);
  auto gemm = e.add_compute(compute, 1000, "gemm");
  auto gate = e.add_compute(other, 300, "gate");
  auto nccl = e.add_compute(comm, 300, "nccl", {gate});  // runs [300, 600)
  auto after = e.add_compute(compute, 100, "after");
  e.run();
  // 300 at full speed, 300 ps at 1/1.5 (200 done), 500 left at full speed: 1100.
  CHECK(e.finish(nccl) == 600);
  CHECK(e.finish(gemm) == 1100);
  CHECK(e.start(after) == 1100);
  CHECK(e.finish(after) == 1200);  // the contender is idle again
}

TEST_CASE("sim::Engine: contention without an overlapping contender changes nothing") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  auto compute = e.add_stream("c");
  auto comm = e.add_stream("d");
  e.add_contention(compute, comm, 3.0);
  auto a = e.add_compute(compute, 500, "a");
  auto b = e.add_compute(comm, 200, "b", {a});
  e.run();
  CHECK(e.finish(a) == 500);
  CHECK(e.finish(b) == 700);
}

TEST_CASE("sim::Engine: add_contention rejects a self-contention and a speed-up") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  auto c = e.add_stream("c");
  auto d = e.add_stream("d");
  CHECK_THROWS_AS(e.add_contention(c, c, 2.0), ValidationError);
  CHECK_THROWS_AS(e.add_contention(c, d, 0.5), ValidationError);
}
