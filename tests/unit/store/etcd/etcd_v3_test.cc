// etcd's v3 JSON gateway codec (store/etcd/etcd_v3.h) against replies captured from a real etcd
// 3.4.23 (Debian's etcd-server), and what it must refuse.
#include "store/etcd/etcd_v3.h"

#include <catch2/catch.hpp>

namespace ddprun::store::etcd {
namespace {

using nlohmann::json;

}  // namespace

TEST_CASE("base64 round-trips any bytes and refuses what is not base64", "[etcd]") {
  for (const std::string& bytes : {std::string(), std::string("f"), std::string("fo"),
                                   std::string("foo"), std::string("\0\xff\x80 z", 5)}) {
    CHECK(FromBase64(Base64(bytes)) == bytes);
  }
  CHECK(Base64("foo") == "Zm9v");
  CHECK(FromBase64("YmFy") == "bar");
  CHECK_THROWS_AS(FromBase64("Zm9"), EtcdProtocolError);
  CHECK_THROWS_AS(FromBase64("Zm9!"), EtcdProtocolError);
  CHECK_THROWS_AS(FromBase64("Zg=="
                             "Zm9v"),
                  EtcdProtocolError);  // padding inside
}

TEST_CASE("a prefix's range end is the next key after every key it starts", "[etcd]") {
  CHECK(PrefixEnd("ddprun/job/") == "ddprun/job0");
  CHECK(PrefixEnd(std::string("a\xff", 2)) == "b");
  CHECK(PrefixEnd(std::string("\xff\xff", 2)) == std::string(1, '\0'));
}

TEST_CASE("request bodies are what the gateway expects", "[etcd]") {
  CHECK(PutBody("foo", "bar") == json{{"key", "Zm9v"}, {"value", "YmFy"}});
  CHECK(PutBody("foo", "bar", 42)["lease"] == "42");
  CHECK(RangeBody("foo", "fop", true, 0) ==
        json{{"key", "Zm9v"}, {"range_end", "Zm9w"}, {"count_only", true}});
  const json txn = CompareAndPutBody("foo", 7, "baz");
  CHECK(txn["compare"][0] ==
        json{{"key", "Zm9v"}, {"result", "EQUAL"}, {"target", "MOD"}, {"mod_revision", "7"}});
  CHECK(txn["success"][0]["requestPut"] == PutBody("foo", "baz"));
  CHECK(txn["failure"][0]["requestRange"] == RangeBody("foo"));
  CHECK(WatchCreateBody("foo", "", 3) ==
        json{{"create_request", {{"key", "Zm9v"}, {"start_revision", "3"}}}});
  CHECK(LeaseGrantBody(5) == json{{"TTL", "5"}});
}

TEST_CASE("replies captured from etcd 3.4 decode", "[etcd]") {
  const auto range = ParseRange(json::parse(
      R"({"header":{"cluster_id":"4507982194580114026","member_id":"16322613195064898111",)"
      R"("revision":"2","raft_term":"2"},"kvs":[{"key":"Zm9v","create_revision":"2",)"
      R"("mod_revision":"2","version":"1","value":"YmFy"}],"count":"1"})"));
  CHECK(range.header.revision == 2);
  CHECK(range.header.member_id == 16322613195064898111ull);
  REQUIRE(range.kvs.size() == 1);
  CHECK(range.kvs[0] == KeyValue{"foo", "bar", 2, 2, 1, 0});
  CHECK(range.count == 1);

  CHECK(ParseRange(json::parse(R"({"header":{"revision":"9"}})")).kvs.empty());

  const auto lease = ParseLease(
      json::parse(R"({"header":{"revision":"2"},"ID":"2344020299549441285","TTL":"5"})"));
  CHECK(lease.id == 2344020299549441285);
  CHECK(lease.ttl == 5);
  const auto kept = ParseLease(json::parse(R"({"result":{"header":{},"ID":"7","TTL":"-1"}})"));
  CHECK(kept.ttl == -1);  // expired

  const auto txn =
      ParseTxn(json::parse(R"({"header":{"revision":"4"},"succeeded":true,)"
                           R"("responses":[{"response_put":{"header":{"revision":"4"}}}]})"));
  CHECK(txn.succeeded);
  CHECK(txn.read.empty());
  const auto failed = ParseTxn(
      json::parse(R"({"header":{"revision":"4"},"responses":[{"response_range":{"header":{},)"
                  R"("kvs":[{"key":"Zm9v","mod_revision":"4","value":"cXV4"}],"count":"1"}}]})"));
  CHECK_FALSE(failed.succeeded);
  REQUIRE(failed.read.size() == 1);
  CHECK(failed.read[0].value == "qux");

  const auto created =
      ParseWatch(json::parse(R"({"result":{"header":{"revision":"2"},"created":true}})"));
  CHECK(created.created);
  const auto events = ParseWatch(
      json::parse(R"({"result":{"header":{"revision":"3"},"events":[{"kv":{"key":"Zm9v",)"
                  R"("create_revision":"2","mod_revision":"3","version":"2","value":"YmF6"}},)"
                  R"({"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"4"}}]}})"));
  REQUIRE(events.events.size() == 2);
  CHECK(events.events[0].type == WatchEvent::Type::kPut);
  CHECK(events.events[0].kv.value == "baz");
  CHECK(events.events[1].type == WatchEvent::Type::kDelete);
  const auto compacted =
      ParseWatch(json::parse(R"({"result":{"header":{},"canceled":true,"compact_revision":"12",)"
                             R"("cancel_reason":"mvcc: required revision has been compacted"}})"));
  CHECK(compacted.canceled);
  CHECK(compacted.compact_revision == 12);
}

TEST_CASE("error replies and malformed replies are told apart", "[etcd]") {
  try {
    ParseLease(json::parse(R"({"error":"etcdserver: requested lease not found","code":5,)"
                           R"("message":"etcdserver: requested lease not found"})"));
    FAIL("no error thrown");
  } catch (const EtcdError& error) {
    CHECK(error.Code() == 5);
    CHECK_THAT(error.what(), Catch::Contains("requested lease not found"));
  }
  CHECK_THROWS_AS(ParseWatch(json::parse(R"({"error":{"code":14,"message":"unavailable"}})")),
                  EtcdError);
  for (const char* bad :
       {R"([1,2])", R"({"header":{"revision":"x"}})", R"({"kvs":[{"key":"!!!!"}]})",
        R"({"kvs":{"key":"Zm9v"}})", R"({"header":{"revision":1.5}})",
        R"({"count":"99999999999999999999"})"}) {
    INFO(bad);
    CHECK_THROWS_AS(ParseRange(json::parse(bad)), EtcdProtocolError);
  }
  CHECK_THROWS_AS(ParseWatch(json::parse(R"({"result":{"created":"yes"}})")), EtcdProtocolError);
  CHECK_THROWS_AS(ParseWatch(json::parse(R"({"result":{"events":[{"type":"X","kv":{}}]}})")),
                  EtcdProtocolError);
  CHECK_THROWS_AS(ParseTxn(json::parse(R"({"succeeded":"true"})")), EtcdProtocolError);
}

}  // namespace ddprun::store::etcd
