// One client connection of the TCP store server (internal to rendezvous/): buffers input,
// detects the protocol generation from the first bytes, parses complete requests, executes
// them on the key space and queues replies. Malformed input or a broken limit closes this
// connection only. An idle connection holds no heap buffer: its pending read lands in a small
// array of its own, and only a request that does not fit (or a burst) grows a heap buffer,
// which is freed once parsed. Lives on one io_context thread (its own); the key space is
// shared by every connection of the server, under SharedKeys' lock, and a write that releases
// a waiter of a connection on another thread hands it the reply through that thread's
// io_context. A server with a token makes each connection authenticate first (store_auth.h):
// until then only the handshake is parsed, under a deadline, and a refusal is logged once.
#pragma once
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/asio.h"
#include "store/store_auth.h"
#include "store/store_protocol.h"
#include "store/tcp_store_server_keys.h"
#include "store/tcp_store_server_limits.h"

namespace ddprun::store {

// The key space of one server and the lock every access to it holds. Recursive: a write's
// callbacks may close a connection of the same thread, which unregisters its waiters.
struct SharedKeys {
  explicit SharedKeys(const ServerLimits& limits) : keys(limits) {}
  KeySpace keys;
  std::recursive_mutex mutex;
  std::atomic<std::uint64_t> requests{0};  // every request executed, for the agent's metrics
};

// Told when a connection has closed (the server's table of connections); held weakly.
class ConnectionOwner {
 public:
  virtual void OnConnectionClosed(std::uint64_t id) = 0;

 protected:
  ~ConnectionOwner() = default;
};

class StoreConnection : public std::enable_shared_from_this<StoreConnection> {
 public:
  // `socket` belongs to `io`, whose one thread runs every method below except LastActivity.
  // `peer` is the client's address as accept() reported it (for log lines). With `auth`, the
  // client must authenticate within limits.auth_timeout.
  StoreConnection(asio::io_context& io, asio::ip::tcp::socket socket,
                  const asio::ip::tcp::endpoint& peer, SharedKeys& shared,
                  const ServerLimits& limits, std::uint64_t id,
                  std::weak_ptr<ConnectionOwner> owner,
                  std::shared_ptr<const AuthKey> auth = nullptr);
  ~StoreConnection();

  void Start();
  asio::io_context& Io() const { return io_; }
  // When this client last sent a request or was sent a reply (or connected). Any thread.
  std::chrono::steady_clock::time_point LastActivity() const {
    return last_activity_.load(std::memory_order_relaxed);
  }
  // Drops the socket and every wait/watch registration; logs `reason` at debug level.
  void Close(const std::string& reason);

 private:
  // What an idle connection's read lands in; larger requests continue in input_.
  static constexpr std::size_t kSmallRead = 128;
  // An unauthenticated connection's handshake and its deadline (freed once it authenticated).
  struct Handshake;

  void ReadMore();
  void OnSmallRead(const boost::system::error_code& error, std::size_t bytes);
  void OnRead(const boost::system::error_code& error);
  void ProcessInput();
  std::span<const std::uint8_t> Unparsed() const;
  void Consume(std::size_t bytes);
  void KeepUnparsed();
  void CompactInput();
  void ReleaseInput();
  std::string PeerName() const;
  bool ProcessOne();  // false: stop processing (need more data, paused or closed)
  bool Authenticate(std::span<const std::uint8_t> data);  // ProcessOne's, until authenticated
  // Logs the refusal once, sends `reply` if the socket takes it now, and closes.
  void Refuse(const std::string& why, const Bytes& reply);
  void OnHandshakeDeadline();
  void Reply(const Bytes& bytes);
  void Flush();
  void OnWritten(const boost::system::error_code& error);
  bool OutputFull() const;

  // Command execution (tcp_store_server_commands.cc); throws on protocol violations.
  void Execute(const Request& request);
  void ExecuteWait(const Request& request);
  void ExecuteBarrier(const Request& request);
  void ExecuteWatch(const Request& request);
  void ExecuteMultiGet(const Request& request);
  void ExecuteQueuePop(const Request& request);
  void ExecuteListKeys();
  void CancelWaits();
  KeySpace::ReadyCallback WaitReadyCallback(std::shared_ptr<KeySpace::WaiterId> slot);
  void OnWaitReady(KeySpace::WaiterId id);
  // Runs `fn` now when called on this connection's thread, else posts it there.
  void OnOwnThread(std::function<void()> fn);
  void Touch();

  asio::io_context& io_;
  asio::ip::tcp::socket socket_;
  SharedKeys& shared_;
  KeySpace& keys_;  // shared_.keys; use it only holding shared_.mutex
  const ServerLimits& limits_;
  std::uint64_t id_;
  std::weak_ptr<ConnectionOwner> owner_;
  asio::ip::tcp::endpoint peer_;

  std::unique_ptr<Handshake> handshake_;  // set until the client authenticated
  std::optional<Generation> generation_;
  bool validated_ = false;
  // Unparsed bytes are [small_begin_, small_end_) of small_ right after a read into it, else
  // [input_begin_, input_end_) of input_; never both.
  std::array<std::uint8_t, kSmallRead> small_;
  std::uint16_t small_begin_ = 0;
  std::uint16_t small_end_ = 0;
  bool burst_ = false;  // the last read filled its buffer: more is likely waiting
  Bytes input_;         // no storage while idle
  std::size_t input_begin_ = 0;
  std::size_t input_end_ = 0;
  std::size_t need_ = 1;  // unparsed bytes needed before parsing can progress
  Bytes output_;          // replies not yet handed to the socket
  Bytes in_flight_;       // replies being written
  bool reading_ = false;
  bool write_active_ = false;
  bool processing_ = false;
  bool closed_ = false;
  std::atomic<std::chrono::steady_clock::time_point> last_activity_{
      std::chrono::steady_clock::now()};
  std::vector<KeySpace::WaiterId> waits_;
  std::vector<KeySpace::WaiterId> watches_;
};

}  // namespace ddprun::store
