// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
#ifdef DDPRUN_WORKER_TESTS
#include "worker/data_type.h"

#include <catch2/catch.hpp>

#include "common/errors.h"
#include "worker/backend.h"

namespace ddprun::worker {
namespace {

TEST_CASE("data types have names and sizes that round-trip", "[worker]") {
  for (auto type : AllDataTypes()) CHECK(ParseDataType(DataTypeName(type)) == type);
  CHECK(DataTypeSize(DataType::kFloat) == 4);
  CHECK(DataTypeSize(DataType::kDouble) == 8);
  CHECK(DataTypeSize(DataType::kInt32) == 4);
  CHECK(DataTypeSize(DataType::kInt64) == 8);
  CHECK(ParseDataType("float32") == DataType::kFloat);
  CHECK_THROWS_AS(ParseDataType("half"), UsageError);
}

TEST_CASE("backend names parse", "[worker]") {
  CHECK(ParseBackend("cpu") == BackendKind::kCpu);
  CHECK(ParseBackend("gloo") == BackendKind::kCpu);
  CHECK(ParseBackend("nccl") == BackendKind::kNccl);
  CHECK(ParseBackend("auto") == BackendKind::kAuto);
  CHECK_THROWS_AS(ParseBackend("mpi"), UsageError);
}

}  // namespace
}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
