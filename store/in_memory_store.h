// A Store held in this process's memory with the TCP store's exact semantics (it shares the
// server's KeySpace). Thread-safe: Get and Wait block on a condition variable until a writer
// adds the keys or the deadline passes (StoreTimeout). For tests and single-node agents.
// Connect() gives another "connection" to the same keys, as a second TCP client would be: its
// Interrupt() wakes and fails only the calls made through it.
#pragma once
#include <condition_variable>
#include <memory>
#include <mutex>

#include "store/store.h"
#include "store/tcp_store_server_keys.h"

namespace ddprun::store {

class InMemoryStore : public Store {
 public:
  explicit InMemoryStore(std::chrono::milliseconds timeout = kDefaultTimeout);

  // A new connection to the same key space (same timeout), interrupted independently.
  std::shared_ptr<InMemoryStore> Connect() const;

  void Set(const std::string& key, const Bytes& value) override;
  Bytes Get(const std::string& key) override;
  std::int64_t Add(const std::string& key, std::int64_t delta) override;
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool Check(const std::vector<std::string>& keys) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::Wait;
  bool DeleteKey(const std::string& key) override;
  std::int64_t NumKeys() override;
  void Interrupt() override;
  std::vector<Bytes> MultiGet(const std::vector<std::string>& keys) override;
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void Append(const std::string& key, const Bytes& value) override;

 private:
  struct Shared {
    std::mutex mutex;
    std::condition_variable changed;
    KeySpace keys;
  };
  InMemoryStore(std::shared_ptr<Shared> shared, std::chrono::milliseconds timeout);

  // Runs `fn(keys)` under the lock, after checking this connection is not interrupted, and
  // wakes every waiter afterwards when `notify`.
  template <typename Fn>
  auto Locked(bool notify, Fn fn);
  // Waits under `lock` until every key exists; throws StoreTimeout at the deadline.
  void WaitLocked(std::unique_lock<std::mutex>& lock, const std::vector<std::string>& keys,
                  std::chrono::milliseconds timeout);
  void ThrowIfInterrupted() const;

  std::shared_ptr<Shared> shared_;
  bool interrupted_ = false;  // guarded by shared_->mutex
};

}  // namespace ddprun::store
