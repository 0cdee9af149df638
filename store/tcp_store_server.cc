#include "store/tcp_store_server.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/asio.h"
#include "common/errors.h"
#include "common/host_port.h"
#include "store/tcp_store_server_connection.h"

namespace ddprun::store {
namespace {

using asio::ip::tcp;

// The kernel clamps the backlog to net.core.somaxconn; ask for as much as it allows.
constexpr int kBacklog = 65535;
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(100);
constexpr int kAcceptBatch = 256;  // accepts in a row before other connections get their turn

using WorkGuard = asio::executor_work_guard<asio::io_context::executor_type>;

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

class TcpStoreServer::Impl : public std::enable_shared_from_this<Impl>, public ConnectionOwner {
 public:
  Impl(asio::io_context& io, ServerOptions options)
      : io_(io),
        options_(std::move(options)),
        shared_(options_.limits),
        acceptor_(io),
        retry_timer_(io),
        gone_timer_(io) {}

  // The extra io threads (io_threads - 1), each running an io_context of its own.
  void StartThreads() {
    for (int i = 1; i < options_.io_threads; ++i) {
      auto& context = *pool_.emplace_back(std::make_unique<asio::io_context>(kOneThread));
      pool_work_.push_back(asio::make_work_guard(context));
      threads_.emplace_back([&context] { context.run(); });
    }
  }

  // After Stop (which released the pool's work guards): the threads end once their
  // connections have closed.
  void JoinThreads() {
    for (auto& thread : threads_) thread.join();
    threads_.clear();
  }

  void Listen() {
    const auto endpoint = ResolveBindEndpoint(io_, options_.host, options_.port);
    boost::system::error_code error = TryListen(endpoint);
    if (error && IsWildcard6(options_.host)) {
      error = TryListen(tcp::endpoint(tcp::v4(), endpoint.port()));  // no IPv6 on this host
    }
    if (error) {
      HostPort shown{endpoint.address().to_string(), options_.port};
      const std::string message = "bind " + shown.ToString() + ": " + error.message();
      if (error == asio::error::address_in_use) throw AddressInUseError(message);
      throw SystemError(message);
    }
    const auto bound = acceptor_.local_endpoint();
    port_ = bound.port();
    host_ = bound.address().to_string();
  }

  // accept() reports the peer's address into peer_ (one accept is pending at a time), which
  // spares a getpeername per connection.
  void Accept() {
    auto& context = NextContext();
    acceptor_.async_accept(context, peer_,
                           [self = shared_from_this(), &context](
                               const boost::system::error_code& error, tcp::socket socket) {
                             self->OnAccept(error, context, std::move(socket));
                           });
  }

