// Connects a worker to its job's store exactly as PyTorch's env:// init does: with
// TORCHELASTIC_USE_AGENT_STORE=True every rank is a client of MASTER_ADDR:MASTER_PORT;
// otherwise rank 0 also hosts a TcpStoreServer on MASTER_PORT (own io_context, background
// thread) and connects to it like everyone else. Keys live under
// "ddprun_worker/attempt_<TORCHELASTIC_RESTART_COUNT>" so restarts never see stale keys.
#pragma once
#include <chrono>
#include <memory>
#include <string>

#include "store/store.h"
#include "worker/worker_env.h"

namespace ddprun::worker {

class WorkerStore {
 public:
  // Binds (rank 0 without an agent store) and connects; both bounded by `timeout`, which is
  // also every Get/Wait's timeout. Throws SystemError / StoreConnectionError.
  WorkerStore(const WorkerEnv& env, std::chrono::milliseconds timeout);
  // Stops the hosted server without waiting for anyone: call Finish() first on success.
  ~WorkerStore();
  WorkerStore(const WorkerStore&) = delete;
  WorkerStore& operator=(const WorkerStore&) = delete;

  // A namespace "<attempt prefix>/<name>" on the shared connection.
  std::shared_ptr<store::Store> Scoped(const std::string& name) const;
  // Scoped("<kind>_<k>") for the k-th call: ranks making the same calls in the same order
  // (one per communicator) share a fresh namespace each time.
  std::shared_ptr<store::Store> NextScope(const std::string& kind);
  bool HostsServer() const { return server_ != nullptr; }
  std::chrono::milliseconds Timeout() const { return timeout_; }
  static std::string AttemptPrefix(int restart_count);

  // Announces that this rank no longer needs the store. The hosting rank then waits (at most
  // Timeout()) until every rank has, so that nobody loses the server mid-call. Idempotent.
  void Finish();

 private:
  class Server;

  WorkerEnv env_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Server> server_;
  std::shared_ptr<store::Store> client_;  // already prefixed with AttemptPrefix
  int scopes_ = 0;
  bool finished_ = false;
};

}  // namespace ddprun::worker
