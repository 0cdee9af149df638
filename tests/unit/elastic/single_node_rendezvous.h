// A RendezvousHandler for agent tests: rounds of one node with a fixed master and no store.
#pragma once
#include <string>
#include <utility>

#include "rendezvous/rendezvous_handler.h"

namespace ddprun::rendezvous {

// A round of one node with a fixed master address and no store (agent tests use it).
class SingleNodeRendezvous : public RendezvousHandler {
 public:
  SingleNodeRendezvous(std::string run_id, RendezvousInfo info)
      : run_id_(std::move(run_id)), info_(std::move(info)) {}
  RendezvousInfo NextRendezvous() override {
    if (closed_) throw RendezvousClosedError("the rendezvous '" + run_id_ + "' is closed");
    RendezvousInfo info = info_;
    info.round = round_++;
    return info;
  }
  void SetClosed() override { closed_ = true; }
  void Shutdown() override { closed_ = true; }
  std::string RunId() const override { return run_id_; }

 private:
  std::string run_id_;
  RendezvousInfo info_;
  int round_ = 0;
  bool closed_ = false;
};

}  // namespace ddprun::rendezvous
