// The etcd v3 client (store/etcd/etcd_client.h) against a real etcd (Debian's etcd-server,
// installed by scripts/install-deps.sh) started by the test on loopback: calls, fail-over from
// a dead member, one line naming every bad endpoint, watches with deadlines and interruption.
#include "store/etcd/etcd_client.h"

#include <catch2/catch.hpp>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "common/asio.h"
#include "etcd_server.h"
#include "store/tcp_store_server.h"

namespace ddprun::store::etcd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::EtcdCluster;
using testing::EtcdServer;
using testing::FreePort;

}  // namespace

TEST_CASE("etcd client: put, range and compare-and-put on a real etcd", "[etcd][tcp]") {
  EtcdServer server;
  EtcdClient client({{server.Endpoint()}, 5s});
  const auto put = ParsePut(client.Call("/v3/kv/put", PutBody("ddprun/k", "v1")));
  CHECK(put.header.revision > 0);
  const auto range = ParseRange(client.Call("/v3/kv/range", RangeBody("ddprun/k")));
  REQUIRE(range.kvs.size() == 1);
  CHECK(range.kvs[0].value == "v1");
  const std::int64_t revision = range.kvs[0].mod_revision;

  const auto stale = ParseTxn(client.Call("/v3/kv/txn", CompareAndPutBody("ddprun/k", 1, "v2")));
  CHECK_FALSE(stale.succeeded);
  REQUIRE(stale.read.size() == 1);
  CHECK(stale.read[0].value == "v1");
  const auto swapped =
      ParseTxn(client.Call("/v3/kv/txn", CompareAndPutBody("ddprun/k", revision, "v2")));
  CHECK(swapped.succeeded);
  const auto absent = ParseTxn(client.Call("/v3/kv/txn", CompareAndPutBody("ddprun/new", 0, "x")));
  CHECK(absent.succeeded);  // mod_revision 0: created only if absent

  const auto lease = ParseLease(client.Call("/v3/lease/grant", LeaseGrantBody(30)));
  CHECK(lease.ttl == 30);
  CHECK(ParseLease(client.Call("/v3/lease/keepalive", LeaseKeepAliveBody(lease.id))).ttl > 0);
  CHECK(ParseLease(client.Call("/v3/lease/keepalive", LeaseKeepAliveBody(12345))).ttl <= 0);
  CHECK_THROWS_AS(ParseLease(client.Call("/v3/lease/revoke", LeaseRevokeBody(12345))),
                  EtcdError);  // no such lease: etcd's own error, not a failover
}

TEST_CASE("etcd client: a dead member is skipped, no member names each one's problem",
          "[etcd][tcp]") {
  EtcdServer server;
  const HostPort dead{"127.0.0.1", FreePort()};
  SECTION("fail-over to the live member") {
    EtcdClient client({{dead, server.Endpoint()}, 2s});
    ParsePut(client.Call("/v3/kv/put", PutBody("a", "b")));
    CHECK(client.Current().ToString() == server.Endpoint().ToString());
  }
  SECTION("nothing listening, and a c10d store, which is not etcd") {
    asio::io_context io;
    store::TcpStoreServer store(io, store::ServerOptions{});
    std::thread serving([&io] { io.run(); });
    const HostPort not_etcd{"127.0.0.1", store.Port()};
    EtcdClient client({{dead, not_etcd}, 1s});
    const auto start = Clock::now();
    try {
      client.Call("/v3/kv/range", RangeBody("a"));
      FAIL("no error");
    } catch (const EtcdUnavailable& error) {
      const std::string text = error.what();
      CHECK_THAT(text, Catch::Contains(dead.ToString() + ": Connection refused"));
      CHECK_THAT(text, Catch::Contains(not_etcd.ToString() + ": "));
      CHECK(text.find('\n') == std::string::npos);
    }
    CHECK(Clock::now() - start < 4s);  // within the timeout per member
    asio::post(io, [&store] { store.Stop(); });
    serving.join();
  }
}

TEST_CASE("etcd client: a frozen member costs one timeout before the next one answers",
          "[etcd][tcp]") {
  EtcdCluster cluster(3);
  EtcdClientOptions options = cluster.Options(2s);
  EtcdClient client(options);
  ParsePut(client.Call("/v3/kv/put", PutBody("a", "b")));  // member 0, kept alive
  ParsePut(client.Call("/v3/kv/put", PutBody("a", "c")));  // the same connection, reused
  REQUIRE(client.Current().port == options.endpoints[0].port);
  cluster.Stop(0);  // frozen: its socket still takes connections, nothing answers
  nlohmann::json local_read = RangeBody("a");
  local_read["serializable"] = true;  // answered by the next member even while it has no leader
  const auto start = Clock::now();
  ParseRange(client.Call("/v3/kv/range", local_read));
  const auto took = Clock::now() - start;
  cluster.Continue(0);
  CHECK(client.Current().port == options.endpoints[1].port);
  CHECK(took >= 2s);
  CHECK(took < 3500ms);  // not a second timeout on a new connection to the frozen member (4 s)
}

TEST_CASE("etcd client: patience retries the members, and Interrupt ends it at once",
          "[etcd][tcp]") {
  const HostPort dead{"127.0.0.1", FreePort()};
  EtcdClient client({{dead}, 1s, std::nullopt, 60s});
  auto call = std::async(std::launch::async,
                         [&client] { return client.Call("/v3/kv/range", RangeBody("a")); });
  // Refused at once, yet still trying: a leader election is waited out the same way.
  REQUIRE(call.wait_for(500ms) == std::future_status::timeout);
  client.Interrupt();
  REQUIRE(call.wait_for(2s) == std::future_status::ready);
  CHECK_THROWS_AS(call.get(), EtcdUnavailable);
}

TEST_CASE("etcd watch: events arrive, deadlines return, Interrupt ends a wait", "[etcd][tcp]") {
  EtcdServer server;
  const EtcdClientOptions options{{server.Endpoint()}, 5s};
  EtcdClient client(options);
  EtcdWatch watch(options, WatchCreateBody("ddprun/w", "", 0));
  const auto created = watch.Next(Clock::now() + 5s);
  REQUIRE(created);
  CHECK(created->created);

  const auto quiet_start = Clock::now();
  CHECK_FALSE(watch.Next(Clock::now() + 200ms));  // nothing changed
  CHECK(Clock::now() - quiet_start < 2s);

  ParsePut(client.Call("/v3/kv/put", PutBody("ddprun/w", "hello")));
  std::optional<WatchMessage> message;
  for (int i = 0; i < 10 && !(message && !message->events.empty()); ++i) {
    message = watch.Next(Clock::now() + 5s);
  }
  REQUIRE(message);
  REQUIRE(message->events.size() == 1);
  CHECK(message->events[0].kv.value == "hello");

  auto blocked =
      std::async(std::launch::async, [&watch] { return watch.Next(Clock::now() + 60s); });
  REQUIRE(blocked.wait_for(100ms) == std::future_status::timeout);
  watch.Interrupt();
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_AS(blocked.get(), EtcdUnavailable);
}

}  // namespace ddprun::store::etcd
