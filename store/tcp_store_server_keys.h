// The key space of a c10d store with the exact semantics of PyTorch's server (§4 of the
// protocol doc): values, counters, compare-set, queues, and waiters kept per key that are
// released by writes (no polling). Single-threaded: the TCP server uses it on its io_context
// thread, the in-memory store under its mutex. Callbacks run after the state has changed and
// may call back into the key space.
#pragma once
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "store/store.h"
#include "store/store_protocol.h"
#include "store/tcp_store_server_limits.h"

namespace ddprun::store {

// An operation the key space refuses: ADD on a non-number, or a limit would be exceeded. The
// server closes the requesting connection, as PyTorch's does.
class KeySpaceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class KeySpace {
 public:
  using WaiterId = std::uint64_t;
  static constexpr WaiterId kNoWaiter = 0;
  using ReadyCallback = std::function<void()>;
  using WatchCallback = std::function<void(WatchEvent event, const std::string& key,
                                           const Bytes& old_value, const Bytes& new_value)>;

  explicit KeySpace(const ServerLimits& limits = {});
  KeySpace(const KeySpace&) = delete;
  KeySpace& operator=(const KeySpace&) = delete;

  void Set(const std::string& key, const Bytes& value);
  const Bytes* Find(const std::string& key) const;  // nullptr when missing
  std::int64_t Add(const std::string& key, std::int64_t delta);
  // PyTorch's rules: missing+empty expected creates; missing+non-empty replies `expected`.
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired);
  void Append(const std::string& key, const Bytes& suffix);
  bool DeleteKey(const std::string& key);
  // A key counts as present when it is set or a non-empty queue has its name.
  bool Check(const std::vector<std::string>& keys) const;
  std::int64_t NumKeys() const { return static_cast<std::int64_t>(values_.size()); }
  std::vector<std::string> ListKeys() const;

  // Calls `on_ready` once every listed key missing now has been written. Returns kNoWaiter
  // (and never calls it) when all are present already.
  WaiterId Wait(const std::vector<std::string>& keys, ReadyCallback on_ready);
  void CancelWait(WaiterId id);  // unknown or fired ids are ignored

  void QueuePush(const std::string& name, const Bytes& item);  // wakes one waiter of `name`
  // Returns the length before popping and the popped item (nullopt when empty).
  std::pair<std::int64_t, std::optional<Bytes>> QueuePop(const std::string& name);
  std::int64_t QueueLen(const std::string& name) const;

  // Counts one arrival at `key`; once `world_size` arrived, fires every earlier arrival's
  // callback and returns kNoWaiter for this one.
  WaiterId Barrier(const std::string& key, std::int64_t world_size, ReadyCallback on_ready);

  // Legacy WATCH_KEY: `on_change` sees every later create/update/delete of `key`.
  WaiterId Watch(const std::string& key, WatchCallback on_change);
  void Unwatch(WaiterId id);

  std::size_t WaiterRegistrations() const { return registrations_; }
  std::size_t StoredBytes() const { return stored_bytes_; }

 private:
  struct Waiter {
    std::size_t remaining = 0;
    std::vector<std::string> keys;
    ReadyCallback on_ready;
  };
  struct Watcher {
    std::string key;
    WatchCallback on_change;
  };

  bool Present(const std::string& key) const;  // set, or a non-empty queue of that name
  void Store(const std::string& key, Bytes value);
  void ReserveBytes(std::size_t added, std::size_t removed, bool new_entry);
  void ReserveWaiters(std::size_t count) const;
  void WakeAll(const std::string& key);
  void WakeOne(const std::string& key);
  // Decrements the waiter; returns its callback when it reached zero (and forgets it).
  ReadyCallback Release(WaiterId id);
  void Notify(const std::string& key, const Bytes* old_value, const Bytes* new_value);

  ServerLimits limits_;
  std::unordered_map<std::string, Bytes> values_;
  std::unordered_map<std::string, std::deque<Bytes>> queues_;
  std::unordered_map<WaiterId, Waiter> waiters_;
  std::unordered_map<std::string, std::vector<WaiterId>> key_waiters_;
  std::unordered_map<std::string, std::vector<WaiterId>> barrier_waiters_;
  std::unordered_map<WaiterId, Watcher> watchers_;
  std::unordered_map<std::string, std::vector<WaiterId>> key_watchers_;
  std::size_t registrations_ = 0;
  std::size_t stored_bytes_ = 0;
  std::size_t queued_items_ = 0;
  WaiterId next_id_ = 1;
};

}  // namespace ddprun::store
