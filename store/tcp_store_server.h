// A c10d-compatible TCP store server. Serves PyTorch 1.13 (legacy) and 2.x (validated) clients
// on one port, telling them apart per connection. Waiters are kept per key and released by
// writes. A malformed or oversized request closes only its connection. The acceptor and, with
// io_threads = 1, every connection run on the caller's asio::io_context; more io_threads spread
// the connections over that many threads (the caller's plus threads of the server's own) that
// share the key space under one lock. Call the methods on the io_context's thread (or before it
// runs), except WithKeys, which any thread may call.
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "common/errors.h"
#include "store/store_auth.h"
#include "store/tcp_store_server_keys.h"
#include "store/tcp_store_server_limits.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace ddprun::store {

// The port is taken (EADDRINUSE); other bind failures are plain SystemErrors.
class AddressInUseError : public SystemError {
 public:
  using SystemError::SystemError;
};

// What a server carries, for an agent's metrics: open client connections, requests executed.
struct ServerLoad {
  std::size_t connections = 0;
  std::uint64_t requests = 0;
};

struct ServerOptions {
  std::string host = "127.0.0.1";  // "" or "::" = every interface, IPv6 dual stack
  int port = 0;                    // 0 = ephemeral; read the real one with Port()
  ServerLimits limits;
  // Threads that serve connections (round robin by arrival): 1 = the caller's io_context only.
  // More pay off on a machine with cores to spare for them.
  int io_threads = 1;
  // Set: every connection must authenticate with this token before its first request
  // (store_auth.h); a failure is logged once and closes the connection.
  std::shared_ptr<const AuthKey> auth;
};

class TcpStoreServer {
 public:
  // Binds and listens; throws AddressInUseError("bind 127.0.0.1:29500: Address already in
  // use"), or SystemError for another failure ("Cannot assign requested address").
  TcpStoreServer(boost::asio::io_context& io, ServerOptions options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int Port() const;
  std::string Host() const;  // the bound address, e.g. "127.0.0.1" or "::"
  // Closes the acceptor and every connection (their waiters are dropped). Idempotent.
  void Stop();

  // Runs `use(KeySpace&)` under the key space's lock and returns its result; any thread (the
  // agent's own use). Writes wake remote waiters exactly as a client's would.
  template <typename Use>
  auto WithKeys(Use&& use) {
    const std::lock_guard lock(KeysMutex());
    return use(KeysLocked());
  }
  std::size_t NumConnections() const;
  std::uint64_t NumRequests() const;  // requests executed since the start; any thread
  ServerLoad Load() const { return {NumConnections(), NumRequests()}; }  // any thread

  // Calls `done` once, on the io thread, when every client connection has closed or exchanged
  // nothing for `quiet_for` (the connections of a peer lost to a crash or a partition go quiet
  // without ever closing), or at `deadline`, whichever comes first. Event-driven: it re-checks
  // when a connection closes and at the moment the next one would turn quiet.
  void WhenClientsGone(std::chrono::milliseconds quiet_for,
                       std::chrono::steady_clock::time_point deadline, std::function<void()> done);

 private:
  std::recursive_mutex& KeysMutex();
  KeySpace& KeysLocked();

  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddprun::store
