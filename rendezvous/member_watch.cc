#include "rendezvous/member_watch.h"

namespace ddprun::rendezvous {

using Kind = RoundChange::Kind;

ChangeNotice NoticeOf(const RoundChange& change, int me) {
  switch (change.kind) {
    case Kind::kFailure:
      if (change.group_rank == me) return {};  // this agent's own announcement
      return {ChangeNotice::Kind::kRemoteFailure, change.group_rank, change.detail};
    case Kind::kNodeLost:
      return {ChangeNotice::Kind::kNodeLost, change.group_rank,
              "host " + change.host + ", " + change.detail};
    case Kind::kNodeWaiting:
    case Kind::kNodeLeaving:
    case Kind::kClosed: {
      // This agent's own leaving or rejoin (a newcomer's waiting names no group rank).
      if (change.group_rank == me && change.kind != Kind::kClosed) return {};
      std::string why = change.kind == Kind::kNodeLeaving
                            ? "node " + std::to_string(change.group_rank) + " (" + change.host +
                                  ") left: " + change.detail
                            : change.detail;
      return {ChangeNotice::Kind::kMembershipChange, change.group_rank, std::move(why)};
    }
  }
  return {};
}

RoundChange NeighbourLost(int neighbour, const std::string& host, const std::string& why) {
  return {Kind::kNodeLost, neighbour, host, why};
}

std::string MemberHost(store::Store& store, const RendezvousKeys& keys, int round, int group_rank) {
  return RecordedHost(store, keys.Node(round, group_rank + 1));
}

}  // namespace ddprun::rendezvous
