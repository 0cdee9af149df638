// ddprun-allreduce-perf: nccl-tests' all_reduce_perf for ddprun's bundled backends. Rank 0
// prints the table (or --json); #wrong checks one extra allreduce of known values per size.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "common/errors.h"
#include "worker/check_values.h"
#include "worker/perf_report.h"
#include "worker/program.h"
#include "worker/program_cli.h"

namespace ddprun::worker {
namespace {

constexpr const char* kProgram = "ddprun-allreduce-perf";

struct PerfOptions {
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  double step_factor = 2;
  int iters = 20;
  int warmup_iters = 5;
  std::string backend = "auto";
  std::string datatype = "float";
  bool json = false;
  double timeout_s = 60;
};

// Sums a host value over ranks through the communicator itself.
template <typename T>
T SumOverRanks(Communicator& comm, T value) {
  auto buffer = comm.Allocate(sizeof(T));
  buffer->Upload(&value, sizeof(T));
  comm.Allreduce(*buffer, 1, DataTypeOf<T>());
  buffer->Download(&value, sizeof(T));
  return value;
}

// Mean over ranks of the time per iteration, in microseconds.
double TimeIterations(Communicator& comm, Buffer& buffer, std::size_t count, DataType type,
                      int iters) {
  comm.Barrier();
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) comm.Allreduce(buffer, count, type);
  std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - start;
  return SumOverRanks(comm, elapsed.count() / iters) / comm.Size();
}

// One allreduce of the known pattern; returns the number of wrong elements over all ranks.
template <typename T>
std::int64_t CountWrong(Communicator& comm, Buffer& buffer, std::size_t count) {
  auto values = PatternFor<T>(comm.Rank(), count);
  buffer.Upload(values.data(), count * sizeof(T));
  comm.Allreduce(buffer, count, DataTypeOf<T>());
  buffer.Download(values.data(), count * sizeof(T));
  auto mismatch = CheckPattern(values, comm.Size());
  return SumOverRanks<std::int64_t>(comm, mismatch ? mismatch->wrong : 0);
}

PerfRow MeasureSize(Communicator& comm, Buffer& buffer, std::size_t bytes, DataType type,
                    const PerfOptions& options) {
  std::size_t count = bytes / DataTypeSize(type);
  // Zeros stay zeros: repeated in-place sums never overflow or reach inf/NaN.
  std::vector<std::byte> zeros(bytes);
  buffer.Upload(zeros.data(), bytes);
  for (int i = 0; i < options.warmup_iters; ++i) comm.Allreduce(buffer, count, type);
  double time_us = TimeIterations(comm, buffer, count, type, options.iters);
  auto wrong = VisitDataType(
      type, [&](auto zero) { return CountWrong<decltype(zero)>(comm, buffer, count); });
  return MakePerfRow(count, type, time_us, comm.Size(), static_cast<std::size_t>(wrong));
}

void PrintJson(const Job& job, const PerfOptions& options, const std::vector<PerfRow>& rows) {
  nlohmann::json out = {{"backend", job.comm->Backend()}, {"world_size", job.env.world_size},
                        {"datatype", options.datatype},   {"redop", "sum"},
                        {"iters", options.iters},         {"warmup_iters", options.warmup_iters},
                        {"rows", nlohmann::json::array()}};
  for (const auto& row : rows) out["rows"].push_back(PerfRowJson(row));
  std::cout << out.dump() << std::endl;
}

int Perf(const PerfOptions& options) {
  auto type = ParseDataType(options.datatype);
  auto sizes = SizeSeries(ParseByteSize(options.min_bytes), ParseByteSize(options.max_bytes),
                          options.step_factor, DataTypeSize(type));
  if (options.iters < 1 || options.warmup_iters < 0)
    throw UsageError("-n must be >= 1 and -w >= 0");
  auto job = Job::Join(ParseBackend(options.backend), SecondsToMs(options.timeout_s));
  bool printer = job.env.rank == 0;
  if (printer && !options.json) {
    std::printf("# ddprun-allreduce-perf: backend %s, %d ranks, %d iters, %d warmup\n%s",
                job.comm->Backend().c_str(), job.env.world_size, options.iters,
                options.warmup_iters, FormatPerfHeader().c_str());
  }
  auto buffer = job.comm->Allocate(sizes.empty() ? 0 : sizes.back());
  std::vector<PerfRow> rows;
  for (auto bytes : sizes) {
    rows.push_back(MeasureSize(*job.comm, *buffer, bytes, type, options));
    if (printer && !options.json) std::fputs(FormatPerfRow(rows.back()).c_str(), stdout);
    std::fflush(stdout);
  }
  if (printer)
    options.json ? PrintJson(job, options, rows)
                 : (void)std::fputs(FormatPerfFooter(rows).c_str(), stdout);
  buffer.reset();
  job.Finish();
  for (const auto& row : rows)
    if (row.wrong != 0) return 1;
  return 0;
}

void AddOptions(CLI::App& app, PerfOptions& options) {
  app.add_option("-b,--minbytes", options.min_bytes, "smallest size (8, 1K, 64M)")
      ->capture_default_str();
  app.add_option("-e,--maxbytes", options.max_bytes, "largest size")->capture_default_str();
  app.add_option("-f,--stepfactor", options.step_factor, "size multiplier")->capture_default_str();
  app.add_option("-n,--iters", options.iters, "timed iterations")->capture_default_str();
  app.add_option("-w,--warmup_iters", options.warmup_iters, "untimed iterations first")
      ->capture_default_str();
  app.add_option("--backend", options.backend, "cpu, nccl or auto")
      ->type_name(BackendTypeName())
      ->capture_default_str();
  app.add_option("-d,--datatype", options.datatype, "float, double, int32, int64")
      ->type_name(DataTypeTypeName())
      ->capture_default_str();
  app.add_flag("--json", options.json, "print one JSON object instead of the table");
  app.add_option("--timeout", options.timeout_s, "seconds for rendezvous and each collective")
      ->capture_default_str();
}

}  // namespace
}  // namespace ddprun::worker

int main(int argc, char** argv) {
  using namespace ddprun::worker;
  PerfOptions options;
  CLI::App app{"Allreduce bandwidth (nccl-tests' table); run under ddprun or torchrun."};
  AddVersionFlag(app, kProgram);
  AddOptions(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return error.get_exit_code() == 0 ? app.exit(error) : (app.exit(error), 2);
  }
  return RunProgram(kProgram, [&] { return Perf(options); });
}
