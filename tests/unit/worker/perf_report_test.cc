// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
#ifdef DDPRUN_WORKER_TESTS
#include "worker/perf_report.h"

#include <catch2/catch.hpp>
#include <sstream>

#include "common/errors.h"

namespace ddprun::worker {
namespace {

TEST_CASE("busbw is algbw * 2(n-1)/n", "[worker]") {
  auto row = MakePerfRow(1'000'000, DataType::kFloat, 1000.0, 4, 0);
  CHECK(row.bytes == 4'000'000);
  CHECK(row.algbw_gbps == Approx(4.0));  // 4 MB in 1 ms
  CHECK(row.busbw_gbps == Approx(6.0));
  CHECK(MakePerfRow(10, DataType::kInt64, 1.0, 1, 0).busbw_gbps == 0);
}

TEST_CASE("byte sizes take K/M/G suffixes", "[worker]") {
  CHECK(ParseByteSize("8") == 8);
  CHECK(ParseByteSize("1K") == 1024);
  CHECK(ParseByteSize("64M") == 64u << 20);
  CHECK(ParseByteSize("2g") == 2ull << 30);
  CHECK_THROWS_AS(ParseByteSize("12X"), UsageError);
  CHECK_THROWS_AS(ParseByteSize("lots"), UsageError);
}

TEST_CASE("size series steps by the factor in whole elements", "[worker]") {
  CHECK(SizeSeries(8, 64, 2, 4) == std::vector<std::size_t>{8, 16, 32, 64});
  CHECK(SizeSeries(1, 8, 2, 8) == std::vector<std::size_t>{8, 8, 8, 8});
  CHECK(SizeSeries(1024, 1024, 2, 4) == std::vector<std::size_t>{1024});
  CHECK_THROWS_AS(SizeSeries(8, 64, 1, 4), UsageError);
}

TEST_CASE("table rows have nccl-tests' eight columns", "[worker]") {
  auto row = MakePerfRow(256, DataType::kInt32, 12.5, 2, 3);
  std::istringstream fields(FormatPerfRow(row));
  std::vector<std::string> columns;
  for (std::string field; fields >> field;) columns.push_back(field);
  CHECK(columns ==
        std::vector<std::string>{"1024", "256", "int32", "sum", "12.5", "0.08", "0.08", "3"});
  CHECK(FormatPerfFooter({row}).find("FAILED") != std::string::npos);
  CHECK(PerfRowJson(row)["wrong"] == 3);
}

}  // namespace
}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
