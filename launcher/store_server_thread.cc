#include "launcher/store_server_thread.h"

#include <future>

#include "common/errors.h"
#include "common/logging.h"

namespace ddprun::launcher {

namespace {

std::size_t Connections(asio::io_context& io, rendezvous::TcpStoreServer& server) {
  std::promise<std::size_t> count;
  asio::post(io, [&] { count.set_value(server.NumConnections()); });
  return count.get_future().get();
}

}  // namespace

StoreServerThread::StoreServerThread(const std::string& host, int port,
                                     std::chrono::milliseconds linger)
    : linger_(linger) {
  rendezvous::ServerOptions options;
  options.host = host;
  options.port = port;
  try {
    server_ = std::make_unique<rendezvous::TcpStoreServer>(io_, options);
  } catch (const SystemError& error) {
    throw UsageError(std::string(error.what()) + "; pass a free --master_port");
  }
  port_ = server_->Port();
  spdlog::info("node 0 store listening on {}:{}", host.empty() ? "*" : host, port_);
  thread_ = std::thread([this] { io_.run(); });
}

StoreServerThread::~StoreServerThread() {
  // Peers disconnect when their launchers exit; polling a counter here is bounded and happens
  // only at shutdown, off the agent's loop.
  const auto deadline = std::chrono::steady_clock::now() + linger_;
  while (std::chrono::steady_clock::now() < deadline && Connections(io_, *server_) > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  asio::post(io_, [this] {
    server_->Stop();
    io_.stop();
  });
  thread_.join();
}

}  // namespace ddprun::launcher
