// The decisions of a member watching its elastic round (the launcher's ElasticMonitor runs the
// thread and the store calls): what the round's change tells this member, and the change that
// declares its ring neighbour lost. Pure, but for MemberHost's store reads.
#pragma once
#include <string>

#include "rendezvous/dynamic_rendezvous.h"
#include "store/store.h"

namespace ddprun::rendezvous {

// What a member is told of its round's change (docs/elastic.md).
struct ChangeNotice {
  enum class Kind {
    kNone,              // nothing: this member's own failure or leaving
    kRemoteFailure,     // another member's workers failed; `text` is its failure record (JSON)
    kNodeLost,          // member `node` (-1: the store itself) is lost; `text` says why
    kMembershipChange,  // a node waits, a member left, or the job closed; `text` says why
  };
  Kind kind = Kind::kNone;
  int node = -1;
  std::string text;
};

// The notice of `change` for member `me` of the round.
ChangeNotice NoticeOf(const RoundChange& change, int me);

// The change that declares member `neighbour` (of host `host`) lost, `why` in one clause.
RoundChange NeighbourLost(int neighbour, const std::string& host, const std::string& why);

// The host member `group_rank` of `round` announced in its node record; "<unknown>" without one.
std::string MemberHost(store::Store& store, const RendezvousKeys& keys, int round, int group_rank);

}  // namespace ddprun::rendezvous
