#include "worker/program.h"

#include <cstdio>
#include <exception>

#include "common/errors.h"

namespace ddprun::worker {

int RunProgram(const char* program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const UsageError& error) {
    std::fprintf(stderr, "%s: %s\n", program, error.what());
    return 2;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s: %s\n", program, error.what());
    return 1;
  }
}

Job Job::Join(BackendKind backend, std::chrono::milliseconds timeout) {
  Job job;
  job.env = ReadWorkerEnvFromProcess();
  job.store = std::make_unique<WorkerStore>(job.env, timeout);
  job.comm = CreateCommunicator(job.env, *job.store, CommunicatorConfig{backend, timeout});
  return job;
}

std::string Job::Who() const {
  return "rank " + std::to_string(env.rank) + "/" + std::to_string(env.world_size);
}

void Job::Finish() {
  comm.reset();
  store->Finish();
  store.reset();
}

std::chrono::milliseconds SecondsToMs(double seconds) {
  if (!(seconds > 0)) throw UsageError("--timeout must be a positive number of seconds");
  return std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
}

}  // namespace ddprun::worker
