#include "store/prefix_store.h"

#include <stdexcept>

namespace ddprun::store {

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> store)
    : prefix_(std::move(prefix)), store_(std::move(store)) {
  if (!store_) throw std::invalid_argument("PrefixStore needs a store");
  timeout_ = store_->Timeout();
}

void PrefixStore::Set(const std::string& key, const Bytes& value) { store_->Set(Key(key), value); }

Bytes PrefixStore::Get(const std::string& key) { return store_->Get(Key(key)); }

std::int64_t PrefixStore::Add(const std::string& key, std::int64_t delta) {
  return store_->Add(Key(key), delta);
}

Bytes PrefixStore::CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return store_->CompareSet(Key(key), expected, desired);
}

bool PrefixStore::Check(const std::vector<std::string>& keys) { return store_->Check(Keys(keys)); }

void PrefixStore::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  store_->Wait(Keys(keys), timeout);
}

bool PrefixStore::DeleteKey(const std::string& key) { return store_->DeleteKey(Key(key)); }

std::int64_t PrefixStore::NumKeys() { return store_->NumKeys(); }

std::vector<Bytes> PrefixStore::MultiGet(const std::vector<std::string>& keys) {
  return store_->MultiGet(Keys(keys));
}

void PrefixStore::MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) {
  store_->MultiSet(Keys(keys), values);
}

void PrefixStore::Append(const std::string& key, const Bytes& value) {
  store_->Append(Key(key), value);
}

std::vector<std::string> PrefixStore::Keys(const std::vector<std::string>& keys) const {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& key : keys) prefixed.push_back(Key(key));
  return prefixed;
}

}  // namespace ddprun::store
