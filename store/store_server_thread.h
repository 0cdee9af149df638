// A TcpStoreServer on an io_context and thread of its own: the one way ddprun serves a c10d store
// off the caller's thread — node 0's store in a multi-node launch and an elastic round's worker
// store (launcher/backend/), a moved rendezvous store (TcpStoreSite), worker rank 0's own store
// (worker/worker_store.cc), and the store tests' servers. A blocking client in the same process
// reaches it exactly as other nodes do, and it keeps serving while the caller blocks.
#pragma once
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>

#include "common/asio.h"
#include "common/errors.h"
#include "store/tcp_store_server.h"

namespace ddprun::store {

// The store's port is taken on this machine (another program, or another agent serving it).
class PortInUseError : public UsageError {
 public:
  using UsageError::UsageError;
};

struct StoreThreadOptions {
  // Before closing, the destructor waits up to `linger` until every client has disconnected or
  // gone quiet for `quiet_for` (a lost peer's connections never close), so that peers finishing
  // their exit barrier never see the store vanish under them, while a lost one holds nothing up.
  std::chrono::milliseconds linger{0};
  std::chrono::milliseconds quiet_for{0};
  std::string port_hint = "pass a free --master_port";  // what the user should change
  bool announce = false;  // log "store listening on HOST:PORT" (info) once bound
};

class StoreServerThread {
 public:
  // Binds options.host ("" = every interface) : options.port now (with options.auth, every
  // client must authenticate) and serves on a new thread; a port in use throws UsageError ending
  // in `thread.port_hint`: PortInUseError when the port is taken, else UsageError.
  explicit StoreServerThread(const ServerOptions& options, StoreThreadOptions thread = {});
  ~StoreServerThread();  // lingers, closes every connection and joins
  StoreServerThread(const StoreServerThread&) = delete;
  StoreServerThread& operator=(const StoreServerThread&) = delete;

  int Port() const { return port_; }
  ServerLoad Load() const { return server_->Load(); }  // any thread
  // Runs `use(KeySpace&)` under the key space's lock, on the calling thread.
  template <typename Use>
  auto WithKeys(Use use) {
    return server_->WithKeys(use);
  }
  // Runs `fn(server)` on the server's thread and returns its result.
  template <typename Fn>
  auto OnIo(Fn fn) {
    std::packaged_task<decltype(fn(*server_))()> task([&] { return fn(*server_); });
    auto result = task.get_future();
    asio::post(io_, [&task] { task(); });
    return result.get();
  }

 private:
  asio::io_context io_{kOneThread};
  std::unique_ptr<TcpStoreServer> server_;
  int port_ = 0;
  StoreThreadOptions thread_options_;
  std::thread thread_;
};

}  // namespace ddprun::store
