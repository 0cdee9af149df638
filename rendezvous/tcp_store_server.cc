#include "rendezvous/tcp_store_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "common/asio.h"
#include "common/errors.h"
#include "common/host_port.h"
#include "rendezvous/tcp_store_server_connection.h"

namespace ddprun::rendezvous {
namespace {

using asio::ip::tcp;

// The kernel clamps the backlog to net.core.somaxconn; ask for as much as it allows.
constexpr int kBacklog = 65535;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);

bool IsWildcard6(const std::string& host) { return host.empty() || host == "::"; }

tcp::endpoint ResolveBindEndpoint(asio::io_context& io, const std::string& host, int port) {
  const auto port_number = static_cast<unsigned short>(port);
  if (IsWildcard6(host)) return {tcp::v6(), port_number};
  boost::system::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (!error) return {address, port_number};
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), error);
  if (error || results.empty()) {
    throw SystemError("resolve " + host + ": " + (error ? error.message() : "no address"));
  }
  return results.begin()->endpoint();
}

}  // namespace

class TcpStoreServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, ServerOptions options)
      : io_(io), options_(std::move(options)), keys_(options_.limits), acceptor_(io),
        retry_timer_(io), gone_timer_(io) {}

  void Listen() {
    const auto endpoint = ResolveBindEndpoint(io_, options_.host, options_.port);
    boost::system::error_code error = TryListen(endpoint);
    if (error && IsWildcard6(options_.host)) {
      error = TryListen(tcp::endpoint(tcp::v4(), endpoint.port()));  // no IPv6 on this host
    }
    if (error) {
      HostPort shown{endpoint.address().to_string(), options_.port};
      throw SystemError("bind " + shown.ToString() + ": " + error.message());
    }
    const auto bound = acceptor_.local_endpoint();
    port_ = bound.port();
    host_ = bound.address().to_string();
  }

  void Accept() {
    acceptor_.async_accept([self = shared_from_this()](const boost::system::error_code& error,
                                                       tcp::socket socket) {
      self->OnAccept(error, std::move(socket));
    });
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    auto connections = connections_;
    for (auto& entry : connections) entry.second->Close("server stopped");
    connections_.clear();
  }

  void WhenClientsGone(std::chrono::milliseconds quiet_for,
                       std::chrono::steady_clock::time_point deadline, std::function<void()> done) {
    quiet_for_ = quiet_for;
    gone_deadline_ = deadline;
    gone_callback_ = std::move(done);
    CheckClientsGone();
  }

  int Port() const { return port_; }
  const std::string& Host() const { return host_; }
  KeySpace& Keys() { return keys_; }
  std::size_t NumConnections() const { return connections_.size(); }

 private:
  boost::system::error_code TryListen(const tcp::endpoint& endpoint) {
    boost::system::error_code error;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    if (acceptor_.open(endpoint.protocol(), error)) return error;
    if (endpoint.address().is_v6()) acceptor_.set_option(asio::ip::v6_only(false), ignored);
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ignored);
    if (acceptor_.bind(endpoint, error)) return error;
    acceptor_.listen(kBacklog, error);
    return error;
  }

  void OnAccept(const boost::system::error_code& error, tcp::socket socket) {
    if (stopped_ || error == asio::error::operation_aborted) return;
    if (error) {
      // Typically EMFILE: retry after a pause instead of spinning on the error.
      spdlog::debug("store: accept failed: {}", error.message());
      retry_timer_.expires_after(kAcceptRetryDelay);
      retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& e) {
        if (!e && !self->stopped_) self->Accept();
      });
      return;
    }
    AddConnection(std::move(socket));
    Accept();
  }

  // Runs the WhenClientsGone callback if its condition holds, else sets the timer for the
  // moment it next could.
  void CheckClientsGone() {
    if (!gone_callback_) return;
    const auto now = std::chrono::steady_clock::now();
    auto next_check = gone_deadline_;
    bool active = false;
    for (const auto& entry : connections_) {
      const auto quiet_at = entry.second->LastActivity() + quiet_for_;
      if (quiet_at > now) {
        active = true;
        next_check = std::min(next_check, quiet_at);
      }
    }
    if (!active || now >= gone_deadline_) {
      gone_timer_.cancel();
      auto done = std::move(gone_callback_);
      gone_callback_ = nullptr;
      done();
      return;
    }
    gone_timer_.expires_at(next_check);
    gone_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
      if (auto self = weak.lock(); self && !error) self->CheckClientsGone();
    });
  }

  void AddConnection(tcp::socket socket) {
    boost::system::error_code ignored;
    if (connections_.size() >= options_.limits.max_connections) {
      spdlog::debug("store: refusing a connection: {} connections open", connections_.size());
      socket.close(ignored);
      return;
    }
    socket.set_option(tcp::no_delay(true), ignored);
    const std::uint64_t id = next_id_++;
    auto connection = std::make_shared<StoreConnection>(
        std::move(socket), keys_, options_.limits, id,
        [weak = weak_from_this()](std::uint64_t closed_id) {
          if (auto self = weak.lock()) {
            self->connections_.erase(closed_id);
            self->CheckClientsGone();
          }
        });
    connections_.emplace(id, connection);
    connection->Start();
  }

  asio::io_context& io_;
  ServerOptions options_;
  KeySpace keys_;
  tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  asio::steady_timer gone_timer_;  // WhenClientsGone
  std::function<void()> gone_callback_;
  std::chrono::milliseconds quiet_for_{0};
  std::chrono::steady_clock::time_point gone_deadline_;
  std::unordered_map<std::uint64_t, std::shared_ptr<StoreConnection>> connections_;
  std::uint64_t next_id_ = 1;
  int port_ = 0;
  std::string host_;
  bool stopped_ = false;
};

TcpStoreServer::TcpStoreServer(asio::io_context& io, ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {
  impl_->Listen();
  impl_->Accept();
}

TcpStoreServer::~TcpStoreServer() { impl_->Stop(); }

int TcpStoreServer::Port() const { return impl_->Port(); }
std::string TcpStoreServer::Host() const { return impl_->Host(); }
void TcpStoreServer::Stop() { impl_->Stop(); }
KeySpace& TcpStoreServer::Keys() { return impl_->Keys(); }
std::size_t TcpStoreServer::NumConnections() const { return impl_->NumConnections(); }
void TcpStoreServer::WhenClientsGone(std::chrono::milliseconds quiet_for,
                                     std::chrono::steady_clock::time_point deadline,
                                     std::function<void()> done) {
  impl_->WhenClientsGone(quiet_for, deadline, std::move(done));
}

}  // namespace ddprun::rendezvous
