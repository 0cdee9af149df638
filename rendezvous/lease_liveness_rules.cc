#include "rendezvous/lease_liveness_rules.h"

#include <algorithm>

#include "common/duration.h"

namespace ddprun::rendezvous {

using std::chrono::milliseconds;

std::chrono::seconds LeaseTtl(milliseconds timeout) {
  return std::max(std::chrono::ceil<std::chrono::seconds>(timeout), std::chrono::seconds{2});
}

milliseconds LeaseRenewalPeriod(std::chrono::seconds ttl) {
  return std::max(std::chrono::duration_cast<milliseconds>(ttl) / 3, milliseconds{100});
}

Clock::TimePoint FirstRenewal(Clock::TimePoint start, milliseconds every, int member, int members) {
  return members > 0 ? start + every * member / members : start;
}

Clock::TimePoint NextRenewal(Clock::TimePoint previous, milliseconds every, Clock::TimePoint now) {
  return std::max(previous + every, now);
}

void LeaseRenewals::Renewed(Clock::TimePoint at) { renewed_ = std::max(renewed_, at); }

void LeaseRenewals::Expired(const std::string& why) {
  if (expired_.empty()) expired_ = why;
}

std::string LeaseRenewals::Lost(Clock::TimePoint now) const {
  if (!expired_.empty()) return expired_;
  const auto silent = now - renewed_;
  if (silent <= ttl_) return "";
  return "this node's etcd lease expired: no etcd member renewed it for " +
         DurationText(std::chrono::duration_cast<milliseconds>(silent), 1) +
         ", longer than its TTL (" + std::to_string(ttl_.count()) + " s)";
}

bool AliveKeyWatch::Observe(bool key_present, Clock::TimePoint now) {
  if (key_present) {
    seen_ = true;
    return false;
  }
  return seen_ || now - start_ >= timeout_;
}

std::string AliveKeyWatch::WhyGone(Clock::TimePoint now, std::chrono::seconds ttl) const {
  if (seen_) {
    return "its etcd lease (TTL " + std::to_string(ttl.count()) +
           " s) expired: it stopped keeping it alive";
  }
  return "it did not show itself alive in " +
         DurationText(std::chrono::duration_cast<milliseconds>(now - start_), 1);
}

}  // namespace ddprun::rendezvous
