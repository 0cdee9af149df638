// Transitional: store::StoreServerThread (store/store_server_thread.h) under its former name and
// positional arguments, for the one caller (tcp_store_site.cc) converted after a concurrent
// change to it lands. Announces the store it serves.
#pragma once
#include "store/store_server_thread.h"

namespace ddprun::launcher::backend {

using store::PortInUseError;

class StoreServerThread : public store::StoreServerThread {
 public:
  explicit StoreServerThread(const store::ServerOptions& options,
                             std::chrono::milliseconds linger = std::chrono::milliseconds{0},
                             std::chrono::milliseconds quiet_for = std::chrono::milliseconds{0},
                             const std::string& port_hint = "pass a free --master_port")
      : store::StoreServerThread(options, {linger, quiet_for, port_hint, true}) {}
};

}  // namespace ddprun::launcher::backend
