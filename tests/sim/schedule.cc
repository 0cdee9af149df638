#include "tests/sim/schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

namespace ddprun::sim {
namespace {

constexpr double kHeartbeat = 3.0;  // keep-alive 1 s x 3, as the chaos job's

// splitmix64: the same numbers on every platform (std's distributions are not).
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t Next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int Below(int n) { return static_cast<int>(Next() % static_cast<std::uint64_t>(n)); }
  double Uniform(double lo, double hi) {
    return lo + (hi - lo) * static_cast<double>(Next() >> 11) / 9007199254740992.0;
  }
  double Round1(double lo, double hi) { return std::round(Uniform(lo, hi) * 10) / 10; }
  bool Chance(double p) { return Uniform(0, 1) < p; }

 private:
  std::uint64_t state_;
};

// `count` distinct nodes of [first, last), none in `except`.
std::vector<int> Pick(Rng& rng, int count, int first, int last, const std::vector<int>& except) {
  std::vector<int> pool;
  for (int node = first; node < last; ++node) {
    if (std::find(except.begin(), except.end(), node) == except.end()) pool.push_back(node);
  }
  std::vector<int> picked;
  for (int i = 0; i < count && !pool.empty(); ++i) {
    const int at = rng.Below(static_cast<int>(pool.size()));
    picked.push_back(pool[at]);
    pool.erase(pool.begin() + at);
  }
  std::sort(picked.begin(), picked.end());
  return picked;
}

void Add(Plan& plan, double at, Action::Kind kind, std::vector<int> nodes, int fault = -1,
         bool in = false, bool out = false) {
  plan.actions.push_back({at, kind, std::move(nodes), in, out, fault});
}

// One episode starting at `at`; returns its heal time.
double Episode1(Plan& plan, Rng& rng, double at, int running) {
  static const char* const kKinds[] = {"kill-agent", "kill-agent", "pause",      "partition",
                                       "partition",  "oneway-in",  "oneway-out", "kill-worker"};
  const std::string kind = kKinds[rng.Below(8)];
  const int index = static_cast<int>(plan.episodes.size());
  const int tenth = std::max(1, running / 10);
  Episode episode{kind, {}, at, at, false};
  double hold = 0;
  const bool store_host = rng.Chance(0.3);
  if (kind == "kill-agent") {
    const int shape = rng.Below(3);  // one node, 10 % at once, the store host with others
    if (shape == 0) episode.hosts = Pick(rng, 1, 1, running, {});
    if (shape == 1) episode.hosts = Pick(rng, tenth, 1, running, {});
    if (shape == 2) {
      episode.hosts = Pick(rng, std::max(1, tenth / 2), 1, running, {});
      episode.hosts.insert(episode.hosts.begin(), 0);
    }
    hold = rng.Round1(1.0, 6.0);
    episode.returns = rng.Chance(0.6);
    Add(plan, at, Action::Kind::kKill, episode.hosts, index);
    if (episode.returns) Add(plan, at + hold, Action::Kind::kStart, episode.hosts, index);
  } else if (kind == "pause") {
    episode.hosts = store_host ? std::vector<int>{0} : Pick(rng, 1, 1, running, {});
    hold = rng.Chance(0.2) ? rng.Round1(0.3, kHeartbeat * 0.5)
                           : rng.Round1(kHeartbeat + 1, kHeartbeat + 6);
    Add(plan, at, Action::Kind::kPause, episode.hosts, index);
    Add(plan, at + hold, Action::Kind::kResume, episode.hosts, index);
  } else if (kind == "kill-worker") {
    episode.hosts = Pick(rng, 1, 0, running, {});
    hold = rng.Round1(1.0, 3.0);
    Add(plan, at, Action::Kind::kFailWorker, episode.hosts, index);
  } else {
    // The cut side: one node (the store host or another), or a minority of 10 % (with the
    // store host or without it); the store host first, as the checker reads hosts[0].
    const bool minority = kind == "partition" && rng.Chance(0.5);
    const int size = minority ? tenth : 1;
    episode.hosts = Pick(rng, store_host ? size - 1 : size, 1, running, {});
    if (store_host) episode.hosts.insert(episode.hosts.begin(), 0);
    hold = rng.Chance(0.2) ? rng.Round1(0.3, kHeartbeat * 0.5)
                           : rng.Round1(kHeartbeat + 2, kHeartbeat + 8);
    const bool in = kind != "oneway-out";
    const bool out = kind != "oneway-in";
    Add(plan, at, Action::Kind::kCut, episode.hosts, index, in, out);
    Add(plan, at + hold, Action::Kind::kHeal, episode.hosts, index);
  }
  episode.heal = at + hold;
  plan.episodes.push_back(episode);
  return at + hold;
}

// A slow network from `at` (its own stream `rng`): one node, the store host, or a tenth of
// them, each call late by `ms` each way for 5-15 s. Returns its heal time.
double SlowNetwork(Plan& plan, Rng& rng, double at, int running) {
  static const int kMs[] = {20, 50, 150};
  const int index = static_cast<int>(plan.episodes.size());
  Episode episode{"delay", {}, at, at, false, kMs[rng.Below(3)]};
  const int shape = rng.Below(3);
  if (shape == 0) episode.hosts = Pick(rng, 1, 1, running, {});
  if (shape == 1) episode.hosts = {0};
  if (shape == 2) episode.hosts = Pick(rng, std::max(1, running / 10), 0, running, {});
  const double hold = rng.Round1(5.0, 15.0);
  Action slow{at, Action::Kind::kDelay, episode.hosts, false, false, index, episode.ms};
  Action back{at + hold, Action::Kind::kDelay, episode.hosts, false, false, index, 0};
  plan.actions.push_back(slow);
  plan.actions.push_back(back);
  episode.heal = at + hold;
  plan.episodes.push_back(episode);
  return episode.heal;
}

// A graceful leave at `at` (its own stream `rng`): one node, or a tenth of them, not the store
// host, leave as on SIGTERM. Returns its "heal": one second later.
double GracefulLeave(Plan& plan, Rng& rng, double at, int running) {
  const int index = static_cast<int>(plan.episodes.size());
  Episode episode{"leave", {}, at, at + 1.0, false, 0};
  episode.hosts = Pick(rng, rng.Chance(0.7) ? 1 : std::max(1, running / 10), 1, running, {});
  plan.actions.push_back({at, Action::Kind::kLeave, episode.hosts, false, false, index, 0});
  plan.episodes.push_back(episode);
  return episode.heal;
}

}  // namespace

