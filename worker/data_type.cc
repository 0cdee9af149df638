#include "worker/data_type.h"

#include "common/errors.h"

namespace ddprun::worker {

const std::vector<DataType>& AllDataTypes() {
  static const std::vector<DataType> kAll = {DataType::kFloat, DataType::kDouble, DataType::kInt32,
                                             DataType::kInt64};
  return kAll;
}

std::size_t DataTypeSize(DataType type) {
  return VisitDataType(type, [](auto value) { return sizeof(value); });
}

const char* DataTypeName(DataType type) {
  switch (type) {
    case DataType::kFloat:
      return "float";
    case DataType::kDouble:
      return "double";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      break;
  }
  return "int64";
}

DataType ParseDataType(const std::string& name) {
  if (name == "float" || name == "float32") return DataType::kFloat;
  if (name == "double" || name == "float64") return DataType::kDouble;
  if (name == "int32" || name == "int") return DataType::kInt32;
  if (name == "int64" || name == "long") return DataType::kInt64;
  throw UsageError("unknown data type '" + name + "' (float, double, int32, int64)");
}

}  // namespace ddprun::worker
