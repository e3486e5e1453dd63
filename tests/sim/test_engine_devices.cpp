// Device-addressed transfers (a flow between any two vertices, e.g. a GPU and a host CPU) and
// arrival-order streams (a server's request queue).
#include <doctest/doctest.h>

#include "common/error.hpp"
#include "sim/engine.hpp"
#include "star_cluster.hpp"

using namespace loom;
using namespace loom::sim;

using testing::raw;

TEST_CASE("sim::Engine: a device transfer is one plain flow, latency + bytes / bandwidth") {
  // star(3): GPU - switch - GPU is 2 hops of h; S bytes at B: 2h + S/B, no NCCL costs even
  // with the default cost options.
  const double B = 100e9, h = 1e-6, S = 4e6;
  auto cluster = testing::star(3, B, h);
  EngineOptions o = raw();
  o.cost = {};  // NCCL overheads on: they must not apply to a device transfer
  Engine e(cluster, o);
  const auto v0 = cluster.gpu_vertex(0), v2 = cluster.gpu_vertex(2);
  const auto sw = cluster.find_vertex("node0/nvswitch");
  TransferSpec t;
  t.bytes = S;
  t.src_vertex = v0;
  t.dst_vertex = v2;
  t.label = "push";
  const TaskId a = e.add_transfer(t);
  TransferSpec to_switch = t;  // a vertex that is not a GPU: one hop
  to_switch.dst_vertex = sw;
  const TaskId b = e.add_transfer(to_switch);
  TransferSpec local = t;  // same device at both ends: nothing to move
  local.dst_vertex = v0;
  const TaskId c = e.add_transfer(local);
  e.run();
  // a and b share GPU 0's uplink for their common part: each gets B/2 while both run.
  // b: 1 hop, S at B/2 -> h + 2S/B. a: its first S bytes at B/2 too (the shared uplink), so
  // it ends with b; both carry S at B/2 -> 2S/B, a's path 2h.
  CHECK(e.finish(b) == to_sim_time(h + 2 * S / B));
  CHECK(e.finish(a) == to_sim_time(2 * h + 2 * S / B));
  CHECK(e.finish(c) == 0);
}

TEST_CASE("sim::Engine: device transfers reject unknown vertices and arrival streams") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  TransferSpec t;
  t.bytes = 1;
  t.src_vertex = 0;
  t.dst_vertex = 99;
  CHECK_THROWS_WITH_AS(e.add_transfer(t), doctest::Contains("vertex 99 does not exist"),
                       ValidationError);
  const StreamId q = e.add_stream("server/queue", -1, StreamOrder::ARRIVAL);
  t.dst_vertex = 1;
  t.dst_stream = q;
  CHECK_THROWS_WITH_AS(e.add_transfer(t), doctest::Contains("arrival order"), ValidationError);
}

TEST_CASE("sim::Engine: an arrival stream serves tasks in the order they became ready") {
  // Issue order a, b, c on the server queue; b is ready at 10, c at 20, a at 30. FIFO
  // would run a first (at 30) and hold b and c behind it; arrival order runs b at 10 (5 long,
  // done 15), c at 20 (done 25), a at 30.
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  const StreamId w = e.add_stream("worker");
  const StreamId q = e.add_stream("server", -1, StreamOrder::ARRIVAL);
  const StreamId w2 = e.add_stream("worker2");
  const StreamId w3 = e.add_stream("worker3");
  const TaskId ra = e.add_compute(w, 30, "ready a");
  const TaskId rb = e.add_compute(w2, 10, "ready b");
  const TaskId rc = e.add_compute(w3, 20, "ready c");
  const TaskId a = e.add_compute(q, 5, "a", {ra});
  const TaskId b = e.add_compute(q, 5, "b", {rb});
  const TaskId c = e.add_compute(q, 5, "c", {rc});
  // Two tasks ready while the queue is busy wait their turn in ready order.
  const TaskId d = e.add_compute(q, 100, "d", {c});
  const TaskId f = e.add_compute(q, 1, "f", {a});
  const TaskId g = e.add_compute(w, 1, "g");  // after ready-a on the worker: ready at 31
  const TaskId h = e.add_compute(q, 1, "h", {g});
  e.run();
  CHECK(e.start(b) == 10);
  CHECK(e.start(c) == 20);
  CHECK(e.start(d) == 25);
  CHECK(e.start(a) == 125);  // ready at 30, behind d (ready at 25)
  CHECK(e.start(h) == 130);  // ready at 31, behind a
  CHECK(e.start(f) == 131);  // ready at 130 when a finished, behind h
  CHECK(e.makespan() == 132);
}
