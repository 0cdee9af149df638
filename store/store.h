// The Store seam: a key-value store with blocking reads, as c10d's Store.hpp and gloo's
// rendezvous::Store define it. Implementations: the TCP client (store/tcp_store_client.h), the
// in-memory store, the prefixing decorator, and the etcd v3 store (store/etcd/etcd_store.h). All
// methods are safe to call from one thread at a time, except Interrupt (any thread).
#pragma once
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace ddprun::store {

using Bytes = std::vector<std::uint8_t>;

// A Get/Wait did not see its keys before the deadline.
class StoreTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The connection to a remote store failed or was closed by the peer.
class StoreConnectionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The store and this client do not share a token (one has none, or another one). Not a
// StoreConnectionError: retrying cannot help, so nothing retries it.
class StoreAuthError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// "wait timeout after 300000ms, keys: a, b, c, d, ..." (the first four keys), the message of a
// remote store's StoreTimeout from Wait.
std::string WaitTimeoutMessage(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout);

class Store {
 public:
  static constexpr std::chrono::milliseconds kDefaultTimeout{300'000};

  virtual ~Store() = default;

  virtual void Set(const std::string& key, const Bytes& value) = 0;
  // Blocks until `key` exists, at most Timeout(); throws StoreTimeout.
  virtual Bytes Get(const std::string& key) = 0;
  // Adds `delta` to the decimal integer stored at `key` (missing: 0) and returns the sum.
  virtual std::int64_t Add(const std::string& key, std::int64_t delta) = 0;
  // Sets `desired` if the current value equals `expected` (a missing key matches an empty
  // `expected`); returns the value now stored, as PyTorch's TCPStore does.
  virtual Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // True when every key exists, without waiting.
  virtual bool Check(const std::vector<std::string>& keys) = 0;
  // Blocks until every key exists, at most `timeout`; throws StoreTimeout.
  virtual void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) = 0;
  // Returns true when the key existed.
  virtual bool DeleteKey(const std::string& key) = 0;
  virtual std::int64_t NumKeys() = 0;
  // Callable from any thread: wakes every call blocked in this store with StoreConnectionError
  // at once, and makes every later call fail the same way. Idempotent. This is how a blocked
  // rendezvous or monitor is cancelled promptly, without slicing its waits.
  virtual void Interrupt() = 0;

  // Derived operations; remote stores override them with native commands.
  virtual std::vector<Bytes> MultiGet(const std::vector<std::string>& keys);
  virtual void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values);
  virtual void Append(const std::string& key, const Bytes& value);

  void Wait(const std::vector<std::string>& keys) { Wait(keys, timeout_); }
  // Every one of `world_size` callers adds itself to `key`, then all wait for the last one.
  void Barrier(const std::string& key, std::int64_t world_size, std::chrono::milliseconds timeout);

  void SetString(const std::string& key, const std::string& value);
  std::string GetString(const std::string& key);

  std::chrono::milliseconds Timeout() const { return timeout_; }
  void SetTimeout(std::chrono::milliseconds timeout) { timeout_ = timeout; }

  static Bytes ToBytes(const std::string& text) { return Bytes(text.begin(), text.end()); }
  static std::string ToString(const Bytes& bytes) {
    return std::string(bytes.begin(), bytes.end());
  }

 protected:
  std::chrono::milliseconds timeout_ = kDefaultTimeout;
};

}  // namespace ddprun::store
