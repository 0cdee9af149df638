// What a member watching its elastic round is told of the round's change, and the change that
// declares its neighbour lost (rendezvous/member_watch.h).
#include "rendezvous/member_watch.h"

#include <catch2/catch.hpp>

#include "store/in_memory_store.h"

using ddprun::rendezvous::ChangeNotice;
using ddprun::rendezvous::MemberHost;
using ddprun::rendezvous::NeighbourLost;
using ddprun::rendezvous::NoticeOf;
using ddprun::rendezvous::RendezvousKeys;
using ddprun::rendezvous::RoundChange;
using Kind = RoundChange::Kind;
using Notice = ChangeNotice::Kind;

TEST_CASE("another member's failure is told with its record but not this member's own",
          "[member_watch]") {
  const RoundChange failure{Kind::kFailure, 2, "host2", R"({"node_rank": 2})"};
  const ChangeNotice notice = NoticeOf(failure, 0);
  CHECK(notice.kind == Notice::kRemoteFailure);
  CHECK(notice.node == 2);
  CHECK(notice.text == R"({"node_rank": 2})");
  CHECK(NoticeOf(failure, 2).kind == Notice::kNone);
}

TEST_CASE("a lost member is told to every member with its host and why", "[member_watch]") {
  const RoundChange lost{Kind::kNodeLost, 1, "host1", "heartbeats stopped 4.5 s ago"};
  for (int me : {0, 1, 2}) {
    const ChangeNotice notice = NoticeOf(lost, me);
    CHECK(notice.kind == Notice::kNodeLost);
    CHECK(notice.node == 1);
    CHECK(notice.text == "host host1, heartbeats stopped 4.5 s ago");
  }
}

TEST_CASE("a node waiting or leaving and the job closing change the membership", "[member_watch]") {
  const ChangeNotice waiting =
      NoticeOf({Kind::kNodeWaiting, -1, "host5", "node host5 is waiting to join"}, 0);
  CHECK(waiting.kind == Notice::kMembershipChange);
  CHECK(waiting.text == "node host5 is waiting to join");
  const RoundChange leaving{Kind::kNodeLeaving, 1, "host1", "its agent received SIGTERM"};
  const ChangeNotice left = NoticeOf(leaving, 0);
  CHECK(left.kind == Notice::kMembershipChange);
  CHECK(left.text == "node 1 (host1) left: its agent received SIGTERM");
  CHECK(NoticeOf(leaving, 1).kind == Notice::kNone);  // the member that leaves
  const RoundChange closed{Kind::kClosed, -1, "host0", "the job has finished"};
  CHECK(NoticeOf(closed, 0).kind == Notice::kMembershipChange);
  CHECK(NoticeOf(closed, 0).text == "the job has finished");
}

TEST_CASE("a lost neighbour is declared as a lost node of its group rank and host",
          "[member_watch]") {
  const RoundChange change = NeighbourLost(3, "host3", "heartbeats stopped 15.0 s ago");
  CHECK(change.kind == Kind::kNodeLost);
  CHECK(change.group_rank == 3);
  CHECK(change.host == "host3");
  CHECK(change.detail == "heartbeats stopped 15.0 s ago");
}

TEST_CASE("a member's host comes from its node record and is unknown without one",
          "[member_watch]") {
  ddprun::store::InMemoryStore store;
  const RendezvousKeys keys{"job"};
  store.SetString(keys.Round(4, "node/2"), R"({"host": "host1", "pid": 7})");  // group rank 1
  CHECK(MemberHost(store, keys, 4, 1) == "host1");
  CHECK(MemberHost(store, keys, 4, 0) == "<unknown>");
  store.SetString(keys.Round(4, "node/3"), R"({"pid": 8})");
  CHECK(MemberHost(store, keys, 4, 2) == "<unknown>");
}
