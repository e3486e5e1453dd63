#include <doctest/doctest.h>

#include "harness/errors.hpp"
#include "harness/shapes.hpp"
#include "tests/harness/run_loom.hpp"

using namespace loom::harness;

TEST_CASE("harness::Shapes: a shapes file gives m n k per line with its note") {
  const auto shapes =
      parse_shapes("# loom calibrate shapes\n\n4096 6144 4096 qkv x32\n8 8 8\n", "s.txt");
  REQUIRE(shapes.size() == 2);
  CHECK(shapes[0].m == 4096);
  CHECK(shapes[0].n == 6144);
  CHECK(shapes[0].k == 4096);
  CHECK(shapes[0].note == "qkv x32");
  CHECK(shapes[1].note.empty());
}

TEST_CASE("harness::Shapes: a bad line names the file and line") {
  CHECK_THROWS_WITH_AS(parse_shapes("1 2 3\n4 5\n", "s.txt"),
                       "s.txt:2: expected \"m n k\" (three positive integers), got \"4 5\"",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_shapes("1 0 3\n", "s.txt"),
                       "s.txt:1: expected \"m n k\" (three positive integers), got \"1 0 3\"",
                       UsageError);
  CHECK_THROWS_WITH_AS(parse_shapes("# nothing\n", "s.txt"),
                       "s.txt: no shapes: give one \"m n k\" line per GEMM", UsageError);
  CHECK_THROWS_AS(read_shapes("/nonexistent/shapes.txt"), UsageError);
}

TEST_CASE("harness::Shapes: the standard grid has squares and Llama-3 projections") {
  const auto grid = standard_shapes();
  CHECK(grid.size() == 19);  // 7 squares 256 .. 16384, 6 (n, k) x 2 token counts
  CHECK(grid.front().m == 256);
  // Llama-3-70B FFN up-projection at 8192 tokens: n = 28672, k = 8192 (config.json).
  bool has_70b_ffn = false;
  for (const auto& s : grid) has_70b_ffn |= s.m == 8192 && s.n == 28672 && s.k == 8192;
  CHECK(has_70b_ffn);
}

TEST_CASE("harness::Shapes: the harness reads what `loom calibrate shapes` prints") {
  const auto run = loom::testing::run_loom("calibrate shapes --model llama3-8b --tp 2");
  REQUIRE(run.status == 0);
  const auto shapes = parse_shapes(run.out, "calibrate-shapes");
  // Llama-3-8B (config.json: hidden 4096, 32 q + 8 kv heads of 128, FFN 14336, vocab 128256),
  // tp 2, seq 8192, mbs 1: qkv forward is [8192 x 4096]·[4096 x 3072] (q 2048 + k, v 512 each).
  REQUIRE_FALSE(shapes.empty());
  CHECK(shapes[0].m == 8192);
  CHECK(shapes[0].n == 3072);
  CHECK(shapes[0].k == 4096);
  CHECK(shapes[0].note.rfind("bf16 qkv_proj.fwd", 0) == 0);
  // Its weight gradient: [4096 x 8192]·[8192 x 3072].
  bool has_qkv_wgrad = false;
  for (const auto& s : shapes) has_qkv_wgrad |= s.m == 4096 && s.n == 3072 && s.k == 8192;
  CHECK(has_qkv_wgrad);
}
