// A discrete-event simulation over real threads, for tests of code that waits on a store and a
// clock from several threads at once (simulated nodes of one job).
//
// Simulation is a FakeClock whose time moves only when every participant thread is blocked in
// one of its waits (a store Wait/Get of a SimulatedStore, a clock Pause, or the test's Ready /
// Finishes on a spawned thread), and then straight to the earliest deadline among those waits.
// Participants are the thread that made the Simulation (the test's) and every thread started by
// Spawn. A thread is "blocked" only while it sleeps in one of these waits and nothing it waits
// for happened: whoever makes a wait ready (a store write, a spawned thread finishing) marks the
// waiter runnable under the simulation's lock before it goes on, so the simulation never sees
// "everyone blocked" between a wake-up and the woken thread running, and time never jumps past
// a wake-up. A wait checks its condition and registers under that same lock (no lost wake-up).
//
// Bounds: a participant blocked for kRealBound of real time without being woken, or more than
// kMaxSteps moves of the time, fails with a SimulationStuck naming the state, instead of hanging.
// Every thread that waits on a SimulatedStore must be a participant (checked).
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"

namespace ddprun::store::testing {

class SimulationStuck : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Simulation : public ddprun::testing::FakeClock {
 public:
  static constexpr std::chrono::seconds kRealBound{30};
  static constexpr std::int64_t kMaxSteps = 1'000'000;

  // The calling thread (the test's) takes part until the simulation ends. `real_bound`: how
  // long a participant may wait, in real time, without being woken.
  explicit Simulation(std::chrono::milliseconds real_bound = kRealBound)
      : FakeClock(PauseMode::kAdvance), real_bound_(real_bound) {
    std::lock_guard lock(mutex_);
    ++participants_;
    Current() = this;
  }

  // The test's thread leaves (its part is over); then every spawned thread is waited for.
  ~Simulation() override {
    {
      std::lock_guard lock(mutex_);
      --participants_;
      if (Current() == this) Current() = nullptr;
      WakeReadyLocked();
    }
    changed_.notify_all();
    for (auto& thread : threads_) thread.wait();
  }

  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Runs `fn` on a participant thread of its own; the future is ready (value or exception)
  // before the thread stops taking part.
  template <typename Fn>
  auto Spawn(Fn fn) -> std::future<decltype(fn())> {
    using T = decltype(fn());
    auto promise = std::make_shared<std::promise<T>>();
    std::future<T> result = promise->get_future();
    {
      std::lock_guard lock(mutex_);
      ++participants_;  // before the thread exists: it is never running uncounted
    }
    threads_.push_back(
        std::async(std::launch::async, [this, promise, fn = std::move(fn)]() mutable {
          Current() = this;
          try {
            if constexpr (std::is_void_v<T>) {
              fn();
              promise->set_value();
            } else {
              promise->set_value(fn());
            }
          } catch (...) {
            promise->set_exception(std::current_exception());
          }
          Current() = nullptr;
          {
            std::lock_guard lock(mutex_);
            --participants_;
            WakeReadyLocked();  // whoever waits on this thread's future runs before time moves
          }
          changed_.notify_all();
        }));
    return result;
  }

  // True when `future` is ready within `fake_bound` of simulated time (the caller waits as a
  // participant: time moves while it waits).
  template <typename T>
  bool Finishes(std::future<T>& future, std::chrono::milliseconds fake_bound) {
    const auto ready = [&] {
      return future.wait_for(std::chrono::seconds{0}) == std::future_status::ready;
    };
    return Block(Deadline(fake_bound), ready, nullptr);
  }

  // The value of `future`, which must be ready within `fake_bound` of simulated time.
  template <typename T>
  T Ready(std::future<T>& future, std::chrono::milliseconds fake_bound) {
    if (!Finishes(future, fake_bound)) {
      throw SimulationStuck("not ready within " + std::to_string(fake_bound.count()) +
                            " ms of simulated time");
    }
    return future.get();
  }

  bool Pause(std::chrono::milliseconds duration, Cancellation& cancellation) override {
    if (cancellation.Cancelled()) return false;
    // A canceller is a running participant: by the time everyone is blocked again, the
    // cancellation is seen (the ready conditions are looked at again before time moves).
    Block(
        Deadline(duration), [&] { return cancellation.Cancelled(); }, nullptr);
    return !cancellation.Cancelled();
  }

  // Waits until `ready()` (true) or until simulated time reaches `deadline_ns` (false).
  // `ready` is evaluated under the simulation's lock; `store` (may be null) is the store whose
  // writes can make it true.
  bool Block(std::int64_t deadline_ns, const std::function<bool()>& ready, const void* store) {
    std::unique_lock lock(mutex_);
    if (Current() != this) {
      throw std::logic_error("a thread that is not a participant waits in the simulation");
    }
    const auto real_deadline = std::chrono::steady_clock::now() + real_bound_;
    for (;;) {
      if (ready()) return true;
      if (ElapsedNs() >= deadline_ns) return false;
      Waiter waiter{deadline_ns, &ready, store};
      waiters_.insert(&waiter);
      ++blocked_;
      while (!waiter.woken) {
        if (blocked_ == participants_) StepLocked();
        if (waiter.woken) break;
        changed_.notify_all();
        if (changed_.wait_until(lock, real_deadline) == std::cv_status::timeout && !waiter.woken) {
          const std::string state =
              StateLocked("a participant waited " + std::to_string(real_bound_.count()) +
                          " ms of real time without being woken");
          waiters_.erase(&waiter);
          --blocked_;
          throw SimulationStuck(state);
        }
      }
      // Woken: whoever woke it already counted it runnable and took it off the waiters.
    }
  }