  void Stop() {
    if (stopped_) return;
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    retry_timer_.cancel();
    std::unordered_map<std::uint64_t, std::shared_ptr<StoreConnection>> connections;
    {
      const std::lock_guard lock(connections_mutex_);
      connections.swap(connections_);
    }
    // Connections of the caller's context close now (Stop may run while that context is not
    // running, e.g. from the destructor); the pool's close on their own threads.
    for (auto& entry : connections) {
      auto& connection = entry.second;
      if (&connection->Io() == &io_) {
        connection->Close("server stopped");
      } else {
        asio::post(connection->Io(), [connection] { connection->Close("server stopped"); });
      }
    }
    pool_work_.clear();
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
  SharedKeys& Shared() { return shared_; }
  std::uint64_t NumRequests() const { return shared_.requests.load(std::memory_order_relaxed); }

  std::size_t NumConnections() const {
    const std::lock_guard lock(connections_mutex_);
    return connections_.size();
  }

 private:
  boost::system::error_code TryListen(const tcp::endpoint& endpoint) {
    boost::system::error_code error;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    if (acceptor_.open(endpoint.protocol(), error)) return error;
    if (endpoint.address().is_v6()) acceptor_.set_option(asio::ip::v6_only(false), ignored);
    acceptor_.set_option(tcp::acceptor::reuse_address(true), ignored);
    if (acceptor_.bind(endpoint, error)) return error;
    if (acceptor_.listen(kBacklog, error)) return error;
    acceptor_.non_blocking(true, error);
    return error;
  }

  asio::io_context& NextContext() {
    const std::size_t index = next_context_++ % (pool_.size() + 1);
    return index == 0 ? io_ : *pool_[index - 1];
  }

  void OnAccept(const boost::system::error_code& error, asio::io_context& context,
                tcp::socket socket) {
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
    AddConnection(context, std::move(socket));
    AcceptPending();
    Accept();
  }

  // Takes what else waits in the accept queue now, as libuv does: at a job's start thousands of
  // clients connect at once, and a full queue (somaxconn) drops their SYNs, which costs each of
  // them a retransmission a second later.
  void AcceptPending() {
    for (int i = 0; i < kAcceptBatch && !stopped_; ++i) {
      auto& context = NextContext();
      tcp::socket socket(context);
      boost::system::error_code error;
      acceptor_.accept(socket, peer_, error);  // the acceptor is non-blocking
      if (error) return;  // would_block; anything else, the next async accept reports
      AddConnection(context, std::move(socket));
    }
  }

  // Runs the WhenClientsGone callback if its condition holds, else sets the timer for the
  // moment it next could. On the io thread.
  void CheckClientsGone() {
    if (!gone_callback_) return;
    const auto now = std::chrono::steady_clock::now();
    const auto next_quiet = NextQuietMoment(now);
    if (!next_quiet || now >= gone_deadline_) {
      gone_timer_.cancel();
      auto done = std::move(gone_callback_);
      gone_callback_ = nullptr;
      done();
      return;
    }
    gone_timer_.expires_at(std::min(*next_quiet, gone_deadline_));
    gone_timer_.async_wait([weak = weak_from_this()](const boost::system::error_code& error) {
      if (auto self = weak.lock(); self && !error) self->CheckClientsGone();
    });
  }

  // The earliest moment after `now` at which an active connection turns quiet; nullopt when
  // every connection is quiet already (or there is none).
  std::optional<std::chrono::steady_clock::time_point> NextQuietMoment(
      std::chrono::steady_clock::time_point now) const {
    std::optional<std::chrono::steady_clock::time_point> next;
    const std::lock_guard lock(connections_mutex_);
    for (const auto& entry : connections_) {
      const auto quiet_at = entry.second->LastActivity() + quiet_for_;
      if (quiet_at > now) next = next ? std::min(*next, quiet_at) : quiet_at;
    }
    return next;
  }

  // On the io thread; the connection starts on (and from then on lives on) `context`'s thread.
  void AddConnection(asio::io_context& context, tcp::socket socket) {
    boost::system::error_code ignored;
    const std::size_t open = NumConnections();
    if (open >= options_.limits.max_connections) {
      spdlog::debug("store: refusing a connection: {} connections open", open);
      socket.close(ignored);
      return;
    }
    socket.set_option(tcp::no_delay(true), ignored);
    const std::uint64_t id = next_id_++;
    auto connection =
        std::make_shared<StoreConnection>(context, std::move(socket), peer_, shared_,
                                          options_.limits, id, weak_from_this(), options_.auth);
    {
      const std::lock_guard lock(connections_mutex_);
      connections_.emplace(id, connection);
    }
    asio::dispatch(context, [connection] { connection->Start(); });
  }

  // On the closed connection's thread.
  void OnConnectionClosed(std::uint64_t id) override {
    {
      const std::lock_guard lock(connections_mutex_);
      connections_.erase(id);
    }
    asio::dispatch(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->CheckClientsGone();
    });
  }

  asio::io_context& io_;
  ServerOptions options_;
  SharedKeys shared_;
  tcp::acceptor acceptor_;
  tcp::endpoint peer_;  // of the connection being accepted
  asio::steady_timer retry_timer_;
  asio::steady_timer gone_timer_;  // WhenClientsGone
  std::function<void()> gone_callback_;
  std::chrono::milliseconds quiet_for_{0};
  std::chrono::steady_clock::time_point gone_deadline_;
  // Written on the io thread (accept) and on every connection's thread (close).
  mutable std::mutex connections_mutex_;
  std::unordered_map<std::uint64_t, std::shared_ptr<StoreConnection>> connections_;
  std::uint64_t next_id_ = 1;
  std::vector<std::unique_ptr<asio::io_context>> pool_;  // io_threads - 1 of them
  std::vector<WorkGuard> pool_work_;                     // released by Stop
  std::vector<std::thread> threads_;
  std::size_t next_context_ = 0;
  int port_ = 0;
  std::string host_;
  bool stopped_ = false;
};

TcpStoreServer::TcpStoreServer(asio::io_context& io, ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {
  impl_->Listen();
  impl_->StartThreads();
  impl_->Accept();
}

TcpStoreServer::~TcpStoreServer() {
  impl_->Stop();
  impl_->JoinThreads();
}

int TcpStoreServer::Port() const { return impl_->Port(); }
std::string TcpStoreServer::Host() const { return impl_->Host(); }
void TcpStoreServer::Stop() { impl_->Stop(); }
std::recursive_mutex& TcpStoreServer::KeysMutex() { return impl_->Shared().mutex; }
KeySpace& TcpStoreServer::KeysLocked() { return impl_->Shared().keys; }
std::size_t TcpStoreServer::NumConnections() const { return impl_->NumConnections(); }

std::uint64_t TcpStoreServer::NumRequests() const { return impl_->NumRequests(); }
void TcpStoreServer::WhenClientsGone(std::chrono::milliseconds quiet_for,
                                     std::chrono::steady_clock::time_point deadline,
                                     std::function<void()> done) {
  impl_->WhenClientsGone(quiet_for, deadline, std::move(done));
}

}  // namespace ddprun::store
