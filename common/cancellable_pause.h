// A pause that another thread can cut short for good: Pause(d) waits d, or returns false at
// once after Cancel() (and every later Pause too). The StoreSites' Pause and Cancel.
#pragma once
#include <chrono>
#include <condition_variable>
#include <mutex>

namespace ddprun {

class CancellablePause {
 public:
  bool Pause(std::chrono::milliseconds duration) {
    std::unique_lock lock(mutex_);
    return !cancelled_cv_.wait_for(lock, duration, [this] { return cancelled_; });
  }
  void Cancel() {
    {
      std::lock_guard lock(mutex_);
      cancelled_ = true;
    }
    cancelled_cv_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cancelled_cv_;
  bool cancelled_ = false;
};

}  // namespace ddprun
