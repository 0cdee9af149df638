// One client connection of the TCP store server (internal to rendezvous/): buffers input,
// detects the protocol generation from the first bytes, parses complete requests, executes
// them on the key space and queues replies. Malformed input or a broken limit closes this
// connection only. Lives on one io_context thread (its own); the key space is shared by every
// connection of the server, under SharedKeys' lock, and a write that releases a waiter of a
// connection on another thread hands it the reply through that thread's io_context.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/asio.h"
#include "rendezvous/store_protocol.h"
#include "rendezvous/tcp_store_server_keys.h"
#include "rendezvous/tcp_store_server_limits.h"

namespace ddprun::rendezvous {

// The key space of one server and the lock every access to it holds. Recursive: a write's
// callbacks may close a connection of the same thread, which unregisters its waiters.
struct SharedKeys {
  explicit SharedKeys(const ServerLimits& limits) : keys(limits) {}
  KeySpace keys;
  std::recursive_mutex mutex;
};

class StoreConnection : public std::enable_shared_from_this<StoreConnection> {
 public:
  using ClosedCallback = std::function<void(std::uint64_t id)>;

  // `socket` belongs to `io`, whose one thread runs every method below except LastActivity.
  StoreConnection(asio::io_context& io, asio::ip::tcp::socket socket, SharedKeys& shared,
                  const ServerLimits& limits, std::uint64_t id, ClosedCallback on_closed);

  void Start();
  asio::io_context& Io() const { return io_; }
  // When this client last sent a request or was sent a reply (or connected). Any thread.
  std::chrono::steady_clock::time_point LastActivity() const {
    return last_activity_.load(std::memory_order_relaxed);
  }
  // Drops the socket and every wait/watch registration; logs `reason` at debug level.
  void Close(const std::string& reason);

 private:
  void ReadMore();
  void OnRead(const boost::system::error_code& error, std::size_t bytes);
  void ProcessInput();
  void CompactInput();
  bool ProcessOne();  // false: stop processing (need more data, paused or closed)
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
  ProtocolLimits protocol_limits_;
  std::uint64_t id_;
  ClosedCallback on_closed_;
  std::string peer_;

  std::optional<Generation> generation_;
  bool validated_ = false;
  Bytes input_;                 // storage; valid bytes are [input_begin_, input_end_)
  std::size_t input_begin_ = 0;
  std::size_t input_end_ = 0;
  std::size_t need_ = 1;  // bytes needed from input_begin_ before parsing can progress
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

}  // namespace ddprun::rendezvous
