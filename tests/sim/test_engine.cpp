#include <doctest/doctest.h>

#include "common/error.hpp"
#include "sim/engine.hpp"
#include "star_cluster.hpp"

using namespace loom;
using namespace loom::sim;

using testing::raw;

TEST_CASE("sim::Engine: a stream runs its tasks in issue order, streams run in parallel") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  auto s0 = e.add_stream("gpu0/compute", 0);
  auto s1 = e.add_stream("gpu1/compute", 1);
  auto a = e.add_compute(s0, 100, "a");
  auto b = e.add_compute(s0, 50, "b");
  auto c = e.add_compute(s1, 30, "c");
  auto d = e.add_compute(s1, 10, "d", {a});  // waits for a on the other stream
  e.run();
  CHECK(e.start(a) == 0);
  CHECK(e.finish(a) == 100);
  CHECK(e.start(b) == 100);
  CHECK(e.finish(b) == 150);
  CHECK(e.start(c) == 0);
  CHECK(e.start(d) == 100);
  CHECK(e.finish(d) == 110);
  CHECK(e.makespan() == 150);
  CHECK(e.busy_time(s1) == 40);
  CHECK(e.slices().size() == 4);
}

TEST_CASE("sim::Engine: a task blocked on a dependency blocks its stream (FIFO, like CUDA)") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  Engine e(cluster, raw());
  auto s0 = e.add_stream("s0");
  auto s1 = e.add_stream("s1");
  auto long_task = e.add_compute(s1, 1000, "long");
  auto waiting = e.add_compute(s0, 10, "waits", {long_task});
  auto after = e.add_compute(s0, 10, "after");
  e.run();
  CHECK(e.start(waiting) == 1000);
  CHECK(e.start(after) == 1010);
}

TEST_CASE("sim::Engine: a deadlock is an InternalError, bad ids are ValidationErrors") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  {
    Engine e(cluster, raw());
    auto s = e.add_stream("s");
    auto a = e.add_compute(s, 1, "a");
    auto b = e.add_compute(s, 1, "b");
    e.add_dependency(b, a);  // a waits for b, but b is behind a on the stream
    // An impossible task graph is the caller's bug, not bad user input (exit 1, not 2).
    CHECK_THROWS_WITH_AS(e.run(), doctest::Contains("deadlock"), loom::InternalError);
  }
  Engine e(cluster, raw());
  CHECK_THROWS_AS(e.add_compute(7, 1, "x"), ValidationError);
  auto s = e.add_stream("s");
  CHECK_THROWS_AS(e.add_compute(s, -1, "x"), ValidationError);
  CHECK_THROWS_AS(e.add_compute(s, 1, "x", {42}), ValidationError);
}

TEST_CASE("sim::Engine: blocking transfer holds both streams; isend/irecv holds none") {
  // One transfer of S over 2 hops at B and hop latency h: t = 2h + S/B.
  const double B = 100e9, h = 1e-6, S = 1e6;
  auto cluster = testing::star(4, B, h);
  Engine e(cluster, raw());
  auto s0 = e.add_stream("gpu0/comm", 0);
  auto s1 = e.add_stream("gpu1/comm", 1);
  auto c1 = e.add_stream("gpu3/compute", 3);
  auto pre = e.add_compute(s1, to_sim_time(5e-6), "busy receiver");
  auto send = e.add_transfer({0, 1, S, s0, s1, "send"});
  auto async = e.add_transfer({2, 3, S, NO_STREAM, NO_STREAM, "isend"});
  auto wait = e.add_compute(c1, 0, "wait", {async});
  e.run();
  CHECK(e.start(send) == to_sim_time(5e-6));  // the receiver's stream was busy
  CHECK(e.finish(send) - e.start(send) == to_sim_time(2 * h + S / B));
  CHECK(e.start(async) == 0);
  CHECK(e.finish(async) == to_sim_time(2 * h + S / B));
  CHECK(e.start(wait) == e.finish(async));
  (void)pre;
}

TEST_CASE("sim::Engine: identical runs give identical timelines (determinism)") {
  auto cluster = testing::rails(2, 4, 300e9, 50e9, 5e-7);
  auto build = [&] {
    auto e = std::make_unique<Engine>(cluster, EngineOptions{});
    std::vector<StreamId> comm;
    for (int r = 0; r < 8; ++r) comm.push_back(e->add_stream(fmt::format("r{}", r), r));
    CollectiveSpec ar;
    ar.request.ranks = {0, 1, 2, 3, 4, 5, 6, 7};
    ar.request.bytes = 64e6;
    ar.streams = comm;
    ar.label = "ar";
    e->add_collective(ar);
    CollectiveSpec ag = ar;
    ag.request.op = CollectiveOp::ALL_GATHER;
    ag.request.ranks = {0, 4};
    ag.streams = {comm[0], comm[4]};
    e->add_collective(ag);
    e->add_transfer({1, 5, 1e6, NO_STREAM, NO_STREAM, "p2p"});
    e->run();
    std::string out;
    for (const auto& s : e->slices())
      out += fmt::format("{} {} {} {}\n", s.stream, s.task, s.start, s.end);
    return out;
  };
  CHECK(build() == build());
}

TEST_CASE("sim::Network: reusing a repeated step's time (memo) changes no result") {
  auto cluster = testing::rails(2, 4, 300e9, 50e9, 5e-7);
  auto finish_times = [&](bool memo) {
    EngineOptions o;
    o.memo = memo;
    Engine e(cluster, o);
    CollectiveSpec ar;
    for (int r = 0; r < 8; ++r) ar.request.ranks.push_back(r);
    ar.request.bytes = 1e8;
    ar.request.algorithm = Algorithm::RING;
    auto a = e.add_collective(ar);
    auto b = e.add_collective(ar, {a});
    auto p = e.add_transfer({0, 5, 1e7, NO_STREAM, NO_STREAM, "p2p"}, {a});  // overlaps b
    e.run();
    // Whether the memo was used, so that the comparison below compares a memoised run.
    CHECK((e.network_stats().memo_hits > 0) == memo);
    return std::vector<SimTime>{e.finish(a), e.finish(b), e.finish(p)};
  };
  CHECK(finish_times(true) == finish_times(false));
}

TEST_CASE("sim::Engine: the progress callback reports the finished share of tasks, ending at 1") {
  auto cluster = testing::star(2, 100e9, 1e-6);
  EngineOptions options = raw();
  std::vector<double> reports;
  options.progress = [&reports](double done) { reports.push_back(done); };
  Engine e(cluster, options);
  const auto s = e.add_stream("gpu0/compute", 0);
  // One event per task: 40,000 events pass the reporting interval (16,384 events) twice.
  const int tasks = 40000;
  for (int i = 0; i < tasks; ++i) e.add_compute(s, 10, "t");
  e.run();
  REQUIRE(reports.size() == 3);
  CHECK(reports[0] == doctest::Approx(16384.0 / tasks).epsilon(1e-3));
  CHECK(reports[1] == doctest::Approx(32768.0 / tasks).epsilon(1e-3));
  CHECK(reports.back() == 1.0);
}
