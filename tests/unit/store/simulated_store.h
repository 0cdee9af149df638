// A discrete-event simulation over real threads, for tests of code that waits on a store and a
// clock from several threads at once (simulated nodes of one job).
//
// Simulation is a FakeClock whose time moves only when every participant thread is blocked in
// one of its waits (a store Wait/Get of a SimulatedStore, a clock Pause, a Block, or the test's
// Ready / Finishes on a spawned thread), and then straight to the earliest deadline among those
// waits. Participants are the thread that made the Simulation (the test's, participant 0) and
// every thread started by Spawn (1, 2, ... in the order of the Spawn calls).
//
// Deterministic scheduling. At most one participant runs at a time: the one holding the token.
// It keeps the token until it blocks in one of those waits or its spawned function ends; then the
// scheduler hands the token to one of the runnable participants, chosen by a generator seeded
// with the constructor's seed (SplitMix64: the same choices on every platform). When none is
// runnable, the generic waits whose conditions now hold end; else time moves to the earliest
// deadline and the waits ending there become runnable. A spawned thread is runnable at once but
// runs only when chosen; its spawner keeps the token until it blocks. So one seed and one
// program give one interleaving (the same order of store operations, the same Trace()) however
// loaded the machine, and another seed another order of what happens at one simulated time.
//
// What ends a wait. A SimulatedStore write looks at the waits for the keys it wrote (and at the
// generic waits naming that store); its Interrupt at all that store's waits; Changed() at every
// wait. Generic waits (a Block without keys: a pause's cancellation, Finishes' future) are looked
// at again when a participant ends and before time moves. Whoever ends a wait makes its thread
// runnable under the simulation's lock, so time never moves past a wake-up; a woken thread runs
// later (others may run first) and waits again if its condition no longer holds. A wait checks
// its condition and registers under that same lock (no lost wake-up).
//
// What stalls it. A participant that holds the token and waits outside the simulation stops
// everyone, since nobody else may run: a real sleep, a future of a thread that is not a
// participant, a std::mutex held by a participant that is itself blocked in the simulation, a
// plain InMemoryStore's Wait, a loop polling a store without a simulated wait. Writes that bypass
// a SimulatedStore (another InMemoryStore connection to its keys) end nobody's wait.
//
// Bounds: when no participant got the token for `real_bound` of real time, a SimulationStuck
// naming the state and the participant holding the token fails the test's thread if it waits in
// the simulation, else every waiting participant (the simulation is broken then: those run
// without the token). More than kMaxSteps moves of the time, or every participant waiting without
// a deadline, fails every waiting participant with a SimulationStuck. Every thread that waits in
// the simulation must be a participant (checked).
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
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "store/in_memory_store.h"
#include "tests/unit/common/fake_clock.h"
#include "tests/unit/store/simulation_waits.h"

namespace ddprun::store::testing {

class SimulationStuck : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Simulation : public ddprun::testing::FakeClock {
 public:
  static constexpr std::chrono::seconds kRealBound{30};
  static constexpr std::int64_t kMaxSteps = 1'000'000;
  static constexpr std::uint64_t kDefaultSeed = 0x5eed;

  // The calling thread (the test's) takes part until the simulation ends, holding the token
  // first. `real_bound`: how long, in real time, the token may stay with one participant while
  // others wait for it. Without a seed, kDefaultSeed.
  explicit Simulation(std::chrono::milliseconds real_bound = kRealBound)
      : Simulation(kDefaultSeed, real_bound) {}
  explicit Simulation(std::uint64_t seed, std::chrono::milliseconds real_bound = kRealBound)
      : FakeClock(PauseMode::kAdvance), real_bound_(real_bound), choices_(seed) {
    std::lock_guard lock(mutex_);
    creator_ = AddLocked("test");
    creator_->state = State::kRunning;
    running_ = creator_;
    Current() = this;
    Self() = creator_;
  }

  // The test's thread leaves (its part is over, the token goes on); then every spawned thread
  // (also those spawned meanwhile) is waited for.
  ~Simulation() override {
    {
      std::lock_guard lock(mutex_);
      LeaveLocked(creator_);
      if (Current() == this) {
        Current() = nullptr;
        Self() = nullptr;
      }
    }
    for (;;) {
      std::vector<std::future<void>> threads;
      {
        std::lock_guard lock(mutex_);
        threads.swap(threads_);
      }
      if (threads.empty()) return;
      for (auto& thread : threads) thread.wait();
    }
  }

