#include "store/tcp_store_server_keys.h"

#include <algorithm>
#include <utility>

namespace ddprun::store {
namespace {

void RunAll(std::vector<KeySpace::ReadyCallback>& callbacks) {
  for (auto& callback : callbacks) {
    if (callback) callback();
  }
}

std::size_t EraseId(std::unordered_map<std::string, std::vector<KeySpace::WaiterId>>& index,
                    const std::string& key, KeySpace::WaiterId id) {
  const auto it = index.find(key);
  if (it == index.end()) return 0;
  const std::size_t removed = std::erase(it->second, id);
  if (it->second.empty()) index.erase(it);
  return removed;
}

}  // namespace

KeySpace::KeySpace(const ServerLimits& limits) : limits_(limits) {}

void KeySpace::Set(const std::string& key, const Bytes& value) { Store(key, value); }

const Bytes* KeySpace::Find(const std::string& key) const {
  const auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}

std::int64_t KeySpace::Add(const std::string& key, std::int64_t delta) {
  std::int64_t sum = delta;
  if (const Bytes* current = Find(key)) {
    const auto value = ParseCounter(*current);
    if (!value) throw KeySpaceError(NotACounter(key));
    if (__builtin_add_overflow(*value, delta, &sum)) {
      throw KeySpaceError("ADD " + key + ": the counter would overflow");
    }
  }
  const std::string text = std::to_string(sum);
  Store(key, Bytes(text.begin(), text.end()));
  return sum;
}

Bytes KeySpace::CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  const Bytes* current = Find(key);
  if (current == nullptr) {
    // Unlike PyTorch's legacy server, creating the key here wakes its waiters.
    if (!expected.empty()) return expected;
    Store(key, desired);
    return desired;
  }
  if (*current != expected) return *current;
  Store(key, desired);
  return desired;
}

void KeySpace::Append(const std::string& key, const Bytes& suffix) {
  const Bytes* current = Find(key);
  Bytes joined = current ? *current : Bytes{};
  joined.insert(joined.end(), suffix.begin(), suffix.end());
  Store(key, std::move(joined));
}

bool KeySpace::DeleteKey(const std::string& key) {
  const auto it = values_.find(key);
  if (it == values_.end()) return false;
  Bytes old_value = std::move(it->second);
  stored_bytes_ -= key.size() + old_value.size();
  values_.erase(it);
  Notify(key, &old_value, nullptr);
  return true;
}

bool KeySpace::Check(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [&](const std::string& key) { return Present(key); });
}

bool KeySpace::Present(const std::string& key) const {
  if (values_.count(key) != 0) return true;
  if (queues_.empty()) return false;
  const auto queue = queues_.find(key);
  return queue != queues_.end() && !queue->second.empty();
}

std::vector<std::string> KeySpace::ListKeys() const {
  std::vector<std::string> keys;
  keys.reserve(values_.size());
  for (const auto& entry : values_) keys.push_back(entry.first);
  return keys;
}

KeySpace::WaiterId KeySpace::Wait(const std::vector<std::string>& keys, ReadyCallback on_ready) {
  std::vector<std::string> missing;
  for (const auto& key : keys) {
    if (!Present(key)) missing.push_back(key);
  }
  if (missing.empty()) return kNoWaiter;
  ReserveWaiters(missing.size());
  const WaiterId id = next_id_++;
  for (const auto& key : missing) key_waiters_[key].push_back(id);
  registrations_ += missing.size();
  waiters_.emplace(id, Waiter{missing.size(), std::move(missing), std::move(on_ready)});
  return id;
}

void KeySpace::CancelWait(WaiterId id) {
  const auto it = waiters_.find(id);
  if (it == waiters_.end()) return;
  for (const auto& key : it->second.keys) {
    registrations_ -= EraseId(key_waiters_, key, id) + EraseId(barrier_waiters_, key, id);
  }
  waiters_.erase(it);
}

void KeySpace::QueuePush(const std::string& name, const Bytes& item) {
  if (queued_items_ + values_.size() >= limits_.max_keys ||
      stored_bytes_ + item.size() > limits_.max_stored_bytes) {
    throw KeySpaceError("QUEUE_PUSH " + name + ": the store is full");
  }
  queues_[name].push_back(item);
  ++queued_items_;
  stored_bytes_ += item.size();
  WakeOne(name);
}

std::pair<std::int64_t, std::optional<Bytes>> KeySpace::QueuePop(const std::string& name) {
  const auto it = queues_.find(name);
  if (it == queues_.end() || it->second.empty()) return {0, std::nullopt};
  const auto length = static_cast<std::int64_t>(it->second.size());
  Bytes item = std::move(it->second.front());
  it->second.pop_front();
  if (it->second.empty()) queues_.erase(it);
  --queued_items_;
  stored_bytes_ -= item.size();
  return {length, std::move(item)};
}

