// Node 0's store in a multi-node launch: a TcpStoreServer on its own io_context and thread, so
// that node 0's agent reaches it through a blocking client exactly as the other nodes do, and
// it keeps serving while the agent's thread blocks.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/asio.h"
#include "common/errors.h"
#include "store/tcp_store_server.h"

namespace ddprun::launcher::backend {

// The store's port is taken on this machine (another program, or another agent serving it).
class PortInUseError : public UsageError {
 public:
  using UsageError::UsageError;
};

class StoreServerThread {
 public:
  // Binds options.host ("" = every interface) : options.port now (with options.auth, every
  // client must authenticate); a port in use throws UsageError ending in `port_hint` (what the
  // user should change): PortInUseError when the port is taken, else UsageError.
  // Before closing, the destructor waits up to `linger` until every client has disconnected or
  // gone quiet for `quiet_for` (a lost peer's connections never close), so that peers finishing
  // their exit barrier never see the store vanish under them, while a lost one holds nothing up.
  StoreServerThread(const store::ServerOptions& options,
                    std::chrono::milliseconds linger = std::chrono::milliseconds{0},
                    std::chrono::milliseconds quiet_for = std::chrono::milliseconds{0},
                    const std::string& port_hint = "pass a free --master_port");
  ~StoreServerThread();  // lingers, closes every connection and joins
  StoreServerThread(const StoreServerThread&) = delete;
  StoreServerThread& operator=(const StoreServerThread&) = delete;

  int Port() const { return port_; }
  store::ServerLoad Load() const { return server_->Load(); }  // any thread

 private:
  asio::io_context io_{kOneThread};
  std::unique_ptr<store::TcpStoreServer> server_;
  int port_ = 0;
  std::chrono::milliseconds linger_;
  std::chrono::milliseconds quiet_for_;
  std::thread thread_;
};

}  // namespace ddprun::launcher::backend