  // A store changed: wakes the waits it made ready. Called by the writer, which is running, so
  // the woken count as runnable before the simulation can see everyone blocked.
  void Changed() {
    {
      std::lock_guard lock(mutex_);
      WakeReadyLocked();
    }
    changed_.notify_all();
  }

  std::int64_t Deadline(std::chrono::milliseconds from_now) const {
    const std::int64_t span = std::chrono::nanoseconds(from_now).count();
    const std::int64_t now = ElapsedNs();
    return span > std::numeric_limits<std::int64_t>::max() - now
               ? std::numeric_limits<std::int64_t>::max()
               : now + span;
  }

  // The simulation the calling thread takes part in, or null.
  static Simulation* OfThisThread() { return Current(); }

  std::int64_t Steps() {
    std::lock_guard lock(mutex_);
    return steps_;
  }

 private:
  struct Waiter {
    std::int64_t deadline_ns;
    const std::function<bool()>* ready;
    const void* store;
    bool woken = false;
  };

  static Simulation*& Current() {
    thread_local Simulation* current = nullptr;
    return current;
  }

  std::int64_t ElapsedNs() const { return Elapsed().count(); }

  void WakeLocked(Waiter* waiter) {
    waiter->woken = true;
    --blocked_;
  }

  // Wakes every waiter whose condition holds now. True when it woke any.
  bool WakeReadyLocked() {
    bool any = false;
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if ((*(*it)->ready)()) {
        WakeLocked(*it);
        it = waiters_.erase(it);
        any = true;
      } else {
        ++it;
      }
    }
    return any;
  }

  // Everyone is blocked: wake the ready ones if any (a cancelled pause, say), else move the time
  // to the earliest deadline and wake the waits that end there.
  void StepLocked() {
    if (WakeReadyLocked()) return;
    if (waiters_.empty()) return;
    if (++steps_ > kMaxSteps) {
      for (Waiter* waiter : waiters_) WakeLocked(waiter);
      waiters_.clear();
      throw SimulationStuck(StateLocked("more than " + std::to_string(kMaxSteps) + " time steps"));
    }
    std::int64_t earliest = std::numeric_limits<std::int64_t>::max();
    for (Waiter* waiter : waiters_) earliest = std::min(earliest, waiter->deadline_ns);
    if (earliest == std::numeric_limits<std::int64_t>::max()) {
      for (Waiter* waiter : waiters_) WakeLocked(waiter);
      waiters_.clear();
      throw SimulationStuck(StateLocked("every participant waits without a deadline"));
    }
    const std::int64_t now = ElapsedNs();
    if (earliest > now) Advance(std::chrono::nanoseconds(earliest - now));
    for (auto it = waiters_.begin(); it != waiters_.end();) {
      if ((*it)->deadline_ns <= earliest) {
        WakeLocked(*it);
        it = waiters_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::string StateLocked(const std::string& what) const {
    return "simulation stuck: " + what + " (" + std::to_string(participants_) + " participants, " +
           std::to_string(blocked_) + " blocked, at " + std::to_string(ElapsedNs() / 1'000'000) +
           " ms of simulated time)";
  }

  const std::chrono::milliseconds real_bound_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int participants_ = 0;
  int blocked_ = 0;
  std::int64_t steps_ = 0;
  std::set<Waiter*> waiters_;
  std::vector<std::future<void>> threads_;  // only the test's thread touches it
};

// An in-memory store whose blocking calls are waits of `simulation`, and whose writes wake them.
// Lock order: the simulation's lock, then the store's (a waiter's condition reads the store).
class SimulatedStore : public InMemoryStore {
 public:
  explicit SimulatedStore(Simulation& simulation,
                          std::chrono::milliseconds timeout = Store::kDefaultTimeout)
      : InMemoryStore(timeout), simulation_(simulation) {}

  void Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override {
    const auto ready = [&] {
      try {
        return InMemoryStore::Check(keys);
      } catch (const StoreConnectionError&) {
        return true;  // interrupted: the call below throws
      }
    };
    const bool arrived = simulation_.Block(simulation_.Deadline(timeout), ready, this);
    if (!arrived) {
      throw StoreTimeout("wait timeout after " + std::to_string(timeout.count()) +
                         "ms, keys: " + (keys.empty() ? std::string() : keys.front()));
    }
    InMemoryStore::Check(keys);  // throws when interrupted
  }
  using Store::Wait;

  // The key is there once the wait returns (nothing here deletes keys a node waits for), so the
  // in-memory Get does not block.
  Bytes Get(const std::string& key) override {
    Wait({key}, Timeout());
    return InMemoryStore::Get(key);
  }
  std::vector<Bytes> MultiGet(const std::vector<std::string>& keys) override {
    Wait(keys, Timeout());
    return InMemoryStore::MultiGet(keys);
  }

  void Set(const std::string& key, const Bytes& value) override {
    InMemoryStore::Set(key, value);
    simulation_.Changed();
  }
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    const std::int64_t sum = InMemoryStore::Add(key, delta);
    simulation_.Changed();
    return sum;
  }
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes now = InMemoryStore::CompareSet(key, expected, desired);
    simulation_.Changed();
    return now;
  }
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    InMemoryStore::MultiSet(keys, values);
    simulation_.Changed();
  }
  void Append(const std::string& key, const Bytes& value) override {
    InMemoryStore::Append(key, value);
    simulation_.Changed();
  }
  void Interrupt() override {
    InMemoryStore::Interrupt();
    simulation_.Changed();
  }

 private:
  Simulation& simulation_;
};

}  // namespace ddprun::store::testing
