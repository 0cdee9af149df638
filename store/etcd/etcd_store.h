// A Store over etcd v3 (etcd_client.h), so that the dynamic rendezvous runs unchanged on etcd
// (issue 14): every key lives under `prefix` (several jobs share one etcd). ADD never conflicts:
// each one puts a key of its own holding its delta under the counter's delta range
// ("\x01ddprun-add<prefix><key>\0<id>", outside the prefix, so NUM_KEYS and views of the prefix
// see only the counter's own key) and reads every delta back in the same transaction, so N nodes
// that ADD one counter at once cost N transactions; a counter is its key's value (0 when ADD
// created it, or what SET wrote) plus its deltas. SET and a successful COMPARE_SET drop the
// deltas; COMPARE_SET is a transaction on the key's mod_revision, retried from the value the
// failed transaction read back; GET and WAIT wait with an etcd watch from the revision they last
// read (no polling); CHECK and NUM_KEYS are ranges. A cluster that no member answers for is a
// StoreConnectionError (EtcdUnavailable), as a lost TCP store is. Interrupt() ends every call at
// once, a blocked wait included. Safe to share between threads.
#pragma once
#include <atomic>
#include <mutex>
#include <set>
#include <string>

#include "store/etcd/etcd_client.h"
#include "store/store.h"

namespace ddprun::store::etcd {

struct EtcdStoreOptions {
  EtcdClientOptions client;
  std::string prefix = "/ddprun/";  // every key of this store starts with it
  bool operator==(const EtcdStoreOptions&) const = default;
};

class EtcdStore : public Store {
 public:
  // `wrap`: the client's round trip, for tests (etcd_client.h).
  explicit EtcdStore(EtcdStoreOptions options, const EtcdRoundTripWrap& wrap = {});

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

 private:
  std::string Full(const std::string& key) const { return options_.prefix + key; }
  // The key's current entry (none: absent; a counter's value is its sum) and the store's
  // revision when it was read.
  std::optional<KeyValue> Read(const std::string& key, std::int64_t& revision);
  // The entry from the key's own range and its deltas' (a counter: the sum as its value).
  std::optional<KeyValue> Combine(const std::string& key, std::vector<KeyValue> own,
                                  const std::vector<KeyValue>& deltas) const;
  std::int64_t CounterOf(const std::string& key, const KeyValue& kv) const;  // invalid_argument
  std::string DeltaPrefix(const std::string& key) const;
  // A transaction op over the key's deltas: read them, or (remove) delete them.
  nlohmann::json DeltasOp(const std::string& key, bool remove) const;
  std::string NextDeltaKey(const std::string& key);
  // Blocks until `key`, found absent at `revision`, is put (watched from the next revision).
  void AwaitKey(const std::string& key, std::int64_t revision,
                std::chrono::steady_clock::time_point deadline, const std::string& timeout_message);
  nlohmann::json Call(const std::string& path, const nlohmann::json& body);
  void ThrowIfInterrupted() const;

  EtcdStoreOptions options_;
  EtcdClient client_;
  std::atomic<bool> interrupted_{false};
  const std::uint64_t delta_id_base_;  // random: delta keys of different stores never collide
  std::atomic<std::uint64_t> delta_count_{0};
  std::mutex watches_mutex_;
  std::set<EtcdWatch*> watches_;  // open watches, for Interrupt
};

}  // namespace ddprun::store::etcd
