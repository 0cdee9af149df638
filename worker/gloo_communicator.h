// The CPU backend: gloo's ring allreduce and barrier over its TCP transport (the algorithm
// PyTorch's ProcessGroupGloo runs). Construction rendezvouses through `store` with gloo's
// connectFullMesh, bounded by `timeout`, which also bounds every collective.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "store/store.h"
#include "worker/communicator.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace ddprun::worker {

struct GlooConfig {
  int rank = 0;
  int size = 1;
  std::string address;    // local address to listen on (see LocalAddressToward)
  std::string interface;  // or a network interface name (GLOO_SOCKET_IFNAME); wins if set
  std::chrono::milliseconds timeout{60'000};
};

class GlooCommunicator : public Communicator {
 public:
  // Creates the TCP device (and its thread): do it after any fork. Throws CollectiveTimeout
  // when the mesh is not complete within the timeout.
  GlooCommunicator(const GlooConfig& config, std::shared_ptr<store::Store> store);
  ~GlooCommunicator() override;

  int Rank() const override { return config_.rank; }
  int Size() const override { return config_.size; }
  std::string Backend() const override { return "cpu"; }
  std::unique_ptr<Buffer> Allocate(std::size_t bytes) override;
  void Allreduce(Buffer& buffer, std::size_t count, DataType type) override;
  void Barrier() override;

 private:
  GlooConfig config_;
  std::shared_ptr<gloo::Context> context_;
  std::uint32_t next_tag_ = 1;
};

}  // namespace ddprun::worker
