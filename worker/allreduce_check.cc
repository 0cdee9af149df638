// ddprun-allreduce-check: allreduces known values of several sizes and every type, checks
// the exact sums, and prints "rank R/W ok: ..." per rank. A mismatch names rank, type, element
// index and expected/actual value; a broken job fails within --timeout instead of hanging.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "worker/check_values.h"
#include "worker/program.h"
#include "worker/program_cli.h"

namespace ddprun::worker {
namespace {

constexpr const char* kProgram = "ddprun-allreduce-check";
const std::vector<std::size_t> kCounts = {1, 7, 1000, 65537, 1 << 20};

struct CheckOptions {
  std::string backend = "auto";
  double timeout_s = 60;
  int corrupt_rank = -1;  // testing aid: this rank perturbs one element of its input
};

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

// Allreduces the pattern; returns "" or a description of the first wrong element.
template <typename T>
std::string CheckOne(Job& job, std::size_t count, int corrupt_rank) {
  auto values = PatternFor<T>(job.env.rank, count);
  if (job.env.rank == corrupt_rank) values[count / 2] += 1;
  auto buffer = job.comm->Allocate(count * sizeof(T));
  buffer->Upload(values.data(), count * sizeof(T));
  job.comm->Allreduce(*buffer, count, DataTypeOf<T>());
  buffer->Download(values.data(), count * sizeof(T));
  auto mismatch = CheckPattern(values, job.env.world_size);
  if (!mismatch) return "";
  return std::string(DataTypeName(DataTypeOf<T>())) + " x " + std::to_string(count) +
         " elements: index " + std::to_string(mismatch->index) + " expected " +
         Number(mismatch->expected) + " actual " + Number(mismatch->actual) + " (" +
         std::to_string(mismatch->wrong) + " wrong)";
}

int Check(const CheckOptions& options) {
  auto job = Job::Join(ParseBackend(options.backend), SecondsToMs(options.timeout_s));
  int failures = 0;
  for (auto type : AllDataTypes()) {
    for (auto count : kCounts) {
      auto error = VisitDataType(type, [&](auto zero) {
        return CheckOne<decltype(zero)>(job, count, options.corrupt_rank);
      });
      if (error.empty()) continue;
      std::fprintf(stderr, "%s: %s: allreduce MISMATCH: %s\n", kProgram, job.Who().c_str(),
                   error.c_str());
      ++failures;
    }
  }
  job.comm->Barrier();
  std::string backend = job.comm->Backend();
  job.Finish();
  if (failures != 0) return 1;
  std::printf(
      "%s ok: backend=%s, %zu allreduces (float, double, int32, int64 x 1..%zu "
      "elements) exact, barrier ok\n",
      job.Who().c_str(), backend.c_str(), AllDataTypes().size() * kCounts.size(), kCounts.back());
  return 0;
}

}  // namespace
}  // namespace ddprun::worker

int main(int argc, char** argv) {
  using namespace ddprun::worker;
  CheckOptions options;
  CLI::App app{"Checks ddprun's bundled allreduce; run under ddprun or torchrun."};
  AddVersionFlag(app, kProgram);
  app.add_option("--backend", options.backend, "cpu, nccl or auto")
      ->type_name(BackendTypeName())
      ->capture_default_str();
  app.add_option("--timeout", options.timeout_s, "seconds for rendezvous and each collective")
      ->capture_default_str();
  app.add_option("--corrupt-rank", options.corrupt_rank,
                 "testing aid: this rank adds 1 to one input element");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return error.get_exit_code() == 0 ? app.exit(error) : (app.exit(error), 2);
  }
  return RunProgram(kProgram, [&] { return Check(options); });
}
