#include <doctest/doctest.h>

#include <cmath>

#include <cstdint>
#include <limits>

#include "common/error.hpp"
#include "common/units.hpp"

using namespace loom;

TEST_CASE("common::units: bytes with SI and IEC prefixes") {
  CHECK(parse_bytes("80GiB") == 80.0 * 1024 * 1024 * 1024);
  CHECK(parse_bytes("80GB") == 80e9);
  CHECK(parse_bytes("1.5 kB") == 1500.0);
  CHECK(parse_bytes("4096B") == 4096.0);
  CHECK(parse_bytes("2KiB") == 2048.0);
}

TEST_CASE("common::units: bandwidth in bits and bytes") {
  CHECK(parse_bandwidth("400Gbps") == doctest::Approx(50e9));
  CHECK(parse_bandwidth("400Gb/s") == doctest::Approx(50e9));
  CHECK(parse_bandwidth("900GBps") == doctest::Approx(900e9));
  CHECK(parse_bandwidth("900GB/s") == doctest::Approx(900e9));
}

TEST_CASE("common::units: times and FLOP rates") {
  CHECK(parse_time("1.5us") == doctest::Approx(1.5e-6).scale(0));
  CHECK(parse_time("20ns") == doctest::Approx(20e-9).scale(0));
  CHECK(parse_time("3ms") == doctest::Approx(3e-3).scale(0));
  CHECK(parse_time("2h") == doctest::Approx(7200.0));
  CHECK(parse_flop_rate("989TFLOPS") == doctest::Approx(989e12));
  CHECK(parse_flop_rate("312 TFLOP/s") == doctest::Approx(312e12));
}

TEST_CASE("common::units: a missing or wrong unit is a ValidationError naming the field") {
  CHECK_THROWS_WITH_AS(parse_bytes("80", "hbm"), doctest::Contains("hbm: '80' has no unit"),
                       ValidationError);
  CHECK_THROWS_WITH_AS(parse_bandwidth("80GiB", "bw"), doctest::Contains("unknown unit 'GiB'"),
                       ValidationError);
  CHECK_THROWS_AS(parse_time("fast"), ValidationError);
  CHECK_THROWS_AS(parse_bytes("-1GB"), ValidationError);
}

TEST_CASE("common::units: formatting picks a readable prefix") {
  CHECK(format_bytes(80.0 * GiB) == "80.00 GiB");
  CHECK(format_bandwidth(450e9) == "450.0 GB/s");
  CHECK(format_time(1.5e-6) == "1.50 us");
  CHECK(format_count(8.03e9) == "8.03B");
}

TEST_CASE("common::units: rounded figures never go through an out-of-range integer") {
  // llrint(1e30) is INT64_MIN: `plan --tokens 1e30` printed -9,223,372,036,854,775,808.
  CHECK(format_rounded(1234567.4) == "1,234,567");
  CHECK(format_rounded(999999999999999.0) == "999,999,999,999,999");
  CHECK(format_rounded(1e15) == "1e+15");
  CHECK(format_rounded(1e30) == "1e+30");
  CHECK(format_rounded(-2.5e19) == "-2.5e+19");
  CHECK(format_rounded(INFINITY) == "inf");
}

TEST_CASE("common::units: whole numbers with their thousands grouped") {
  CHECK(format_grouped(0) == "0");
  CHECK(format_grouped(999) == "999");
  CHECK(format_grouped(1000) == "1,000");
  CHECK(format_grouped(16384) == "16,384");
  CHECK(format_grouped(1234567) == "1,234,567");
  CHECK(format_grouped(-1000) == "-1,000");
  CHECK(format_grouped(-999) == "-999");
  CHECK(format_grouped(std::numeric_limits<std::int64_t>::min()) == "-9,223,372,036,854,775,808");
}

TEST_CASE("common::units: a quantity that overflows after scaling is rejected") {
  // 1e300 is a finite double but 1e300 GB is not: used to return inf.
  CHECK_THROWS_WITH_AS(parse_bytes("1e300GB", "--cuda-context"),
                       doctest::Contains("--cuda-context: '1e300GB' is too large"),
                       loom::ValidationError);
  CHECK(parse_bytes("1e300B") == doctest::Approx(1e300));
}

TEST_CASE("common::units: token counts take binary k and M suffixes") {
  CHECK(parse_binary_count("8192") == 8192);
  CHECK(parse_binary_count("8k") == 8192);  // k = 1024, not 1000: sequence lengths are powers of 2
  CHECK(parse_binary_count("8K") == 8192);
  CHECK(parse_binary_count("128k") == 131072);
  CHECK(parse_binary_count("1M") == 1048576);
  for (const char* bad :
       {"", "k", "8x", "1.5k", "-8k", "0", "8kb", "8 k", "99999999999999999999"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(parse_binary_count(bad, "--seq"), doctest::Contains("--seq"),
                         ValidationError);
  }
}

TEST_CASE("common::units: numbers and money for sentences: grouped, no exponent") {
  // `loom plan --budget 1e6` once printed "1e+06" and "7026736.13 USD" (issue 33).
  CHECK(format_number(1e6) == "1,000,000");
  CHECK(format_number(30) == "30");
  CHECK(format_number(2.5) == "2.5");
  CHECK(format_number(1234.125, 2) == "1,234.13");
  CHECK(format_number(0.004) == "0");
  CHECK(format_number(-0.5) == "-0.5");
  CHECK(format_number(-1234.5) == "-1,234.5");
  CHECK(format_number(2e18) == "2e+18");
  CHECK(format_money(7026736.13) == "$7,026,736");
  CHECK(format_money(1e6) == "$1,000,000");
  CHECK(format_money(12.5) == "$12.50");
  CHECK(format_money(999.994) == "$999.99");
}
