// Fuzz target: the rendezvous state a store holds, read back. The input is one stored value,
// given to every decoder: RoundChange::Decode (a decoded change must survive Encode + Decode),
// the `ddprun-store rdzv` decoders of tools/rdzv_view.h, and ReadMovedStoreMarker over an
// in-memory store holding the input as the marker. What decodes is then formatted as the view's
// table and JSON. std::invalid_argument is the documented rejection; anything else is a bug.
#include <cstdint>
#include <string>

#include "fuzz/fuzz_support.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "store/in_memory_store.h"
#include "tools/rdzv_view.h"

namespace {

using ddprun::fuzz::Require;
using namespace ddprun::rendezvous;
namespace store = ddprun::store;
using namespace ddprun::tools;

constexpr std::int64_t kNowMs = 1'700'000'000'000;  // a fixed wall clock for heartbeat ages

void CheckRoundChange(const std::string& text) {
  try {
    const RoundChange change = RoundChange::Decode(text);
    const RoundChange again = RoundChange::Decode(change.Encode());
    Require(again.kind == change.kind && again.group_rank == change.group_rank &&
                again.host == change.host && again.detail == change.detail,
            "a round change does not survive Encode + Decode");
  } catch (const std::invalid_argument&) {
  }
}

template <typename T, typename Fn>
std::optional<T> Decoded(const std::string& text, Fn decode) {
  try {
    return decode(text);
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

void ReadMarker(const std::string& text, RdzvView& view) {
  store::InMemoryStore store;
  const RendezvousKeys keys{"fuzz"};
  store.SetString(keys.MovedStore(), text);
  try {
    const MovedStoreMarker marker = ReadMovedStoreMarker(store, keys);
    view.store_epoch = marker.epoch;
    view.store_addr = marker.addr;
    view.store_basis = marker.basis;
  } catch (const std::invalid_argument&) {
  }
}

// A view with every field the input decodes to (ReadRdzvView's shapes, filled directly).
RdzvView ViewOf(const std::string& text) {
  RdzvView view{.run_id = "fuzz", .endpoint = "localhost:29400", .closed_reason = text};
  RdzvFormedRound formed{.round = 1, .master = text};
  if (auto sealed = Decoded<RdzvSealed>(text, ParseRdzvSealed)) {
    Require(sealed->nodes >= 0 && sealed->nodes <= (1 << 20), "sealed: node count not checked");
    formed.sealed = *sealed;
  }
  formed.change = Decoded<RdzvChange>(text, ParseRdzvChange);
  const auto node = Decoded<RdzvNode>(text, ParseRdzvNode);
  const auto number = Decoded<std::int64_t>(text, ParseRdzvInteger);
  formed.members.push_back({.group_rank = 0,
                            .node = node,
                            .heartbeats = number,
                            .heartbeat_at_ms = number,
                            .gone_by = text});
  view.formed = formed;
  if (number) {
    const SeqValue seq{*number};
    view.forming = RdzvFormingRound{.round = 2,
                                    .seq = seq.raw,
                                    .arrivals = seq.Arrivals(),
                                    .workers = seq.Workers(),
                                    .seals = seq.Seals(),
                                    .nodes = {{1, node}}};
  }
  ReadMarker(text, view);
  return view;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ddprun::fuzz::AsText(data, size);
  CheckRoundChange(text);
  const RdzvView view = ViewOf(text);
  (void)FormatRdzvTable(view, kNowMs);
  (void)FormatRdzvJson(view, kNowMs);
  return 0;
}
