#include "tools/rdzv_view.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "common/duration.h"
#include "common/integer.h"
#include "rendezvous/dynamic_rendezvous.h"
#include "store/store.h"

namespace ddprun::tools {
namespace {

using Json = nlohmann::ordered_json;  // output keys in the order written

// Rounds walked past the hint at most (a hint lags by one round at most; this only bounds a
// store that is not what it seems).
constexpr int kMaxRoundsAhead = 1000;
// The newest formed round is the hint's or the one before it (a round forms only once the one
// before it ended); a view looks this far back at most, so a corrupt hint cannot make it read
// a billion keys.
constexpr int kMaxRoundsBack = 1000;

Json ParseObject(const std::string& text, const char* what) {
  try {
    Json json = Json::parse(text);
    if (!json.is_object()) throw std::invalid_argument(std::string(what) + " is not a JSON object");
    return json;
  } catch (const Json::exception& error) {
    throw std::invalid_argument(std::string("malformed ") + what + ": " + error.what());
  }
}

// A JSON integer that T holds: get<T>() would convert anything else out of range (a float's
// conversion is undefined behaviour).
template <typename T>
bool IsIntegerIn(const Json& value) {
  if (value.is_number_unsigned()) return std::in_range<T>(value.get<std::uint64_t>());
  return value.is_number_integer() && std::in_range<T>(value.get<std::int64_t>());
}

template <typename T>
T Field(const Json& json, const char* name, const char* what) {
  try {
    const Json& value = json.at(name);
    if constexpr (std::is_integral_v<T>) {
      if (IsIntegerIn<T>(value)) return value.get<T>();
    } else {
      return value.get<T>();
    }
  } catch (const Json::exception&) {  // missing, or of another type
  }
  throw std::invalid_argument(std::string(what) + " has no valid \"" + name + "\"");
}

// CHECK and GET only: GET (WAIT + GET) on a key that exists returns at once.
class Reader {
 public:
  Reader(store::Store& store, const std::string& run_id) : store_(store), keys_{run_id} {}

  const RdzvKeys& Keys() const { return keys_; }
  bool Exists(const std::string& key) { return store_.Check({key}); }
  std::optional<std::string> Read(const std::string& key) {
    if (!Exists(key)) return std::nullopt;
    return store_.GetString(key);
  }

  // Decodes a value read from `key`, naming the key when it is malformed.
  template <typename Fn>
  auto Decode(const std::string& key, const std::string& text, Fn decode) {
    try {
      return decode(text);
    } catch (const std::invalid_argument& error) {
      throw std::runtime_error("key '" + key + "': " + error.what());
    }
  }
  template <typename Fn>
  auto ReadDecoded(const std::string& key, Fn decode)
      -> std::optional<decltype(decode(std::string()))> {
    const auto text = Read(key);
    if (!text) return std::nullopt;
    return Decode(key, *text, decode);
  }

