#include "rendezvous/etcd_store.h"

#include "rendezvous/store_protocol.h"

namespace ddprun::rendezvous::etcd {
namespace {

using Clock = std::chrono::steady_clock;

// Transactions that lose to another writer are retried; this many in a row means a livelock.
constexpr int kMaxConflicts = 10'000;

std::string Text(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

}  // namespace

EtcdStore::EtcdStore(EtcdStoreOptions options)
    : options_(std::move(options)), client_(options_.client) {}

nlohmann::json EtcdStore::Call(const std::string& path, const nlohmann::json& body) {
  ThrowIfInterrupted();
  return client_.Call(path, body);
}

void EtcdStore::ThrowIfInterrupted() const {
  if (interrupted_) throw StoreConnectionError("the etcd store was interrupted");
}

std::optional<KeyValue> EtcdStore::Read(const std::string& key, std::int64_t& revision) {
  RangeReply reply = ParseRange(Call("/v3/kv/range", RangeBody(Full(key))));
  revision = reply.header.revision;
  if (reply.kvs.empty()) return std::nullopt;
  return std::move(reply.kvs.front());
}

void EtcdStore::Set(const std::string& key, const Bytes& value) {
  ParsePut(Call("/v3/kv/put", PutBody(Full(key), Text(value))));
}

Bytes EtcdStore::Get(const std::string& key) {
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    std::int64_t revision = 0;
    if (auto kv = Read(key, revision)) return ToBytes(kv->value);
    AwaitKey(key, revision, deadline, WaitTimeoutMessage({key}, timeout_));
  }
}

std::int64_t EtcdStore::Add(const std::string& key, std::int64_t delta) {
  std::int64_t revision = 0;
  std::optional<KeyValue> current = Read(key, revision);
  for (int conflict = 0; conflict < kMaxConflicts; ++conflict) {
    std::int64_t value = 0;
    if (current) {
      const auto parsed = ParseCounter(ToBytes(current->value));
      if (!parsed) throw std::invalid_argument("ADD on key '" + key + "': its value is not an integer");
      value = *parsed;
    }
    value += delta;
    TxnReply txn = ParseTxn(Call("/v3/kv/txn", CompareAndPutBody(
                                                   Full(key), current ? current->mod_revision : 0,
                                                   std::to_string(value))));
    if (txn.succeeded) return value;
    current = txn.read.empty() ? std::nullopt : std::optional(std::move(txn.read.front()));
  }
  throw StoreConnectionError("etcd: ADD on '" + key + "' lost " + std::to_string(kMaxConflicts) +
                             " transactions in a row");
}

// TCPStore's semantics (KeySpace::CompareSet): a missing key matches an empty `expected` only.
Bytes EtcdStore::CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  std::int64_t revision = 0;
  std::optional<KeyValue> current = Read(key, revision);
  for (int conflict = 0; conflict < kMaxConflicts; ++conflict) {
    if (!current && !expected.empty()) return expected;
    if (current && ToBytes(current->value) != expected) return ToBytes(current->value);
    TxnReply txn = ParseTxn(Call("/v3/kv/txn",
                                 CompareAndPutBody(Full(key), current ? current->mod_revision : 0,
                                                   Text(desired))));
    if (txn.succeeded) return desired;
    current = txn.read.empty() ? std::nullopt : std::optional(std::move(txn.read.front()));
  }
  throw StoreConnectionError("etcd: COMPARE_SET on '" + key + "' lost " +
                             std::to_string(kMaxConflicts) + " transactions in a row");
}

bool EtcdStore::Check(const std::vector<std::string>& keys) {
  for (const std::string& key : keys) {
    if (ParseRange(Call("/v3/kv/range", RangeBody(Full(key), {}, true))).count == 0) return false;
  }
  return true;
}

void EtcdStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::string message = WaitTimeoutMessage(keys, timeout);
  for (const std::string& key : keys) {
    std::int64_t revision = 0;
    while (!Read(key, revision)) AwaitKey(key, revision, deadline, message);
  }
}

// Watches from the revision after the last read, so no put in between is missed; returns at the
// first put of the key, a cancelled watch, or a lost member (the caller reads again).
void EtcdStore::AwaitKey(const std::string& key, std::int64_t revision, Clock::time_point deadline,
                         const std::string& timeout_message) {
  EtcdWatch watch(options_.client, WatchCreateBody(Full(key), {}, revision + 1));
  {
    std::lock_guard lock(watches_mutex_);
    watches_.insert(&watch);
  }
  struct Unregister {
    EtcdStore& store;
    EtcdWatch* watch;
    ~Unregister() {
      std::lock_guard lock(store.watches_mutex_);
      store.watches_.erase(watch);
    }
  } unregister{*this, &watch};
  if (interrupted_) watch.Interrupt();
  for (;;) {
    ThrowIfInterrupted();
    std::optional<WatchMessage> message;
    try {
      message = watch.Next(deadline);
    } catch (const EtcdUnavailable&) {
      ThrowIfInterrupted();
      return;  // the watch's member is gone: the caller reads again and watches on another
    }
    if (!message) throw StoreTimeout(timeout_message);
    if (message->canceled) return;
    for (const WatchEvent& event : message->events) {
      if (event.type == WatchEvent::Type::kPut) return;
    }
  }
}

bool EtcdStore::DeleteKey(const std::string& key) {
  return ParseDelete(Call("/v3/kv/deleterange", DeleteRangeBody(Full(key)))).deleted > 0;
}

std::int64_t EtcdStore::NumKeys() {
  return ParseRange(Call("/v3/kv/range",
                         RangeBody(options_.prefix, PrefixEnd(options_.prefix), true)))
      .count;
}

void EtcdStore::Interrupt() {
  interrupted_ = true;
  client_.Interrupt();
  std::lock_guard lock(watches_mutex_);
  for (EtcdWatch* watch : watches_) watch->Interrupt();
}

}  // namespace ddprun::rendezvous::etcd
