// The waits of a simulation (tests/unit/store/simulated_store.h), indexed by what can end them:
// their deadline, the store keys they wait for, the store they name. Every list comes in a
// fixed order (by deadline, then by when the wait began), never by address, so that the
// simulation wakes the same waits in the same order on every run. Not thread-safe: the
// simulation's lock guards it. Also SplitMix64, the simulation's small seeded generator.
#pragma once
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ddprun::store::testing {

// SplitMix64 (Steele, Lea, Flood 2014): the same numbers for the same seed on every platform
// and standard library, unlike std::uniform_int_distribution.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}

  std::uint64_t Next() { return Mix(state_ += 0x9e3779b97f4a7c15ULL); }
  // Uniform enough in [0, bound) for a test's choices; bound > 0.
  std::uint64_t Below(std::uint64_t bound) { return Next() % bound; }

  static std::uint64_t Mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

// One participant's wait. `keys` null: a generic wait, whose condition anything may change.
struct SimWait {
  std::int64_t deadline_ns;
  const std::function<bool()>* ready;
  const void* store;                     // the store whose writes can end it; may be null
  const std::vector<std::string>* keys;  // the keys of `store` it waits for; may be null
  int participant;                       // who waits
  std::uint64_t seq = 0;                 // when it began (set by SimWaits::Add)
  bool woken = false;
  bool stuck = false;  // woken because the simulation cannot go on
};

class SimWaits {
 public:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  void Add(SimWait* wait) {
    wait->seq = next_seq_++;
    by_deadline_.emplace(std::pair{wait->deadline_ns, wait->seq}, wait);
    if (wait->keys == nullptr) generic_.emplace(wait->seq, wait);
    if (wait->store == nullptr) return;
    Of& of = stores_[wait->store];
    of.all.emplace(wait->seq, wait);
    if (wait->keys == nullptr) {
      of.generic.emplace(wait->seq, wait);
      return;
    }
    for (const std::string& key : *wait->keys) of.by_key[key].emplace(wait->seq, wait);
  }

  void Remove(SimWait* wait) {
    by_deadline_.erase(std::pair{wait->deadline_ns, wait->seq});
    generic_.erase(wait->seq);
    if (wait->store == nullptr) return;
    auto of = stores_.find(wait->store);
    of->second.all.erase(wait->seq);
    of->second.generic.erase(wait->seq);
    if (wait->keys != nullptr) {
      for (const std::string& key : *wait->keys) {
        auto waiting = of->second.by_key.find(key);
        if (waiting == of->second.by_key.end()) continue;
        waiting->second.erase(wait->seq);
        if (waiting->second.empty()) of->second.by_key.erase(waiting);
      }
    }
    if (of->second.all.empty()) stores_.erase(of);  // a later store may reuse the address
  }

  bool Empty() const { return by_deadline_.empty(); }
  std::size_t Size() const { return by_deadline_.size(); }

  // The earliest deadline (kNever when every wait is unbounded); the waits are not empty.
  std::int64_t EarliestDeadline() const { return by_deadline_.begin()->first.first; }

  // The waits that end by `deadline_ns`.
  std::vector<SimWait*> DueBy(std::int64_t deadline_ns) const {
    std::vector<SimWait*> due;
    for (const auto& [at, wait] : by_deadline_) {
      if (at.first > deadline_ns) break;
      due.push_back(wait);
    }
    return due;
  }

  std::vector<SimWait*> All() const { return Values(by_deadline_); }
  std::vector<SimWait*> Generic() const { return Values(generic_); }

  // The waits a write of `key` to `store` may end: those for that key, and the generic ones
  // naming that store.
  std::vector<SimWait*> OfKey(const void* store, const std::string& key) const {
    auto of = stores_.find(store);
    if (of == stores_.end()) return {};
    std::vector<SimWait*> waits = Values(of->second.generic);
    auto waiting = of->second.by_key.find(key);
    if (waiting != of->second.by_key.end()) {
      for (const auto& [seq, wait] : waiting->second) waits.push_back(wait);
    }
    return waits;
  }

  // Every wait naming `store` (its Interrupt ends them all).
  std::vector<SimWait*> OfStore(const void* store) const {
    auto of = stores_.find(store);
    return of == stores_.end() ? std::vector<SimWait*>{} : Values(of->second.all);
  }

 private:
  using BySeq = std::map<std::uint64_t, SimWait*>;
  struct Of {
    BySeq all;
    BySeq generic;
    std::unordered_map<std::string, BySeq> by_key;  // looked up, never walked
  };

  template <typename Map>
  static std::vector<SimWait*> Values(const Map& map) {
    std::vector<SimWait*> values;
    values.reserve(map.size());
    for (const auto& [key, wait] : map) values.push_back(wait);
    return values;
  }

  std::uint64_t next_seq_ = 0;
  std::map<std::pair<std::int64_t, std::uint64_t>, SimWait*> by_deadline_;
  BySeq generic_;
  std::unordered_map<const void*, Of> stores_;  // looked up, never walked
};

}  // namespace ddprun::store::testing
