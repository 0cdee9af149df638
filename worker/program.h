// What the bundled worker programs share: their one-line error reporting and exit codes
// (2 bad usage or environment, 1 any other failure), and the connection to the job.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "worker/backend.h"
#include "worker/worker_env.h"
#include "worker/worker_store.h"

namespace ddprun::worker {

// Runs body(); prints "<program>: <message>" to stderr for an exception and returns its code.
int RunProgram(const char* program, const std::function<int()>& body);

// A worker's connection to the job: environment, store, communicator.
struct Job {
  WorkerEnv env;
  std::unique_ptr<WorkerStore> store;
  std::unique_ptr<Communicator> comm;

  // Reads the environment, connects and builds the communicator; all bounded by timeout.
  static Job Join(BackendKind backend, std::chrono::milliseconds timeout);
  // "rank R/W"
  std::string Who() const;
  // Releases the communicator, then the store (rank 0 waits for everyone to be done).
  void Finish();
};

std::chrono::milliseconds SecondsToMs(double seconds);

}  // namespace ddprun::worker
