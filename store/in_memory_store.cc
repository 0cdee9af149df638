#include "store/in_memory_store.h"

#include <stdexcept>

namespace ddprun::store {

InMemoryStore::InMemoryStore(std::chrono::milliseconds timeout)
    : InMemoryStore(std::make_shared<Shared>(), timeout) {}

InMemoryStore::InMemoryStore(std::shared_ptr<Shared> shared, std::chrono::milliseconds timeout)
    : shared_(std::move(shared)) {
  timeout_ = timeout;
}

std::shared_ptr<InMemoryStore> InMemoryStore::Connect() const {
  return std::shared_ptr<InMemoryStore>(new InMemoryStore(shared_, timeout_));
}

template <typename Fn>
auto InMemoryStore::Locked(bool notify, Fn fn) {
  struct Notifier {
    std::condition_variable* changed;
    ~Notifier() {
      if (changed) changed->notify_all();
    }
  } notifier{notify ? &shared_->changed : nullptr};
  std::lock_guard lock(shared_->mutex);
  ThrowIfInterrupted();
  return fn(shared_->keys);
}

void InMemoryStore::Set(const std::string& key, const Bytes& value) {
  Locked(true, [&](KeySpace& keys) { keys.Set(key, value); });
}

Bytes InMemoryStore::Get(const std::string& key) {
  std::unique_lock lock(shared_->mutex);
  WaitLocked(lock, {key}, timeout_);
  return *shared_->keys.Find(key);
}

std::int64_t InMemoryStore::Add(const std::string& key, std::int64_t delta) {
  return Locked(true, [&](KeySpace& keys) { return keys.Add(key, delta); });
}

Bytes InMemoryStore::CompareSet(const std::string& key, const Bytes& expected,
                                const Bytes& desired) {
  return Locked(true, [&](KeySpace& keys) { return keys.CompareSet(key, expected, desired); });
}

bool InMemoryStore::Check(const std::vector<std::string>& keys) {
  return Locked(false, [&](KeySpace& space) { return space.Check(keys); });
}

void InMemoryStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  std::unique_lock lock(shared_->mutex);
  WaitLocked(lock, keys, timeout);
}

bool InMemoryStore::DeleteKey(const std::string& key) {
  return Locked(false, [&](KeySpace& keys) { return keys.DeleteKey(key); });
}

std::int64_t InMemoryStore::NumKeys() {
  return Locked(false, [&](KeySpace& keys) { return keys.NumKeys(); });
}

std::vector<Bytes> InMemoryStore::MultiGet(const std::vector<std::string>& keys) {
  std::unique_lock lock(shared_->mutex);
  WaitLocked(lock, keys, timeout_);
  std::vector<Bytes> values;
  values.reserve(keys.size());
  for (const auto& key : keys) values.push_back(*shared_->keys.Find(key));
  return values;
}

void InMemoryStore::MultiSet(const std::vector<std::string>& keys,
                             const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) throw std::invalid_argument("MultiSet: keys/values differ");
  Locked(true, [&](KeySpace& space) {
    for (std::size_t i = 0; i < keys.size(); ++i) space.Set(keys[i], values[i]);
  });
}

void InMemoryStore::Append(const std::string& key, const Bytes& value) {
  Locked(true, [&](KeySpace& keys) { keys.Append(key, value); });
}

void InMemoryStore::WaitLocked(std::unique_lock<std::mutex>& lock,
                               const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  ThrowIfInterrupted();
  // Keys can be deleted again, so the wait ends only while all of them exist under the lock.
  const bool ready = shared_->changed.wait_for(lock, timeout, [&] {
    if (interrupted_) return true;
    for (const auto& key : keys) {
      if (shared_->keys.Find(key) == nullptr) return false;
    }
    return true;
  });
  ThrowIfInterrupted();
  if (!ready) {
    throw StoreTimeout("wait timeout after " + std::to_string(timeout.count()) +
                       "ms, keys: " + (keys.empty() ? std::string() : keys.front()));
  }
}

void InMemoryStore::Interrupt() {
  {
    std::lock_guard lock(shared_->mutex);
    interrupted_ = true;
  }
  shared_->changed.notify_all();
}

void InMemoryStore::ThrowIfInterrupted() const {
  if (interrupted_) throw StoreConnectionError("the store connection was interrupted");
}

}  // namespace ddprun::store
