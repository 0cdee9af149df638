#include "store/etcd/etcd_store.h"

#include <algorithm>
#include <cstdio>
#include <random>

#include "store/store_protocol.h"

namespace ddprun::store::etcd {
namespace {

using Clock = std::chrono::steady_clock;

// COMPARE_SET transactions that lose to another writer are retried; this many in a row means a
// livelock.
constexpr int kMaxConflicts = 10'000;

std::string Text(const Bytes& bytes) { return std::string(bytes.begin(), bytes.end()); }

// A transaction without a condition: `ops` in order, at one revision.
nlohmann::json Always(nlohmann::json ops) {
  return TxnBody(nlohmann::json::array(), std::move(ops), nlohmann::json::array());
}

// The deltas that `mine` found when it was first committed. An ADD whose reply was lost is sent
// again, to another member: its put of the same key keeps the key's create_revision, and the
// ADDs committed since (created later) are not part of the value it returns.
std::vector<KeyValue> UpTo(const std::string& mine, std::vector<KeyValue> deltas) {
  const auto own = std::find_if(deltas.begin(), deltas.end(),
                                [&mine](const KeyValue& delta) { return delta.key == mine; });
  if (own == deltas.end()) return deltas;
  const std::int64_t committed = own->create_revision;
  std::erase_if(deltas,
                [committed](const KeyValue& delta) { return delta.create_revision > committed; });
  return deltas;
}

}  // namespace

EtcdStore::EtcdStore(EtcdStoreOptions options, const EtcdRoundTripWrap& wrap)
    : options_(std::move(options)),
      client_(options_.client, wrap),
      delta_id_base_(std::random_device{}() * 0x100000000ULL + std::random_device{}()) {}

nlohmann::json EtcdStore::Call(const std::string& path, const nlohmann::json& body) {
  ThrowIfInterrupted();
  return client_.Call(path, body);
}

void EtcdStore::ThrowIfInterrupted() const {
  if (interrupted_) throw StoreConnectionError("the etcd store was interrupted");
}

std::int64_t EtcdStore::CounterOf(const std::string& key, const KeyValue& base) const {
  const auto value = ParseCounter(ToBytes(base.value));
  if (!value) throw std::invalid_argument(NotACounter(key));
  return *value;
}

std::optional<KeyValue> EtcdStore::Combine(const std::string& key, std::vector<KeyValue> own,
                                           const std::vector<KeyValue>& deltas) const {
  if (own.empty()) return std::nullopt;
  KeyValue kv = std::move(own.front());
  if (deltas.empty()) return kv;
  std::int64_t sum = CounterOf(key, kv);
  for (const KeyValue& delta : deltas) sum += CounterOf(key, delta);
  kv.value = std::to_string(sum);
  return kv;
}

std::string EtcdStore::DeltaPrefix(const std::string& key) const {
  std::string prefix = std::string(1, '\x01') + "ddprun-add" + Full(key);
  prefix.push_back('\0');
  return prefix;
}

nlohmann::json EtcdStore::DeltasOp(const std::string& key, bool remove) const {
  const std::string deltas = DeltaPrefix(key);
  return remove ? DeleteOp(deltas, PrefixEnd(deltas)) : RangeOp(deltas, PrefixEnd(deltas));
}

std::string EtcdStore::NextDeltaKey(const std::string& key) {
  char id[40];
  std::snprintf(id, sizeof id, "%016llx-%llu", static_cast<unsigned long long>(delta_id_base_),
                static_cast<unsigned long long>(++delta_count_));
  return DeltaPrefix(key) + id;
}

// One read-only transaction: the key and its deltas at one revision.
std::optional<KeyValue> EtcdStore::Read(const std::string& key, std::int64_t& revision) {
  TxnReply txn = ParseTxn(Call(
      "/v3/kv/txn", Always(nlohmann::json::array({RangeOp(Full(key)), DeltasOp(key, false)}))));
  revision = txn.header.revision;
  return Combine(key, std::move(txn.ranges.at(0)), txn.ranges.at(1));
}

void EtcdStore::Set(const std::string& key, const Bytes& value) {
  ParseTxn(Call("/v3/kv/txn", Always(nlohmann::json::array(
                                  {DeltasOp(key, true), PutOp(Full(key), Text(value))}))));
}

Bytes EtcdStore::Get(const std::string& key) {
  const auto deadline = Clock::now() + timeout_;
  for (;;) {
    std::int64_t revision = 0;
    if (auto kv = Read(key, revision)) return ToBytes(kv->value);
    AwaitKey(key, revision, deadline, WaitTimeoutMessage({key}, timeout_));
  }
}

// Never conflicts: the transaction puts this ADD's own delta key and reads every delta back at
// the revision it commits at; the key itself is created ("0") by the first ADD, so that waits and
// CHECK see it. ADD 0 only reads (and creates a missing key, as TCPStore's does). Idempotent
// across the client's retry of a lost reply (the same body on another member): the delta key is
// chosen once, so the retry puts the same key again, and returns the counter as the first
// commit left it (UpTo).
std::int64_t EtcdStore::Add(const std::string& key, std::int64_t delta) {
  std::int64_t revision = 0;
  if (delta == 0) {
    if (auto current = Read(key, revision)) return CounterOf(key, *current);
  }
  using nlohmann::json;
  const std::string full = Full(key);
  const std::optional<std::string> mine =
      delta != 0 ? std::optional(NextDeltaKey(key)) : std::nullopt;
  json created = json::array({PutOp(full, "0")});
  json existing = json::array({RangeOp(full)});
  for (json* branch : {&created, &existing}) {
    if (mine) branch->push_back(PutOp(*mine, std::to_string(delta)));
    branch->push_back(DeltasOp(key, false));
  }
  TxnReply txn = ParseTxn(
      Call("/v3/kv/txn", TxnBody(json::array({CreatedAtCompare(full, 0)}), created, existing)));
  std::vector<KeyValue> own =
      txn.succeeded ? std::vector<KeyValue>{KeyValue{full, "0"}} : std::move(txn.ranges.at(0));
  try {
    std::vector<KeyValue> deltas = std::move(txn.ranges.back());
    if (mine) deltas = UpTo(*mine, std::move(deltas));
    return CounterOf(key, *Combine(key, std::move(own), deltas));
  } catch (const std::invalid_argument&) {  // not a counter: leave the key as it was
    if (mine) ParseDelete(Call("/v3/kv/deleterange", DeleteRangeBody(*mine)));
    throw;
  }
}

// TCPStore's semantics (KeySpace::CompareSet): a missing key matches an empty `expected` only.
// A counter compares as its sum; a successful swap drops its deltas, as SET does.
Bytes EtcdStore::CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  using nlohmann::json;
  std::int64_t revision = 0;
  std::optional<KeyValue> current = Read(key, revision);
  const std::string full = Full(key);
  for (int conflict = 0; conflict < kMaxConflicts; ++conflict) {
    if (!current && !expected.empty()) return expected;
    if (current && ToBytes(current->value) != expected) return ToBytes(current->value);
    TxnReply txn = ParseTxn(
        Call("/v3/kv/txn",
             TxnBody(json::array({ModifiedAtCompare(full, current ? current->mod_revision : 0)}),
                     json::array({PutOp(full, Text(desired)), DeltasOp(key, true)}),
                     json::array({RangeOp(full), DeltasOp(key, false)}))));
    if (txn.succeeded) return desired;
    current = Combine(key, std::move(txn.ranges.at(0)), txn.ranges.at(1));
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
  EtcdWatch watch(client_, WatchCreateBody(Full(key), {}, revision + 1));
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
  const std::string deltas = DeltaPrefix(key);
  ParseDelete(Call("/v3/kv/deleterange", DeleteRangeBody(deltas, PrefixEnd(deltas))));
  return ParseDelete(Call("/v3/kv/deleterange", DeleteRangeBody(Full(key)))).deleted > 0;
}

std::int64_t EtcdStore::NumKeys() {
  return ParseRange(
             Call("/v3/kv/range", RangeBody(options_.prefix, PrefixEnd(options_.prefix), true)))
      .count;
}

void EtcdStore::Interrupt() {
  interrupted_ = true;
  client_.Interrupt();
  std::lock_guard lock(watches_mutex_);
  for (EtcdWatch* watch : watches_) watch->Interrupt();
}

}  // namespace ddprun::store::etcd
