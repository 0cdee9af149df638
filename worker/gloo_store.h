// gloo's rendezvous::Store (set / blocking get / wait / wait with timeout) on top of a ddprun
// Store, so gloo's connectFullMesh exchanges its addresses through the launcher's store.
// A wait past its timeout throws rendezvous::StoreTimeout.
#pragma once
#include <gloo/rendezvous/store.h>

#include <memory>

#include "store/store.h"

namespace ddprun::worker {

class GlooStore : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(std::shared_ptr<store::Store> store);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::shared_ptr<store::Store> store_;
};

}  // namespace ddprun::worker