Plan MakePlan(int nodes, std::uint64_t seed, int index) {
  Rng rng(seed * 1'000'003ULL + static_cast<std::uint64_t>(index) * 7919ULL + 17);
  Plan plan;
  plan.nodes = nodes;
  const int spares = std::max(1, nodes / 16);
  plan.max_nodes = std::max(2, nodes - spares);
  plan.min_nodes = std::max(1, plan.max_nodes / 2);
  // A scale-up to MAX: most of MAX starts at once, the rest a few seconds later.
  const int late = index == 0 ? 0 : rng.Below(std::max(1, plan.max_nodes / 16) + 1);
  std::vector<int> first(plan.max_nodes - late);
  std::iota(first.begin(), first.end(), 0);
  Add(plan, 0, Action::Kind::kStart, first);
  if (late > 0) {
    std::vector<int> rest(late);
    std::iota(rest.begin(), rest.end(), plan.max_nodes - late);
    Add(plan, rng.Round1(4.0, 12.0), Action::Kind::kStart, rest);
  }
  double at = 25.0 + rng.Round1(0.0, 5.0);
  const int count = index == 0 ? 0 : 1 + rng.Below(2);
  std::vector<int> spare_ids(nodes - plan.max_nodes);
  std::iota(spare_ids.begin(), spare_ids.end(), plan.max_nodes);
  for (int i = 0; i < count; ++i) {
    const double heal = Episode1(plan, rng, at, plan.max_nodes);
    // Spares arrive while the next round seals: about one heartbeat timeout after the fault.
    if (!spare_ids.empty() && rng.Chance(0.5)) {
      const int take = 1 + rng.Below(static_cast<int>(spare_ids.size()));
      std::vector<int> batch(spare_ids.begin(), spare_ids.begin() + take);
      spare_ids.erase(spare_ids.begin(), spare_ids.begin() + take);
      Add(plan, at + kHeartbeat + rng.Round1(-0.5, 1.5), Action::Kind::kStart, batch);
    }
    at = heal + 30.0 + rng.Round1(0.0, 10.0);
  }
  Rng slow(seed * 2'000'029ULL + static_cast<std::uint64_t>(index) * 104'729ULL + 0x51ed);
  if (index != 0 && slow.Chance(0.35)) {
    at = SlowNetwork(plan, slow, at, plan.max_nodes) + 20.0 + slow.Round1(0.0, 5.0);
  }
  Rng leave(seed * 3'000'017ULL + static_cast<std::uint64_t>(index) * 7'927ULL + 0x1ea5);
  if (index != 0 && leave.Chance(0.3)) {
    at = GracefulLeave(plan, leave, at, plan.max_nodes) + 30.0 + leave.Round1(0.0, 5.0);
  }
  if (!spare_ids.empty() && index != 0)
    Add(plan, rng.Round1(5.0, 20.0), Action::Kind::kStart, spare_ids);
  plan.target_steps = static_cast<int>(at) + 10;
  std::stable_sort(plan.actions.begin(), plan.actions.end(),
                   [](const Action& a, const Action& b) { return a.at < b.at; });
  return plan;
}

std::string Plan::Describe() const {
  std::string text = std::to_string(nodes) + " nodes (" + std::to_string(min_nodes) + ":" +
                     std::to_string(max_nodes) + "), " + std::to_string(target_steps) + " steps";
  for (const Episode& e : episodes) {
    char line[160];
    std::snprintf(line, sizeof line, "; %s%s of %zu node(s) from %d%s at %.1f s for %.1f s",
                  e.kind.c_str(), e.ms > 0 ? (" " + std::to_string(e.ms) + " ms").c_str() : "",
                  e.hosts.size(), e.hosts.empty() ? -1 : e.hosts.front(),
                  e.returns ? " (they return)" : "", e.inject, e.heal - e.inject);
    text += line;
  }
  if (episodes.empty()) text += "; no fault";
  return text;
}

}  // namespace ddprun::sim