  Simulation(const Simulation&) = delete;
  Simulation& operator=(const Simulation&) = delete;

  // Runs `fn` on a participant thread of its own, runnable from now on; the future is ready
  // (value or exception) before the thread stops taking part. Any thread may spawn.
  template <typename Fn>
  auto Spawn(Fn fn) -> std::future<decltype(fn())> {
    return Spawn(std::string(), std::move(fn));
  }

  // The same, with a name for the diagnostics ("node 3"; default "participant <id>").
  template <typename Fn>
  auto Spawn(std::string name, Fn fn) -> std::future<decltype(fn())> {
    using T = decltype(fn());
    auto promise = std::make_shared<std::promise<T>>();
    std::future<T> result = promise->get_future();
    Participant* self = nullptr;
    {
      std::lock_guard lock(mutex_);
      self = AddLocked(std::move(name));  // runnable before the thread exists
      runnable_.push_back(self);
    }
    auto thread =
        std::async(std::launch::async, [this, self, promise, fn = std::move(fn)]() mutable {
          Current() = this;
          Self() = self;
          try {
            {
              std::unique_lock lock(mutex_);
              AwaitTurnLocked(lock, self, nullptr);
            }
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
          Self() = nullptr;
          std::lock_guard lock(mutex_);
          LeaveLocked(self);  // whoever waits on this thread's future runs before time moves
        });
    std::lock_guard lock(mutex_);
    threads_.push_back(std::move(thread));
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
    // A canceller is a running participant: by the time nobody is runnable, the cancellation is
    // seen (the generic waits are looked at again before time moves).
    Block(
        Deadline(duration), [&] { return cancellation.Cancelled(); }, nullptr);
    return !cancellation.Cancelled();
  }

  // Waits until `ready()` (true) or until simulated time reaches `deadline_ns` (false); the
  // token goes to another participant meanwhile. `ready` is evaluated under the simulation's
  // lock; `store` (may be null) is the store whose writes can make it true. A generic wait.
  bool Block(std::int64_t deadline_ns, const std::function<bool()>& ready, const void* store) {
    return Await(deadline_ns, ready, store, nullptr);
  }

  // The same for a condition only writes of `keys` to `store` (or its Interrupt) can make true:
  // only those writes look at it (Changed(store, key)).
  bool Block(std::int64_t deadline_ns, const std::function<bool()>& ready, const void* store,
             const std::vector<std::string>& keys) {
    return Await(deadline_ns, ready, store, &keys);
  }

  // Something changed: wakes every wait it made ready. Called by a running participant, so the
  // woken are runnable before the simulation can see everyone blocked.
  void Changed() {
    std::lock_guard lock(mutex_);
    WakeReadyLocked(waits_.All());
  }

  // `key` of `store` was written: wakes the waits for it that it made ready.
  void Changed(const void* store, const std::string& key) {
    std::lock_guard lock(mutex_);
    WakeReadyLocked(waits_.OfKey(store, key));
  }

  // `store` changed as a whole (interrupted): wakes its waits that it made ready.
  void Changed(const void* store) {
    std::lock_guard lock(mutex_);
    WakeReadyLocked(waits_.OfStore(store));
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

  // Moves of the time so far.
  std::int64_t Steps() {
    std::lock_guard lock(mutex_);
    return steps_;
  }

  // Hands of the token so far (to another participant or back to the same one).
  std::uint64_t Switches() {
    std::lock_guard lock(mutex_);
    return switches_;
  }

  // A hash of the interleaving so far: of (participant id, simulated time) at each hand of the
  // token. Two runs of one program with one seed have the same trace.
  std::uint64_t Trace() {
    std::lock_guard lock(mutex_);
    return trace_;
  }

 private:
  enum class State {
    kRunnable,  // may be chosen
    kRunning,   // holds the token
    kBlocked,   // in a wait, not yet ended
    kLoose,     // gave up waiting for the token (SimulationStuck): runs outside the schedule
    kGone,      // its part is over
  };
  struct Participant {
    int id;
    std::string name;
    std::condition_variable turn;  // notified when it gets the token
    State state = State::kRunnable;
  };

  static Simulation*& Current() {
    thread_local Simulation* current = nullptr;
    return current;
  }
  static Participant*& Self() {
    thread_local Participant* self = nullptr;
    return self;
  }

  std::int64_t ElapsedNs() const { return Elapsed().count(); }

  Participant* AddLocked(std::string name) {
    const int id = static_cast<int>(participants_.size());
    if (name.empty()) name = "participant " + std::to_string(id);
    auto participant = std::make_unique<Participant>();
    participant->id = id;
    participant->name = std::move(name);
    participants_.push_back(std::move(participant));
    ++live_;
    return participants_.back().get();
  }

  bool Await(std::int64_t deadline_ns, const std::function<bool()>& ready, const void* store,
             const std::vector<std::string>* keys) {
    std::unique_lock lock(mutex_);
    Participant* self = Self();
    if (Current() != this || self == nullptr) {
      throw std::logic_error("a thread that is not a participant waits in the simulation");
    }
    for (;;) {
      if (ready()) return true;
      if (ElapsedNs() >= deadline_ns) return false;
      SimWait wait{deadline_ns, &ready, store, keys, self->id};
      waits_.Add(&wait);
      // Not held only by a loose participant (which rejoins the schedule here).
      const bool pass = running_ == self || running_ == nullptr;
      self->state = State::kBlocked;
      ++blocked_;
      if (pass) PassLocked();
      AwaitTurnLocked(lock, self, &wait);
      if (wait.stuck) throw SimulationStuck(stuck_);
      // Woken (ready or at its deadline); it looks again, as others may have run meanwhile.
    }
  }

  // Waits until `self` holds the token. Throws SimulationStuck when nobody got the token for
  // real_bound_ of real time (and this thread is the one to report it), leaving `self` loose.
  void AwaitTurnLocked(std::unique_lock<std::mutex>& lock, Participant* self, SimWait* wait) {
    std::uint64_t seen = switches_;
    auto real_deadline = std::chrono::steady_clock::now() + real_bound_;
    while (running_ != self) {
      if (self->turn.wait_until(lock, real_deadline) == std::cv_status::no_timeout) continue;
      if (running_ == self) return;
      real_deadline = std::chrono::steady_clock::now() + real_bound_;
      if (switches_ != seen) {  // the simulation goes on: this thread just waits its turn
        seen = switches_;
        continue;
      }
      if (!ReportsStallLocked(self)) continue;
      const std::string state =
          StateLocked("a participant waited " + std::to_string(real_bound_.count()) +
                      " ms of real time without being woken");
      DetachLocked(self, wait);
      throw SimulationStuck(state);
    }
  }

  // The test's thread reports a stall when it waits in the simulation; else everyone does.
  bool ReportsStallLocked(const Participant* self) const {
    return self == creator_ ||
           (creator_->state != State::kBlocked && creator_->state != State::kRunnable);
  }

  // `self` stops waiting for the token (it runs loose).
  void DetachLocked(Participant* self, SimWait* wait) {
    if (self->state == State::kBlocked) {
      waits_.Remove(wait);
      --blocked_;
    } else if (self->state == State::kRunnable) {
      runnable_.erase(std::find(runnable_.begin(), runnable_.end(), self));
    }
    self->state = State::kLoose;
  }

  void LeaveLocked(Participant* self) {
    if (running_ == self) running_ = nullptr;
    self->state = State::kGone;  // it was running or loose
    --live_;
    WakeReadyLocked(waits_.Generic());  // a Finishes on its future; then the token goes on
  }

  // Makes the participant of `wait` runnable.
  void WakeLocked(SimWait* wait) {
    waits_.Remove(wait);
    wait->woken = true;
    Participant* who = participants_[wait->participant].get();
    --blocked_;
    who->state = State::kRunnable;
    runnable_.push_back(who);
  }

  // Wakes those of `waits` whose condition holds now; then, when nobody holds the token (a
  // write from outside the simulation, a participant that left), hands it on. True when it
  // woke any.
  bool WakeReadyLocked(const std::vector<SimWait*>& waits) {
    bool any = false;
    for (SimWait* wait : waits) {
      if ((*wait->ready)()) {
        WakeLocked(wait);
        any = true;
      }
    }
    if (running_ == nullptr) PassLocked();
    return any;
  }

  // The token holder gave it up (it blocks or left): choose the next, moving time when nobody
  // is runnable. Leaves nobody holding it only when nobody waits in the simulation.
  void PassLocked() {
    running_ = nullptr;
    for (;;) {
      if (!runnable_.empty()) {
        ChooseLocked();
        return;
      }
      if (waits_.Empty()) return;
      bool woke = false;
      for (SimWait* wait : waits_.Generic()) {
        if ((*wait->ready)()) {
          WakeLocked(wait);
          woke = true;
        }
      }
      if (!woke) StepLocked();
    }
  }

  void ChooseLocked() {
    const std::size_t chosen = choices_.Below(runnable_.size());
    Participant* next = runnable_[chosen];
    runnable_[chosen] = runnable_.back();
    runnable_.pop_back();
    next->state = State::kRunning;
    running_ = next;
    ++switches_;
    trace_ = SplitMix64::Mix(trace_ ^ SplitMix64::Mix(static_cast<std::uint64_t>(next->id)) ^
                             static_cast<std::uint64_t>(ElapsedNs()));
    next->turn.notify_one();
  }

  // Nobody is runnable and no generic wait ended: move the time to the earliest deadline and
  // wake the waits that end there; or, when time cannot move, fail every wait.
  void StepLocked() {
    const std::int64_t earliest = waits_.EarliestDeadline();
    if (earliest == SimWaits::kNever) {
      FailAllLocked("every participant waits without a deadline");
      return;
    }
    if (++steps_ > kMaxSteps) {
      FailAllLocked("more than " + std::to_string(kMaxSteps) + " time steps");
      return;
    }
    const std::int64_t now = ElapsedNs();
    if (earliest > now) Advance(std::chrono::nanoseconds(earliest - now));
    for (SimWait* wait : waits_.DueBy(earliest)) WakeLocked(wait);
  }

  void FailAllLocked(const std::string& what) {
    stuck_ = StateLocked(what);
    for (SimWait* wait : waits_.All()) {
      wait->stuck = true;
      WakeLocked(wait);
    }
  }

  std::string StateLocked(const std::string& what) const {
    std::string state = "simulation stuck: " + what + " (" + std::to_string(live_) +
                        " participants, " + std::to_string(blocked_) + " blocked, " +
                        std::to_string(runnable_.size()) + " runnable, at " +
                        std::to_string(ElapsedNs() / 1'000'000) + " ms of simulated time";
    if (running_ != nullptr) {
      state += "; participant " + std::to_string(running_->id) + " (" + running_->name +
               ") holds the token";
    }
    return state + ")";
  }

  const std::chrono::milliseconds real_bound_;
  std::mutex mutex_;
  SplitMix64 choices_;
  std::vector<std::unique_ptr<Participant>> participants_;  // by id
  Participant* creator_ = nullptr;
  Participant* running_ = nullptr;      // holds the token
  std::vector<Participant*> runnable_;  // in the order they became runnable (then swapped)
  SimWaits waits_;
  int live_ = 0;
  int blocked_ = 0;
  std::int64_t steps_ = 0;
  std::uint64_t switches_ = 0;
  std::uint64_t trace_ = 0;
  std::string stuck_;
  std::vector<std::future<void>> threads_;
};

// An in-memory store whose blocking calls are waits of `simulation` for their keys, and whose
// writes wake the waits for the keys they wrote (its Interrupt all its waits).
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
    const bool arrived = simulation_.Block(simulation_.Deadline(timeout), ready, this, keys);
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
    simulation_.Changed(this, key);
  }
  std::int64_t Add(const std::string& key, std::int64_t delta) override {
    const std::int64_t sum = InMemoryStore::Add(key, delta);
    simulation_.Changed(this, key);
    return sum;
  }
  Bytes CompareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override {
    Bytes now = InMemoryStore::CompareSet(key, expected, desired);
    simulation_.Changed(this, key);
    return now;
  }
  void MultiSet(const std::vector<std::string>& keys, const std::vector<Bytes>& values) override {
    InMemoryStore::MultiSet(keys, values);
    for (const std::string& key : keys) simulation_.Changed(this, key);
  }
  void Append(const std::string& key, const Bytes& value) override {
    InMemoryStore::Append(key, value);
    simulation_.Changed(this, key);
  }
  void Interrupt() override {
    InMemoryStore::Interrupt();
    simulation_.Changed(this);
  }

 private:
  Simulation& simulation_;
};

}  // namespace ddprun::store::testing
