#include "worker/perf_report.h"

#include <cctype>
#include <cstdio>

#include "common/errors.h"

namespace ddprun::worker {
namespace {

std::string Printf(const char* format, auto... args) {
  char line[256];
  std::snprintf(line, sizeof(line), format, args...);
  return line;
}

}  // namespace

PerfRow MakePerfRow(std::size_t count, DataType type, double time_us, int world_size,
                    std::size_t wrong) {
  PerfRow row;
  row.count = count;
  row.type = type;
  row.bytes = count * DataTypeSize(type);
  row.time_us = time_us;
  row.wrong = wrong;
  row.algbw_gbps = time_us > 0 ? static_cast<double>(row.bytes) / (time_us * 1e3) : 0;
  row.busbw_gbps = row.algbw_gbps * 2.0 * (world_size - 1) / world_size;
  return row;
}

std::size_t ParseByteSize(const std::string& text) {
  std::size_t end = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &end);
  } catch (const std::exception&) {
    throw UsageError("size '" + text + "' is not a number of bytes (e.g. 8, 1K, 64M, 1G)");
  }
  std::string suffix = text.substr(end);
  int shift = 0;
  if (suffix.size() == 1) {
    auto pos = std::string("KMG").find(static_cast<char>(std::toupper(suffix[0])));
    if (pos == std::string::npos) throw UsageError("size '" + text + "': unknown suffix");
    shift = 10 * static_cast<int>(pos + 1);
  } else if (!suffix.empty()) {
    throw UsageError("size '" + text + "': unknown suffix");
  }
  return static_cast<std::size_t>(value) << shift;
}

std::vector<std::size_t> SizeSeries(std::size_t min_bytes, std::size_t max_bytes, double factor,
                                    std::size_t element_size) {
  if (factor <= 1.0) throw UsageError("--stepfactor must be greater than 1");
  std::vector<std::size_t> sizes;
  for (double bytes = static_cast<double>(min_bytes); bytes <= static_cast<double>(max_bytes);
       bytes *= factor) {
    auto count = static_cast<std::size_t>(bytes) / element_size;
    sizes.push_back((count == 0 ? 1 : count) * element_size);
  }
  return sizes;
}

std::string FormatPerfHeader() {
  return "#       size         count      type   redop     time   algbw   busbw  #wrong\n"
         "#        (B)    (elements)                       (us)  (GB/s)  (GB/s)        \n";
}

std::string FormatPerfRow(const PerfRow& row) {
  return Printf("%12zu  %12zu  %8s  %6s  %7.1f  %6.2f  %6.2f  %6zu\n", row.bytes, row.count,
                DataTypeName(row.type), "sum", row.time_us, row.algbw_gbps, row.busbw_gbps,
                row.wrong);
}

std::string FormatPerfFooter(const std::vector<PerfRow>& rows) {
  double total = 0;
  std::size_t wrong = 0;
  for (const auto& row : rows) {
    total += row.busbw_gbps;
    wrong += row.wrong;
  }
  double average = rows.empty() ? 0 : total / static_cast<double>(rows.size());
  return Printf("# Out of bounds values : %zu %s\n# Avg bus bandwidth    : %g \n", wrong,
                wrong == 0 ? "OK" : "FAILED", average);
}

nlohmann::json PerfRowJson(const PerfRow& row) {
  return {{"size", row.bytes},
          {"count", row.count},
          {"type", DataTypeName(row.type)},
          {"redop", "sum"},
          {"time_us", row.time_us},
          {"algbw_gbps", row.algbw_gbps},
          {"busbw_gbps", row.busbw_gbps},
          {"wrong", row.wrong}};
}

}  // namespace ddprun::worker
