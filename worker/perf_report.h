// The allreduce-perf results: nccl-tests' table (size, count, type, redop, time, algbw,
// busbw, #wrong) and a JSON form. Pure functions, no I/O.
#pragma once
#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "worker/data_type.h"

namespace ddprun::worker {

struct PerfRow {
  std::size_t bytes = 0;
  std::size_t count = 0;
  DataType type = DataType::kFloat;
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  std::size_t wrong = 0;
};

// algbw = bytes / time; busbw = algbw * 2 (n - 1) / n, nccl-tests' allreduce factor.
PerfRow MakePerfRow(std::size_t count, DataType type, double time_us, int world_size,
                    std::size_t wrong);
// "1K", "64M", "2G", "4096" -> bytes (powers of 1024); throws UsageError.
std::size_t ParseByteSize(const std::string& text);
// min, min*factor, ... up to max, each rounded down to whole elements (at least one).
std::vector<std::size_t> SizeSeries(std::size_t min_bytes, std::size_t max_bytes, double factor,
                                    std::size_t element_size);

std::string FormatPerfHeader();
std::string FormatPerfRow(const PerfRow& row);
std::string FormatPerfFooter(const std::vector<PerfRow>& rows);  // "# Avg bus bandwidth ..."
nlohmann::json PerfRowJson(const PerfRow& row);

}  // namespace ddprun::worker
