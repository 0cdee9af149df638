// `ddprun-store rdzv`: a read-only view of a running c10d dynamic rendezvous (the key layout
// is documented in rendezvous/dynamic_rendezvous.h). ReadRdzvView gathers the newest formed
// round and the round forming after it through the Store seam with CHECK and GET only, so it
// never creates or changes a key (an ADD of 0 would create a missing counter). The rest is
// plain data, decoding and formatting: no store, no clock, no I/O.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/dynamic_rendezvous.h"

namespace ddprun::tools {

// Key names under "ddprun/rdzv/<run_id>/" (as DynamicRendezvous writes them).
using RdzvKeys = rendezvous::RendezvousKeys;  // the protocol's own key names

// `node/<ticket>`: the host, addr, pid and nproc of its rendezvous::NodeRecord.
struct RdzvNode {
  std::string host;
  std::string addr;
  std::int64_t pid = 0;
  std::int64_t nproc = 0;
};

// `change`: {kind, group_rank, host, detail}.
struct RdzvChange {
  std::string kind;
  std::int64_t group_rank = -1;
  std::string host;
  std::string detail;
};

// `sealed`: {nodes, world, restarts}.
struct RdzvSealed {
  std::int64_t nodes = 0;
  std::int64_t world = 0;
  std::int64_t restarts = 0;
  std::vector<int> dropped;  // tickets dropped as dead while the round formed
};

struct RdzvMember {
  int group_rank = 0;                           // ticket - 1 - dropped tickets before it
  std::optional<RdzvNode> node;                 // node/<ticket>
  std::optional<std::int64_t> heartbeats;       // hb/<r>
  std::optional<std::int64_t> heartbeat_at_ms;  // hb_at/<r>, epoch ms (wall clock)
  std::optional<std::string> gone_by;           // gone/<r>: "host:pid" of the declarer
};

struct RdzvFormedRound {
  int round = 0;
  RdzvSealed sealed;
  std::optional<std::string> master;  // the round's worker store, "host:port"
  std::optional<RdzvChange> change;
  std::vector<RdzvMember> members;
};

struct RdzvArrival {
  int ticket = 0;
  std::optional<RdzvNode> node;  // missing while the node is still writing it
};

struct RdzvFormingRound {
  int round = 0;
  std::int64_t seq = 0;  // raw packed counter (SeqValue)
  int arrivals = 0;
  int workers = 0;
  int seals = 0;  // > 0: sealed, `sealed` not yet published
  bool min_reached = false;
  // Closed by MAX and waiting for the formed round's members to be accounted for (`settling`,
  // epoch ms) before it settles its restart count.
  std::optional<std::int64_t> settling_since_ms;
  std::vector<RdzvArrival> nodes;
};

struct RdzvView {
  std::string run_id;
  std::string endpoint;
  bool closed = false;
  std::optional<std::string> closed_reason;  // why, when not a finished job (lost quorum)
  std::optional<int> round_hint;             // `round`: the newest round opened
  // Set in a store that took over from a lost one: its epoch, where it serves, the last round
  // formed in the lost store.
  std::optional<int> store_epoch;
  std::optional<std::string> store_addr;
  std::optional<int> store_basis;
  std::optional<RdzvFormedRound> formed;
  std::optional<RdzvFormingRound> forming;
};

// Decoders; each throws std::invalid_argument saying what is wrong with `text`.
std::int64_t ParseRdzvInteger(const std::string& text);
RdzvNode ParseRdzvNode(const std::string& text);  // NodeRecord::Decode: missing fields default
RdzvChange ParseRdzvChange(const std::string& text);
RdzvSealed ParseRdzvSealed(const std::string& text);

// Reads the view (CHECK and GET only). Throws std::runtime_error when the store holds no such
// rendezvous or a value is malformed (naming the key); store errors pass through.
RdzvView ReadRdzvView(store::Store& store, const std::string& run_id, const std::string& endpoint);

// Seconds since a heartbeat at `at_ms` (epoch ms) when it is `now_ms`.
double HeartbeatAgeSeconds(std::int64_t at_ms, std::int64_t now_ms);

// Human-readable tables, and one JSON object; heartbeat ages are taken against `now_ms`.
std::string FormatRdzvTable(const RdzvView& view, std::int64_t now_ms);
std::string FormatRdzvJson(const RdzvView& view, std::int64_t now_ms);

}  // namespace ddprun::tools
