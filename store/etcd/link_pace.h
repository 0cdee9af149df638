// How long one etcd request may wait for one member: the configured timeout, stretched to fit a
// slow link. etcd's linearizable requests take several round trips between members (a
// follower's ReadIndex goes to the leader, which confirms it with a heartbeat round; reads that
// arrive meanwhile wait for the round in flight), so over links with a 0.6 s round trip healthy
// members answer in 1-1.8 s. A fixed timeout near that fails over from members that would have
// answered, on every member in turn (chaos seed `e` 5, docs/reliability.md).
//
// LinkPace keeps the slowest of the last kWindow answers; the timeout is kStretch times that,
// never below the configured one nor above kMaxStretch times it. So a frozen member costs the
// configured timeout on a fast link, and at most kMaxStretch times it on a link already slow.
// Not thread-safe: the client's calls are serialized.
#pragma once
#include <array>
#include <chrono>
#include <cstddef>

namespace ddprun::store::etcd {

class LinkPace {
 public:
  static constexpr std::size_t kWindow = 8;
  static constexpr int kStretch = 3;
  static constexpr int kMaxStretch = 2;

  explicit LinkPace(std::chrono::milliseconds configured) : configured_(configured) {}

  // The timeout for the next request on one member.
  std::chrono::milliseconds Timeout() const;
  // A member answered a request after `took`.
  void Answered(std::chrono::milliseconds took);
  // A member did not answer within `waited`: the link is at least that slow, so the next
  // member gets longer (up to kMaxStretch times the configured timeout). The first request after
  // a link turned slow otherwise failed on every member in turn at the configured timeout,
  // before any slow answer had been seen (chaos seed e 5 in a fresh-clone rehearsal of cfb2dc5:
  // "no answer within 1.50 s" from all three members, 5.7 s into a 150+-40 ms delay).
  void TimedOut(std::chrono::milliseconds waited) { Answered(waited); }

 private:
  std::chrono::milliseconds configured_;
  std::array<std::chrono::milliseconds, kWindow> recent_{};  // a ring of the last answers
  std::size_t next_ = 0;
};

}  // namespace ddprun::store::etcd
