#include "worker/worker_store.h"

#include <thread>

#include "common/asio.h"
#include "store/prefix_store.h"
#include "store/store_server_thread.h"
#include "store/tcp_store_client.h"

namespace ddprun::worker {

// The store server rank 0 hosts, on a thread of its own.
class WorkerStore::Server {
 public:
  explicit Server(int port) : server_(store::ServerOptions{"", port, {}, 1, nullptr}) {}

 private:
  store::StoreServerThread server_;
};

namespace {

std::shared_ptr<store::Store> Connect(const WorkerEnv& env, std::chrono::milliseconds timeout) {
  store::ClientOptions options;
  options.host = env.master_addr;
  options.port = env.master_port;
  options.timeout = timeout;
  options.connect_timeout = timeout;
  auto client = std::make_shared<store::TcpStoreClient>(options);
  client->SetTimeout(timeout);
  return std::make_shared<store::PrefixStore>(WorkerStore::AttemptPrefix(env.restart_count),
                                              client);
}

}  // namespace

WorkerStore::WorkerStore(const WorkerEnv& env, std::chrono::milliseconds timeout)
    : env_(env), timeout_(timeout) {
  if (!env.use_agent_store && env.rank == 0) {
    server_ = std::make_unique<Server>(env.master_port);
  }
  client_ = Connect(env, timeout);
}

WorkerStore::~WorkerStore() {
  client_.reset();
  server_.reset();
}

std::string WorkerStore::AttemptPrefix(int restart_count) {
  return "ddprun_worker/attempt_" + std::to_string(restart_count);
}

std::shared_ptr<store::Store> WorkerStore::Scoped(const std::string& name) const {
  return std::make_shared<store::PrefixStore>(name, client_);
}

std::shared_ptr<store::Store> WorkerStore::NextScope(const std::string& kind) {
  return Scoped(kind + "_" + std::to_string(scopes_++));
}

void WorkerStore::Finish() {
  if (finished_) return;
  finished_ = true;
  // The last rank to finish publishes "finished/all"; only the host has to wait for it.
  if (client_->Add("finished", 1) == env_.world_size) {
    client_->Set("finished/all", store::Store::ToBytes("1"));
  }
  if (HostsServer()) client_->Wait({"finished/all"}, timeout_);
}

}  // namespace ddprun::worker
