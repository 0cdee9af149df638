// The node record under "r<k>/node/<ticket>": its key and its one codec.
#include <catch2/catch.hpp>
#include <stdexcept>

#include "rendezvous/dynamic_rendezvous.h"
#include "store/in_memory_store.h"

namespace {

using ddprun::rendezvous::NodeDescriptor;
using ddprun::rendezvous::NodeRecord;
using ddprun::rendezvous::RecordedHost;
using ddprun::rendezvous::RendezvousKeys;

NodeRecord Sample() {
  return {NodeDescriptor{"host1", "10.0.0.1", 4242, 8, true}, 1'700'000'000'123, 2};
}

}  // namespace

TEST_CASE("a node record's key is its round's node/<ticket>", "[node_record]") {
  CHECK(RendezvousKeys{"job"}.Node(3, 2) == "ddprun/rdzv/job/r3/node/2");
  CHECK(RendezvousKeys{"job"}.Node(3, 2) == RendezvousKeys{"job"}.Round(3, "node/2"));
}

TEST_CASE("a node record survives Encode + Decode", "[node_record]") {
  const NodeRecord record = NodeRecord::Decode(Sample().Encode());
  CHECK(record.node.host == "host1");
  CHECK(record.node.addr == "10.0.0.1");
  CHECK(record.node.pid == 4242);
  CHECK(record.node.local_world_size == 8);
  CHECK(record.node.serves_store);
  CHECK(record.at_ms == 1'700'000'000'123);
  CHECK(record.prev == 2);
}

TEST_CASE("a seeded node record has no arrival time and no previous rank", "[node_record]") {
  const NodeRecord seeded{Sample().node, std::nullopt, std::nullopt};
  CHECK(seeded.Encode() ==
        R"({"addr":"10.0.0.1","host":"host1","nproc":8,"pid":4242,"store":true})");
  const NodeRecord back = NodeRecord::Decode(seeded.Encode());
  CHECK_FALSE(back.at_ms);
  CHECK_FALSE(back.prev);
}

TEST_CASE("a node record's missing fields take their defaults", "[node_record]") {
  const NodeRecord record = NodeRecord::Decode(R"({"nproc":2,"at":0})");
  CHECK(record.node.host.empty());
  CHECK(record.node.addr.empty());
  CHECK(record.node.pid == 0);
  CHECK(record.node.local_world_size == 2);
  CHECK_FALSE(record.node.serves_store);
  CHECK(record.at_ms == 0);
  CHECK_FALSE(record.prev);
  CHECK(NodeRecord::Decode("{}").node.local_world_size == 1);
}

TEST_CASE("a malformed node record is std::invalid_argument naming the node descriptor",
          "[node_record]") {
  for (const char* text : {"{not json", "[1]", "7", R"({"host":3})", R"({"pid":"1"})",
                           R"({"pid":1e3})", R"({"nproc":4294967296})", R"({"store":1})",
                           R"({"at":1.5})", R"({"at":18446744073709551615})", R"({"prev":"x"})"}) {
    INFO(text);
    CHECK_THROWS_AS(NodeRecord::Decode(text), std::invalid_argument);
    CHECK_THROWS_WITH(NodeRecord::Decode(text), Catch::StartsWith("malformed node descriptor: "));
  }
}

TEST_CASE("RecordedHost: the host a node record names, else <unknown>", "[node_record]") {
  ddprun::store::InMemoryStore store;
  const RendezvousKeys keys{"job"};
  CHECK(RecordedHost(store, keys.Node(0, 1)) == "<unknown>");
  store.SetString(keys.Node(0, 1), Sample().Encode());
  CHECK(RecordedHost(store, keys.Node(0, 1)) == "host1");
  store.SetString(keys.Node(0, 2), R"({"nproc":2})");
  CHECK(RecordedHost(store, keys.Node(0, 2)) == "<unknown>");
}
