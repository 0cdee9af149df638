#include "rendezvous/in_memory_store.h"

#include <stdexcept>

namespace ddprun::rendezvous {

InMemoryStore::InMemoryStore(std::chrono::milliseconds timeout) { timeout_ = timeout; }

void InMemoryStore::Set(const std::string& key, const Bytes& value) {
  {
    std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
    ThrowIfInterrupted();
    keys_.Set(key, value);
  }
  changed_.notify_all();
}

Bytes InMemoryStore::Get(const std::string& key) {
  std::unique_lock lock(mutex_);
  ThrowIfInterrupted();
  WaitLocked(lock, {key}, timeout_);
  return *keys_.Find(key);
}

std::int64_t InMemoryStore::Add(const std::string& key, std::int64_t delta) {
  std::int64_t sum = 0;
  {
    std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
    ThrowIfInterrupted();
    sum = keys_.Add(key, delta);
  }
  changed_.notify_all();
  return sum;
}

Bytes InMemoryStore::CompareSet(const std::string& key, const Bytes& expected,
                                const Bytes& desired) {
  Bytes current;
  {
    std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
    ThrowIfInterrupted();
    current = keys_.CompareSet(key, expected, desired);
  }
  changed_.notify_all();
  return current;
}

bool InMemoryStore::Check(const std::vector<std::string>& keys) {
  std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
  return keys_.Check(keys);
}

void InMemoryStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  ThrowIfInterrupted();
  WaitLocked(lock, keys, timeout);
}

bool InMemoryStore::DeleteKey(const std::string& key) {
  std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
  return keys_.DeleteKey(key);
}

std::int64_t InMemoryStore::NumKeys() {
  std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
  return keys_.NumKeys();
}

std::vector<Bytes> InMemoryStore::MultiGet(const std::vector<std::string>& keys) {
  std::unique_lock lock(mutex_);
  ThrowIfInterrupted();
  WaitLocked(lock, keys, timeout_);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(*keys_.Find(key));
  return values;
}

void InMemoryStore::MultiSet(const std::vector<std::string>& keys,
                             const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) throw std::invalid_argument("MultiSet: keys/values differ");
  {
    std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
    ThrowIfInterrupted();
    for (std::size_t i = 0; i < keys.size(); ++i) keys_.Set(keys[i], values[i]);
  }
  changed_.notify_all();
}

void InMemoryStore::Append(const std::string& key, const Bytes& value) {
  {
    std::lock_guard lock(mutex_);
  ThrowIfInterrupted();
    ThrowIfInterrupted();
    keys_.Append(key, value);
  }
  changed_.notify_all();
}

void InMemoryStore::WaitLocked(std::unique_lock<std::mutex>& lock,
                               const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  // Keys can be deleted again, so the wait ends only while all of them exist under the lock.
  const bool ready = changed_.wait_for(lock, timeout, [&] {
    if (interrupted_) return true;
    for (const auto& key : keys) {
      if (keys_.Find(key) == nullptr) return false;
    }
    return true;
  });
  ThrowIfInterrupted();
  if (!ready) {
    throw StoreTimeout("wait timeout after " + std::to_string(timeout.count()) + "ms, keys: " +
                       (keys.empty() ? std::string() : keys.front()));
  }
}

void InMemoryStore::Interrupt() {
  {
    std::lock_guard lock(mutex_);
    interrupted_ = true;
  }
  changed_.notify_all();
}

void InMemoryStore::ThrowIfInterrupted() const {
  if (interrupted_) throw StoreConnectionError("the store was interrupted");
}

}  // namespace ddprun::rendezvous
