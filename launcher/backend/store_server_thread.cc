#include "launcher/backend/store_server_thread.h"

#include <future>

#include "common/errors.h"
#include "common/logging.h"

namespace ddprun::launcher::backend {

StoreServerThread::StoreServerThread(const store::ServerOptions& options,
                                     std::chrono::milliseconds linger,
                                     std::chrono::milliseconds quiet_for,
                                     const std::string& port_hint)
    : linger_(linger), quiet_for_(quiet_for) {
  try {
    server_ = std::make_unique<store::TcpStoreServer>(io_, options);
  } catch (const store::AddressInUseError& error) {
    throw PortInUseError(std::string(error.what()) + "; " + port_hint);
  } catch (const SystemError& error) {
    throw UsageError(std::string(error.what()) + "; " + port_hint);
  }
  port_ = server_->Port();
  spdlog::info("{}store listening on {}:{}", options.auth ? "authenticated " : "",
               options.host.empty() ? "*" : options.host, port_);
  thread_ = std::thread([this] { io_.run(); });
}

StoreServerThread::~StoreServerThread() {
  std::promise<void> clients_gone;
  const auto deadline = std::chrono::steady_clock::now() + linger_;
  asio::post(io_, [&] {
    server_->WhenClientsGone(quiet_for_, deadline, [&] { clients_gone.set_value(); });
  });
  clients_gone.get_future().wait();
  asio::post(io_, [this] {
    server_->Stop();
    io_.stop();
  });
  thread_.join();
}

}  // namespace ddprun::launcher::backend
