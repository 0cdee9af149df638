// A blocking client of any c10d TCP store (ddprun's server or PyTorch's), implementing Store.
// Speaks the validated (2.x) protocol by default, the legacy (1.13) one on request. Connects
// with retries and jittered backoff until connect_timeout; every reply is awaited at most
// Timeout(). With a token, it authenticates each connection first (store_auth.h). User keys get
// TCPStore's "/" prefix so they match what PyTorch clients see. Safe to share between threads
// (calls are serialized); one request is in flight at a time.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/cancellable_pause.h"
#include "common/host_port.h"
#include "store/store.h"
#include "store/store_auth.h"
#include "store/store_protocol.h"

namespace ddprun::store {

struct ClientOptions {
  std::string host = "127.0.0.1";
  int port = kDefaultMasterPort;
  std::chrono::milliseconds timeout = Store::kDefaultTimeout;  // Get/Wait and each reply
  std::chrono::milliseconds connect_timeout{60'000};
  Generation generation = Generation::kValidated;
  std::string key_prefix = "/";            // "" reaches raw keys such as "init/"
  std::size_t max_reply_bytes = 1u << 30;  // a larger announced length means "not a store"
  bool count_as_worker = false;            // send ADD "init/" 1 once, as a sized TCPStore does
  // Set: authenticate with this token before the first request (validated protocol only);
  // a store that refuses it, or has none, throws StoreAuthError at once.
  std::shared_ptr<const AuthKey> auth;
};

class TcpStoreClient : public Store {
 public:
  // Connects now; throws StoreConnectionError when no store answered before connect_timeout.
  explicit TcpStoreClient(ClientOptions options);
  ~TcpStoreClient() override;

  void Set(const std::string& key, const Bytes& value) override;
  Bytes Get(const std::string& key) override;
  std::int64_t Add(const std::string& key, std::int64_t delta) override;
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool Check(const std::vector<std::string>& keys) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::Wait;
  bool DeleteKey(const std::string& key) override;
  std::int64_t NumKeys() override;
  // Shuts the connection down under a blocked call (and stops a connect's retries).
  void Interrupt() override;
  // Native commands on the validated protocol; the Store fallbacks on the legacy one.
  std::vector<Bytes> MultiGet(const std::vector<std::string>& keys) override;
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void Append(const std::string& key, const Bytes& value) override;

  // Validated protocol only (throws std::invalid_argument on the legacy one).
  std::uint32_t Ping(std::uint32_t nonce);
  void QueuePush(const std::string& queue, const Bytes& item);
  std::optional<Bytes> QueuePop(const std::string& queue);  // nullopt when empty
  std::int64_t QueueLen(const std::string& queue);

  const ClientOptions& Options() const { return options_; }

 private:
  class Socket;

  Socket& Connected();
  void Connect();
  void Authenticate(Socket& socket, std::chrono::steady_clock::time_point deadline);
  void Handshake(Socket& socket, std::chrono::steady_clock::time_point deadline);
  void Send(const Request& request);
  Request Command1(Command command, const std::string& key) const;
  std::vector<std::string> Prefixed(const std::vector<std::string>& keys) const;
  void WaitLocked(const std::vector<std::string>& keys, std::chrono::milliseconds timeout);
  template <typename Fn>
  auto Locked(Fn fn);

  void SetSocket(std::unique_ptr<Socket> socket);
  void SleepUnlessInterrupted(std::chrono::milliseconds delay);

  ClientOptions options_;
  std::mutex mutex_;
  std::unique_ptr<Socket> socket_;
  // Interrupt() may run on another thread while mutex_ is held by a blocked call: it reaches
  // the descriptor through fd_ under its own lock, which socket replacement also takes.
  std::mutex interrupt_mutex_;
  CancellablePause retry_pause_;  // between connection attempts; Interrupt() cuts it short
  int fd_ = -1;
  std::atomic<bool> interrupted_{false};
};

}  // namespace ddprun::store
