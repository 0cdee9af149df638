// NodeRecord's JSON (rendezvous/dynamic_rendezvous.h): {"host", "addr", "pid", "nproc", "store",
// "at", "prev"}.
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "rendezvous/dynamic_rendezvous.h"
#include "rendezvous/dynamic_rendezvous_values.h"

namespace ddprun::rendezvous {
namespace {

using Json = nlohmann::json;

// `name`'s value read by `read`, or `fallback` when the record has no such field.
template <typename T, typename Read>
T FieldOr(const Json& json, const char* name, T fallback, Read read) {
  const auto it = json.find(name);
  return it == json.end() ? fallback : read(*it, name);
}

std::string Text(const Json& value, const char*) { return value.get<std::string>(); }
bool Flag(const Json& value, const char*) { return value.get<bool>(); }
int Int(const Json& value, const char* name) {
  return values::IntValue(value, std::string("\"") + name + "\"");
}
std::int64_t Int64(const Json& value, const char* name) {
  return values::IntValue<std::int64_t>(value, std::string("\"") + name + "\"");
}

NodeRecord FromJson(const Json& json) {
  if (!json.is_object()) throw std::invalid_argument("not a JSON object");
  NodeRecord record;
  NodeDescriptor& node = record.node;
  node.host = FieldOr(json, "host", std::string(), Text);
  node.addr = FieldOr(json, "addr", std::string(), Text);
  node.pid = FieldOr(json, "pid", 0, Int);
  node.local_world_size = FieldOr(json, "nproc", 1, Int);
  node.serves_store = FieldOr(json, "store", false, Flag);
  record.at_ms = FieldOr(json, "at", std::optional<std::int64_t>(), Int64);
  record.prev = FieldOr(json, "prev", std::optional<int>(), Int);
  return record;
}

}  // namespace

std::string NodeRecord::Encode() const {
  Json json{{"host", node.host},
            {"addr", node.addr},
            {"pid", node.pid},
            {"nproc", node.local_world_size},
            {"store", node.serves_store}};
  if (at_ms) json["at"] = *at_ms;
  if (prev) json["prev"] = *prev;
  return json.dump();
}

NodeRecord NodeRecord::Decode(const std::string& text) {
  try {
    return FromJson(Json::parse(text));
  } catch (const Json::exception& error) {
    throw std::invalid_argument(std::string("malformed node descriptor: ") + error.what());
  } catch (const std::invalid_argument& error) {  // FromJson's own checks
    throw std::invalid_argument(std::string("malformed node descriptor: ") + error.what());
  }
}

std::string RecordedHost(store::Store& store, const std::string& node_key) {
  if (!store.Check({node_key})) return "<unknown>";
  std::string host = NodeRecord::Decode(store.GetString(node_key)).node.host;
  return host.empty() ? "<unknown>" : host;
}

}  // namespace ddprun::rendezvous
