// A Store decorator that namespaces keys: key -> prefix + "/" + key (gloo's and c10d's
// PrefixStore). Timeouts are those of the wrapped store; thread safety is the wrapped store's.
#pragma once
#include <memory>
#include <string>

#include "store/store.h"

namespace ddprun::store {

class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> store);

  void Set(const std::string& key, const Bytes& value) override;
  Bytes Get(const std::string& key) override;
  std::int64_t Add(const std::string& key, std::int64_t delta) override;
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool Check(const std::vector<std::string>& keys) override;
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::Wait;
  bool DeleteKey(const std::string& key) override;
  // Counts every key of the wrapped store, as c10d's PrefixStore does.
  std::int64_t NumKeys() override;
  void Interrupt() override { store_->Interrupt(); }
  std::vector<Bytes> MultiGet(const std::vector<std::string>& keys) override;
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override;
  void Append(const std::string& key, const Bytes& value) override;

  std::string Key(const std::string& key) const { return prefix_ + "/" + key; }
  const std::shared_ptr<Store>& Underlying() const { return store_; }

 private:
  std::vector<std::string> Keys(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> store_;
};

}  // namespace ddprun::store