 private:
  store::Store& store_;
  RdzvKeys keys_;
};

RdzvFormedRound ReadFormed(Reader& reader, int round, const RdzvSealed& sealed) {
  const RdzvKeys& keys = reader.Keys();
  RdzvFormedRound formed;
  formed.round = round;
  formed.sealed = sealed;
  formed.master = reader.Read(keys.Round(round, "master"));
  formed.change = reader.ReadDecoded(keys.Round(round, "change"), ParseRdzvChange);
  int ticket = 0;
  for (int rank = 0; rank < sealed.nodes; ++rank) {
    do {
      ++ticket;  // members in arrival order, less the nodes dropped while the round formed
    } while (std::find(sealed.dropped.begin(), sealed.dropped.end(), ticket) !=
             sealed.dropped.end());
    RdzvMember member;
    member.group_rank = rank;
    member.node = reader.ReadDecoded(keys.Node(round, ticket), ParseRdzvNode);
    member.heartbeats = reader.ReadDecoded(keys.Heartbeat(round, rank), ParseRdzvInteger);
    member.heartbeat_at_ms = reader.ReadDecoded(keys.HeartbeatAt(round, rank), ParseRdzvInteger);
    member.gone_by = reader.Read(keys.Gone(round, rank));
    formed.members.push_back(std::move(member));
  }
  return formed;
}

RdzvFormingRound ReadForming(Reader& reader, int round, std::int64_t seq) {
  const RdzvKeys& keys = reader.Keys();
  const rendezvous::SeqValue value{seq};
  RdzvFormingRound forming;
  forming.round = round;
  forming.seq = seq;
  forming.arrivals = value.Arrivals();
  forming.workers = value.Workers();
  forming.seals = value.Seals();
  forming.min_reached = reader.Exists(keys.Round(round, "min"));
  forming.settling_since_ms = reader.ReadDecoded(keys.Round(round, "settling"), ParseRdzvInteger);
  for (int ticket = 1; ticket <= forming.arrivals; ++ticket) {
    forming.nodes.push_back({ticket, reader.ReadDecoded(keys.Node(round, ticket), ParseRdzvNode)});
  }
  return forming;
}

// Nodes wait in the round after a formed one that has no change: the formed round is full (a
// node with room announces itself as waiting), so they are its hot spares.
bool HotSpares(const RdzvView& view) {
  return view.formed && !view.formed->change && view.forming && view.forming->seals == 0 &&
         view.forming->arrivals > 0;
}

std::string Text(const std::optional<std::string>& value) { return value ? *value : "-"; }

std::string Number(const std::optional<std::int64_t>& value) {
  return value ? std::to_string(*value) : "-";
}

// "2.5 s ago"; negative when `at_ms` is ahead of `now_ms` (another clock), clamped to int64 ms.
std::string AgeText(const std::optional<std::int64_t>& at_ms, std::int64_t now_ms) {
  if (!at_ms) return "-";
  using Limits = std::numeric_limits<std::int64_t>;
  std::int64_t age_ms = 0;
  if (__builtin_sub_overflow(now_ms, *at_ms, &age_ms))
    age_ms = *at_ms < 0 ? Limits::max() : Limits::min();
  return DurationText(std::chrono::milliseconds{age_ms}, 1) + " ago";
}

// Columns padded to their widest cell, two spaces apart, each line indented by two spaces.
std::string Table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = " ";
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += " " + row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 1, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::vector<std::string> NodeCells(const std::optional<RdzvNode>& node) {
  if (!node) return {"-", "-", "-", "-"};
  return {node->host, node->addr, std::to_string(node->pid), std::to_string(node->nproc)};
}

Json NodeJson(const std::optional<RdzvNode>& node) {
  if (!node) return {{"host", nullptr}, {"addr", nullptr}, {"pid", nullptr}, {"nproc", nullptr}};
  return {{"host", node->host}, {"addr", node->addr}, {"pid", node->pid}, {"nproc", node->nproc}};
}

template <typename T>
Json Nullable(const std::optional<T>& value) {
  return value ? Json(*value) : Json(nullptr);
}

std::string Plural(std::int64_t count, const char* noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

}  // namespace

std::int64_t ParseRdzvInteger(const std::string& text) {
  if (const auto value = ParseInt(text)) return *value;
  throw std::invalid_argument(NotAnInteger(text));
}

RdzvNode ParseRdzvNode(const std::string& text) {
  const rendezvous::NodeDescriptor node = rendezvous::NodeRecord::Decode(text).node;
  return {node.host, node.addr, node.pid, node.local_world_size};
}

RdzvChange ParseRdzvChange(const std::string& text) {
  const Json json = ParseObject(text, "round change");
  return {Field<std::string>(json, "kind", "round change"),
          Field<std::int64_t>(json, "group_rank", "round change"),
          Field<std::string>(json, "host", "round change"),
          Field<std::string>(json, "detail", "round change")};
}

RdzvSealed ParseRdzvSealed(const std::string& text) {
  const Json json = ParseObject(text, "sealed round");
  RdzvSealed sealed{Field<std::int64_t>(json, "nodes", "sealed round"),
                    Field<std::int64_t>(json, "world", "sealed round"),
                    Field<std::int64_t>(json, "restarts", "sealed round"),
                    {}};
  if (sealed.nodes < 0 || sealed.nodes > (1 << 20)) {
    throw std::invalid_argument("sealed round has " + std::to_string(sealed.nodes) + " nodes");
  }
  if (json.contains("dropped")) {
    for (const auto& entry : json.at("dropped")) {
      if (!entry.is_array() || entry.empty() || !IsIntegerIn<int>(entry.at(0))) {
        throw std::invalid_argument("sealed round: malformed dropped entry");
      }
      sealed.dropped.push_back(entry.at(0).get<int>());
    }
  }
  return sealed;
}

RdzvView ReadRdzvView(store::Store& store, const std::string& run_id, const std::string& endpoint) {
  Reader reader(store, run_id);
  const RdzvKeys& keys = reader.Keys();
  RdzvView view;
  view.run_id = run_id;
  view.endpoint = endpoint;
  view.closed = reader.Exists(keys.Closed());
  if (const auto reason = reader.Read(keys.Closed()); reason && *reason != "1") {
    view.closed_reason = *reason;
  }
  if (const auto marker = reader.Read(keys.MovedStore())) {
    const Json json = ParseObject(*marker, "moved store marker");
    view.store_epoch = Field<int>(json, "epoch", "moved store marker");
    view.store_addr = Field<std::string>(json, "addr", "moved store marker");
    view.store_basis = Field<int>(json, "basis", "moved store marker");
  }
  const auto hint = reader.ReadDecoded(keys.Hint(), ParseRdzvInteger);
  if (hint && (*hint < 0 || *hint > 1'000'000'000)) {
    throw std::runtime_error("key '" + keys.Hint() + "': no round " + std::to_string(*hint));
  }
  if (hint) view.round_hint = static_cast<int>(*hint);
  if (!hint && !reader.Exists(keys.Round(0, "seq"))) {
    throw std::runtime_error("no rendezvous '" + run_id + "' in the store at " + endpoint +
                             " (no key " + keys.Hint() + ")");
  }
  // The hint is written by a round's first arrival just after its ADD: it may lag one round.
  int newest = view.round_hint.value_or(0);
  for (int ahead = 0; ahead < kMaxRoundsAhead && reader.Exists(keys.Round(newest + 1, "seq"));
       ++ahead) {
    ++newest;
  }
  for (int round = newest; round >= 0 && round >= newest - kMaxRoundsBack; --round) {
    const std::string key = keys.Round(round, "sealed");
    if (const auto sealed = reader.ReadDecoded(key, ParseRdzvSealed)) {
      view.formed = ReadFormed(reader, round, *sealed);
      break;
    }
  }
  const int next = view.formed ? view.formed->round + 1 : 0;
  if (const auto seq = reader.ReadDecoded(keys.Round(next, "seq"), ParseRdzvInteger)) {
    view.forming = ReadForming(reader, next, *seq);
  }
  return view;
}

double HeartbeatAgeSeconds(std::int64_t at_ms, std::int64_t now_ms) {
  // In double: a stored heartbeat can be any int64, and now - at must not overflow.
  return (static_cast<double>(now_ms) - static_cast<double>(at_ms)) / 1000.0;
}

std::string FormatRdzvTable(const RdzvView& view, std::int64_t now_ms) {
  std::string out;
  out += "rendezvous " + view.run_id + " at " + view.endpoint + "\n";
  out += "  closed: " + std::string(view.closed ? "yes" : "no") +
         (view.closed_reason ? " (" + *view.closed_reason + ")" : "") + "\n";
  if (view.store_epoch) {
    out += "  store: epoch " + std::to_string(*view.store_epoch) + ", serving at " +
           *view.store_addr + ", took over after round " + std::to_string(*view.store_basis) + "\n";
  }
  out += "  newest round opened: " +
         (view.round_hint ? std::to_string(*view.round_hint) : std::string("-")) + "\n";
  if (const auto& formed = view.formed) {
    out += "\nround " + std::to_string(formed->round) + ": formed\n";
    out += "  nodes: " + std::to_string(formed->sealed.nodes) +
           "  world size: " + std::to_string(formed->sealed.world) +
           "  restart count: " + std::to_string(formed->sealed.restarts) +
           "  worker store: " + Text(formed->master) + "\n";
    if (const auto& change = formed->change) {
      out += "  change: " + change->kind;
      if (change->group_rank >= 0)
        out += " (group rank " + std::to_string(change->group_rank);
      else
        out += " (newcomer";
      out += ", host " + change->host + "): " + change->detail + "\n";
    } else {
      out += "  change: none\n";
    }
    std::vector<std::vector<std::string>> rows{
        {"RANK", "HOST", "ADDR", "PID", "NPROC", "HEARTBEATS", "LAST HEARTBEAT", "GONE"}};
    for (const auto& member : formed->members) {
      std::vector<std::string> row{std::to_string(member.group_rank)};
      for (auto& cell : NodeCells(member.node)) row.push_back(std::move(cell));
      row.push_back(Number(member.heartbeats));
      row.push_back(AgeText(member.heartbeat_at_ms, now_ms));
      row.push_back(member.gone_by ? "yes (by " + *member.gone_by + ")" : "no");
      rows.push_back(std::move(row));
    }
    out += Table(rows);
  } else {
    out += "\nno round formed yet\n";
  }
  if (const auto& forming = view.forming) {
    out += "\nround " + std::to_string(forming->round) + ": " +
           (forming->seals > 0 ? "sealing" : "forming") + ", " + Plural(forming->arrivals, "node") +
           " arrived (" + Plural(forming->workers, "worker") + ")" +
           (forming->min_reached && forming->seals == 0 ? ", minimum reached" : "") + "\n";
    if (HotSpares(view)) {
      out += "  hot spares: round " + std::to_string(view.formed->round) +
             " runs; they take the place of a member that is lost or leaves\n";
    }
    if (forming->seals > 0 && forming->settling_since_ms) {
      out += "  settling: closed by MAX " + AgeText(forming->settling_since_ms, now_ms) +
             "; its restart count waits for round " + std::to_string(forming->round - 1) +
             "'s members to be accounted for\n";
    }
    if (!forming->nodes.empty()) {
      std::vector<std::vector<std::string>> rows{{"TICKET", "HOST", "ADDR", "PID", "NPROC"}};
      for (const auto& arrival : forming->nodes) {
        std::vector<std::string> row{std::to_string(arrival.ticket)};
        for (auto& cell : NodeCells(arrival.node)) row.push_back(std::move(cell));
        rows.push_back(std::move(row));
      }
      out += Table(rows);
    }
  } else if (view.formed) {
    out += "\nround " + std::to_string(view.formed->round + 1) + ": no node waiting\n";
  }
  return out;
}

std::string FormatRdzvJson(const RdzvView& view, std::int64_t now_ms) {
  Json json{{"run_id", view.run_id},
            {"endpoint", view.endpoint},
            {"closed", view.closed},
            {"closed_reason", Nullable(view.closed_reason)},
            {"store_epoch", view.store_epoch.value_or(0)},
            {"store_addr", Nullable(view.store_addr)},
            {"store_basis", Nullable(view.store_basis)},
            {"round_hint", Nullable(view.round_hint)},
            {"formed", nullptr},
            {"forming", nullptr}};
  if (const auto& formed = view.formed) {
    Json members = Json::array();
    for (const auto& member : formed->members) {
      Json entry{{"group_rank", member.group_rank}};
      entry.update(NodeJson(member.node));
      entry["heartbeats"] = Nullable(member.heartbeats);
      entry["heartbeat_at_ms"] = Nullable(member.heartbeat_at_ms);
      entry["heartbeat_age_s"] = member.heartbeat_at_ms
                                     ? Json(HeartbeatAgeSeconds(*member.heartbeat_at_ms, now_ms))
                                     : Json(nullptr);
      entry["gone"] = member.gone_by.has_value();
      entry["gone_by"] = Nullable(member.gone_by);
      members.push_back(std::move(entry));
    }
    Json change = nullptr;
    if (formed->change) {
      change = {{"kind", formed->change->kind},
                {"group_rank", formed->change->group_rank},
                {"host", formed->change->host},
                {"detail", formed->change->detail}};
    }
    json["formed"] = {{"round", formed->round},
                      {"nodes", formed->sealed.nodes},
                      {"world_size", formed->sealed.world},
                      {"restart_count", formed->sealed.restarts},
                      {"dropped_tickets", formed->sealed.dropped},
                      {"master", Nullable(formed->master)},
                      {"change", change},
                      {"members", members}};
  }
  if (const auto& forming = view.forming) {
    Json nodes = Json::array();
    for (const auto& arrival : forming->nodes) {
      Json entry{{"ticket", arrival.ticket}, {"group_rank", arrival.ticket - 1}};
      entry.update(NodeJson(arrival.node));
      nodes.push_back(std::move(entry));
    }
    json["forming"] = {
        {"round", forming->round},
        {"seq", forming->seq},
        {"arrivals", forming->arrivals},
        {"workers", forming->workers},
        {"seals", forming->seals},
        {"min_reached", forming->min_reached},
        {"hot_spares", HotSpares(view)},
        {"settling_for", forming->settling_since_ms
                             ? Json(HeartbeatAgeSeconds(*forming->settling_since_ms, now_ms))
                             : Json(nullptr)},
        {"nodes", nodes}};
  }
  return json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace ddprun::tools