std::int64_t KeySpace::QueueLen(const std::string& name) const {
  const auto it = queues_.find(name);
  return it == queues_.end() ? 0 : static_cast<std::int64_t>(it->second.size());
}

KeySpace::WaiterId KeySpace::Barrier(const std::string& key, std::int64_t world_size,
                                     ReadyCallback on_ready) {
  const std::int64_t count = Add(key, 1);
  if (count >= world_size) {
    std::vector<ReadyCallback> ready;
    const auto it = barrier_waiters_.find(key);
    if (it != barrier_waiters_.end()) {
      const auto ids = std::move(it->second);
      barrier_waiters_.erase(it);
      registrations_ -= ids.size();
      for (const WaiterId id : ids) ready.push_back(Release(id));
    }
    RunAll(ready);
    return kNoWaiter;
  }
  ReserveWaiters(1);
  const WaiterId id = next_id_++;
  barrier_waiters_[key].push_back(id);
  ++registrations_;
  waiters_.emplace(id, Waiter{1, {key}, std::move(on_ready)});
  return id;
}

KeySpace::WaiterId KeySpace::Watch(const std::string& key, WatchCallback on_change) {
  ReserveWaiters(1);
  const WaiterId id = next_id_++;
  watchers_.emplace(id, Watcher{key, std::move(on_change)});
  key_watchers_[key].push_back(id);
  ++registrations_;
  return id;
}

void KeySpace::Unwatch(WaiterId id) {
  const auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  registrations_ -= EraseId(key_watchers_, it->second.key, id);
  watchers_.erase(it);
}

void KeySpace::Store(const std::string& key, Bytes value) {
  auto it = values_.find(key);
  const bool is_new = it == values_.end();
  ReserveBytes(value.size() + (is_new ? key.size() : 0), is_new ? 0 : it->second.size(), is_new);
  const bool watched = key_watchers_.count(key) != 0;
  std::optional<Bytes> old_value;
  if (watched && !is_new) old_value = it->second;
  stored_bytes_ += value.size() + (is_new ? key.size() : 0);
  if (is_new) {
    it = values_.emplace(key, std::move(value)).first;
  } else {
    stored_bytes_ -= it->second.size();
    it->second = std::move(value);
  }
  if (watched) {
    const Bytes new_value = it->second;
    Notify(key, old_value ? &*old_value : nullptr, &new_value);
  }
  WakeAll(key);
}

void KeySpace::ReserveBytes(std::size_t added, std::size_t removed, bool new_entry) {
  if (new_entry && values_.size() + queued_items_ >= limits_.max_keys) {
    throw KeySpaceError("the store holds the maximum number of keys");
  }
  if (stored_bytes_ - removed + added > limits_.max_stored_bytes) {
    throw KeySpaceError("the store holds the maximum number of bytes");
  }
}

void KeySpace::ReserveWaiters(std::size_t count) const {
  if (registrations_ + count > limits_.max_waiters) {
    throw KeySpaceError("too many waiters registered on the store");
  }
}

void KeySpace::WakeAll(const std::string& key) {
  const auto it = key_waiters_.find(key);
  if (it == key_waiters_.end()) return;
  const auto ids = std::move(it->second);
  key_waiters_.erase(it);
  registrations_ -= ids.size();
  std::vector<ReadyCallback> ready;
  for (const WaiterId id : ids) ready.push_back(Release(id));
  RunAll(ready);
}

void KeySpace::WakeOne(const std::string& key) {
  // PyTorch's libuv server decrements every waiter until one reaches zero and keeps them all
  // registered; here exactly the oldest waiter consumes the pushed item.
  const auto it = key_waiters_.find(key);
  if (it == key_waiters_.end()) return;
  const WaiterId id = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) key_waiters_.erase(it);
  --registrations_;
  if (auto callback = Release(id)) callback();
}

KeySpace::ReadyCallback KeySpace::Release(WaiterId id) {
  const auto it = waiters_.find(id);
  if (it == waiters_.end() || --it->second.remaining != 0) return {};
  ReadyCallback callback = std::move(it->second.on_ready);
  waiters_.erase(it);
  return callback;
}

void KeySpace::Notify(const std::string& key, const Bytes* old_value, const Bytes* new_value) {
  const auto it = key_watchers_.find(key);
  if (it == key_watchers_.end()) return;
  const WatchEvent event = old_value == nullptr   ? WatchEvent::kCreated
                           : new_value == nullptr ? WatchEvent::kDeleted
                                                  : WatchEvent::kUpdated;
  const Bytes empty;
  std::vector<WatchCallback> callbacks;
  for (const WaiterId id : it->second) callbacks.push_back(watchers_.at(id).on_change);
  for (auto& callback : callbacks) {
    callback(event, key, old_value ? *old_value : empty, new_value ? *new_value : empty);
  }
}

}  // namespace ddprun::store
