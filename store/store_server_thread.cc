#include "store/store_server_thread.h"

#include "common/logging.h"

namespace ddprun::store {

StoreServerThread::StoreServerThread(const ServerOptions& options, StoreThreadOptions thread)
    : thread_options_(std::move(thread)) {
  const std::string& hint = thread_options_.port_hint;
  try {
    server_ = std::make_unique<TcpStoreServer>(io_, options);
  } catch (const AddressInUseError& error) {
    throw PortInUseError(std::string(error.what()) + "; " + hint);
  } catch (const SystemError& error) {
    throw UsageError(std::string(error.what()) + "; " + hint);
  }
  port_ = server_->Port();
  if (thread_options_.announce) {
    spdlog::info("{}store listening on {}:{}", options.auth ? "authenticated " : "",
                 options.host.empty() ? "*" : options.host, port_);
  }
  thread_ = std::thread([this] { io_.run(); });
}

StoreServerThread::~StoreServerThread() {
  std::promise<void> clients_gone;
  const auto deadline = std::chrono::steady_clock::now() + thread_options_.linger;
  asio::post(io_, [&] {
    server_->WhenClientsGone(thread_options_.quiet_for, deadline,
                             [&] { clients_gone.set_value(); });
  });
  clients_gone.get_future().wait();
  asio::post(io_, [this] {
    server_->Stop();
    io_.stop();
  });
  thread_.join();
}

}  // namespace ddprun::store
