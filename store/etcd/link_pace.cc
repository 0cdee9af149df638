#include "store/etcd/link_pace.h"

#include <algorithm>

namespace ddprun::store::etcd {

std::chrono::milliseconds LinkPace::Timeout() const {
  const auto slowest = *std::max_element(recent_.begin(), recent_.end());
  return std::clamp(slowest * kStretch, configured_, configured_ * kMaxStretch);
}

void LinkPace::Answered(std::chrono::milliseconds took) {
  recent_[next_] = took;
  next_ = (next_ + 1) % kWindow;
}

}  // namespace ddprun::store::etcd
