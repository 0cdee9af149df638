// A c10d-compatible TCP store server on the caller's asio::io_context (one thread, no threads
// of its own). Serves PyTorch 1.13 (legacy) and 2.x (validated) clients on one port, telling
// them apart per connection. Waiters are kept per key and released by writes. A malformed or
// oversized request closes only its connection. Not thread-safe: call every method, and use
// Keys(), on the io_context's thread (or before it runs).
#pragma once
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/tcp_store_server_keys.h"
#include "rendezvous/tcp_store_server_limits.h"

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace ddprun::rendezvous {

struct ServerOptions {
  std::string host = "127.0.0.1";  // "" or "::" = every interface, IPv6 dual stack
  int port = 0;                    // 0 = ephemeral; read the real one with Port()
  ServerLimits limits;
};

class TcpStoreServer {
 public:
  // Binds and listens; throws SystemError("bind 127.0.0.1:29500: Address already in use").
  TcpStoreServer(boost::asio::io_context& io, ServerOptions options);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  int Port() const;
  std::string Host() const;  // the bound address, e.g. "127.0.0.1" or "::"
  // Closes the acceptor and every connection (their waiters are dropped). Idempotent.
  void Stop();

  // Direct access to the key space for code on the io thread (the agent): writes wake remote
  // waiters exactly as a client's would.
  KeySpace& Keys();
  std::size_t NumConnections() const;

  // Calls `done` once, on the io thread, when every client connection has closed or exchanged
  // nothing for `quiet_for` (the connections of a peer lost to a crash or a partition go quiet
  // without ever closing), or at `deadline`, whichever comes first. Event-driven: it re-checks
  // when a connection closes and at the moment the next one would turn quiet.
  void WhenClientsGone(std::chrono::milliseconds quiet_for,
                       std::chrono::steady_clock::time_point deadline, std::function<void()> done);

 private:
  class Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace ddprun::rendezvous
