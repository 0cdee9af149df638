// The element types the allreduce supports, with their names ("float", "int32", ...) as the
// programs print and parse them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ddprun::worker {

enum class DataType { kFloat, kDouble, kInt32, kInt64 };

const std::vector<DataType>& AllDataTypes();
std::size_t DataTypeSize(DataType type);
const char* DataTypeName(DataType type);
// Accepts the names above plus float32/float64/int/long aliases; throws UsageError.
DataType ParseDataType(const std::string& name);

template <typename T>
constexpr DataType DataTypeOf();
template <>
constexpr DataType DataTypeOf<float>() {
  return DataType::kFloat;
}
template <>
constexpr DataType DataTypeOf<double>() {
  return DataType::kDouble;
}
template <>
constexpr DataType DataTypeOf<std::int32_t>() {
  return DataType::kInt32;
}
template <>
constexpr DataType DataTypeOf<std::int64_t>() {
  return DataType::kInt64;
}

// Calls fn(T{}) with the C++ type of `type`.
template <typename Fn>
decltype(auto) VisitDataType(DataType type, Fn&& fn) {
  switch (type) {
    case DataType::kFloat:
      return fn(float{});
    case DataType::kDouble:
      return fn(double{});
    case DataType::kInt32:
      return fn(std::int32_t{});
    case DataType::kInt64:
      break;
  }
  return fn(std::int64_t{});
}

}  // namespace ddprun::worker
