#include "worker/gloo_store.h"

namespace ddprun::worker {

GlooStore::GlooStore(std::shared_ptr<store::Store> store) : store_(std::move(store)) {}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  store_->Set(key, store::Bytes(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  auto bytes = store_->Get(key);
  return std::vector<char>(bytes.begin(), bytes.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { store_->Wait(keys); }

void GlooStore::wait(const std::vector<std::string>& keys,
                     const std::chrono::milliseconds& timeout) {
  store_->Wait(keys, timeout);
}

}  // namespace ddprun::worker
