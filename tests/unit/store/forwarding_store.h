// A store that passes every call on to another one (Next()), for tests that put something in
// between: a store that can go down, a call held on a slow link. Override Next() to fail every
// call, or one operation to act before passing it on. Interrupt() goes to the store itself.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "store/store.h"

namespace ddprun::store::testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(std::shared_ptr<Store> store) : store_(std::move(store)) {}

  void Set(const std::string& key, const Bytes& value) override { Next().Set(key, value); }
  Bytes Get(const std::string& key) override { return Next().Get(key); }
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    return Next().Add(key, delta);
  }
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    return Next().CompareSet(key, expected, desired);
  }
  bool Check(const std::vector<std::string>& keys) override { return Next().Check(keys); }
  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    Next().Wait(keys, timeout);
  }
  using Store::Wait;
  bool DeleteKey(const std::string& key) override { return Next().DeleteKey(key); }
  std::int64_t NumKeys() override { return Next().NumKeys(); }
  void Interrupt() override { store_->Interrupt(); }

 protected:
  // The store each call goes to.
  virtual Store& Next() { return *store_; }

 private:
  std::shared_ptr<Store> store_;
};

}  // namespace ddprun::store::testing
