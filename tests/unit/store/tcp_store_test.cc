// TCP store server and client on loopback with real sockets and ephemeral ports: every
// operation in both protocol generations, waits with timeouts and cancel, raw PyTorch byte
// sequences, legacy watch events, queues, and the agent's direct key-space access.
#include <catch2/catch.hpp>
#include <future>

#include "common/errors.h"
#include "store_bytes.h"
#include "tcp_store_test_util.h"

namespace ddprun::store {
namespace {

using std::chrono::milliseconds;
using testing::B;
using testing::Concat;
using testing::Hex;
using testing::RawConnection;
using testing::ServerThread;

Bytes V(Request request) { return EncodeRequest(Generation::kValidated, request); }
Bytes L(Request request) { return EncodeRequest(Generation::kLegacy, request); }

}  // namespace

TEST_CASE("client and server: every Store operation", "[store][tcp]") {
  const auto generation = GENERATE(Generation::kValidated, Generation::kLegacy);
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient store(server.Client(generation));
  store.Set("k", B("v"));
  CHECK(store.Get("k") == B("v"));
  CHECK(store.Add("cnt", 7) == 7);
  CHECK(store.Add("cnt", -10) == -3);
  CHECK(store.GetString("cnt") == "-3");
  CHECK(store.Check({"k", "cnt"}));
  CHECK_FALSE(store.Check({"k", "missing"}));
  CHECK(store.NumKeys() == 2);
  CHECK(store.DeleteKey("k"));
  CHECK_FALSE(store.DeleteKey("k"));
  CHECK(store.NumKeys() == 1);
  CHECK(store.CompareSet("cas", B("x"), B("y")) == B("x"));
  CHECK(store.CompareSet("cas", B(""), B("a")) == B("a"));
  CHECK(store.CompareSet("cas", B("zzz"), B("b")) == B("a"));
  CHECK(store.CompareSet("cas", B("a"), B("b")) == B("b"));
  store.MultiSet({"m1", "m2"}, {B("1"), B("22")});
  CHECK(store.MultiGet({"m1", "m2"}) == std::vector<Bytes>{B("1"), B("22")});
  store.Append("m1", B("+"));
  store.Append("fresh", B("x"));
  CHECK(store.Get("m1") == B("1+"));
  CHECK(store.Get("fresh") == B("x"));
  store.Set("empty", Bytes{});
  CHECK(store.Get("empty").empty());
  // Keys carry TCPStore's "/" prefix on the wire.
  CHECK(server.WithKeys([](KeySpace& keys) { return keys.Find("/m1") != nullptr; }));
}

TEST_CASE("wait times out, then succeeds once the key is set", "[store][tcp]") {
  const auto generation = GENERATE(Generation::kValidated, Generation::kLegacy);
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient waiter(server.Client(generation));
  TcpStoreClient writer(server.Client());
  CHECK_THROWS_AS(waiter.Wait({"late"}, milliseconds(100)), StoreTimeout);
  server.AwaitWaiters(0);  // cancelled (validated) or dropped with its connection (legacy)
  writer.Set("late", B("1"));
  waiter.Wait({"late"}, milliseconds(5000));
  // No stray STOP_WAITING byte shifts later replies.
  CHECK(waiter.NumKeys() == 1);
  CHECK(waiter.Add("n", 1) == 1);
}

TEST_CASE("a blocked wait is released by another client's write", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient waiter(server.Client());
  TcpStoreClient writer(server.Client(Generation::kLegacy));
  auto pending = std::async(std::launch::async, [&] { return waiter.Get("key"); });
  server.AwaitWaiters(1);
  writer.Set("key", B("value"));
  REQUIRE(pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(pending.get() == B("value"));
}

TEST_CASE("CANCEL_WAIT is always answered and clears the registration", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection raw(server.Port());
  raw.Send(Concat({testing::Hello(), V({Command::kWait, {"/w"}, {}, 0, 0})}));
  server.AwaitWaiters(1);
  raw.Send(V({Command::kCancelWait, {}, {}, 0, 0}));
  CHECK(raw.Read(1) == Hex("01"));
  server.AwaitWaiters(0);
  raw.Send(V({Command::kCancelWait, {}, {}, 0, 0}));  // nothing pending: still answered
  CHECK(raw.Read(1) == Hex("01"));
  TcpStoreClient writer(server.Client());
  writer.Set("w", B("1"));
  REQUIRE(writer.NumKeys() == 1);  // SET has no reply; this one says it was executed
  raw.Send(V({Command::kNumKeys, {}, {}, 0, 0}));
  CHECK(raw.Read(8) == Hex("0100000000000000"));
}

TEST_CASE("raw PyTorch 2.x bytes get PyTorch's replies", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection raw(server.Port());
  raw.Send(Hex("00 cef7853c 0d d3700000"));
  CHECK(raw.Read(4) == Hex("d3700000"));
  raw.Send(Hex("04 0500000000000000 696e69742f 0100000000000000"));
  CHECK(raw.Read(8) == Hex("0100000000000000"));
  raw.Send(Concat({Hex("01 0300000000000000 2f6b31 0200000000000000 7631"),
                   Hex("06 0100000000000000 0300000000000000 2f6b31"),
                   Hex("03 0300000000000000 2f6b31")}));
  CHECK(raw.Read(1 + 8 + 2) == Hex("00 0200000000000000 7631"));
  raw.Send(Hex("05 0200000000000000 0400000000000000 2f636173 0500000000000000 2f6e6f7065"));
  CHECK(raw.Read(1) == Hex("01"));
  raw.Send(Hex("07"));
  CHECK(raw.Read(8) == Hex("0200000000000000"));
  raw.Send(Hex("08 0300000000000000 2f6b31"));
  CHECK(raw.Read(8) == Hex("0100000000000000"));
  raw.Send(Hex("03 0400000000000000 2f6e6f6e"));  // GET of a missing key: empty value
  CHECK(raw.Read(8) == Hex("0000000000000000"));
  raw.Send(V({Command::kListKeys, {}, {}, 0, 0}));
  CHECK(raw.Read(8 + 8 + 5) == Concat({Hex("0100000000000000 0500000000000000"), B("init/")}));
}

TEST_CASE("raw PyTorch 1.13 bytes get PyTorch's replies", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection raw(server.Port());
  raw.Send(Hex("03 0500000000000000 696e69742f 0100000000000000"));
  CHECK(raw.Read(8) == Hex("0100000000000000"));
  raw.Send(Hex("03 0400000000000000 2f636e74 feffffffffffffff"));
  CHECK(raw.Read(8) == Hex("feffffffffffffff"));
  raw.Send(Hex("01 0400000000000000 2f636173 0000000000000000 0300000000000000 6e6577"));
  CHECK(raw.Read(11) == Hex("0300000000000000 6e6577"));
  raw.Send(L({Command::kSet, {"/k"}, {B("v")}, 0, 0}));
  raw.Send(L({Command::kGet, {"/k"}, {}, 0, 0}));
  CHECK(raw.Read(9) == Concat({Hex("0100000000000000"), B("v")}));
  raw.Send(L({Command::kNumKeys, {}, {}, 0, 0}));
  CHECK(raw.Read(8) == Hex("0400000000000000"));  // init/, /cnt, /cas, /k
  RawConnection idle(server.Port());              // the idle "callback" connection of a 1.13 client
  raw.Send(L({Command::kDeleteKey, {"/k"}, {}, 0, 0}));
  CHECK(raw.Read(8) == Hex("0100000000000000"));
}

TEST_CASE("legacy WATCH_KEY pushes create, update and delete events", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection watcher(server.Port());
  watcher.Send(L({Command::kWatchKey, {"/w"}, {}, 0, 0}));
  CHECK(watcher.Read(1) == Hex("03"));
  TcpStoreClient store(server.Client());
  store.Set("w", B("1"));
  CHECK(watcher.Read(1 + 10 + 8 + 9) ==
        Hex("01 0200000000000000 2f77 0000000000000000 0100000000000000 31"));
  store.Set("w", B("22"));
  CHECK(watcher.Read(1 + 10 + 9 + 10) ==
        Hex("00 0200000000000000 2f77 0100000000000000 31 0200000000000000 3232"));
  store.DeleteKey("w");
  CHECK(watcher.Read(1 + 10 + 10 + 8) ==
        Hex("02 0200000000000000 2f77 0200000000000000 3232 0000000000000000"));
}

TEST_CASE("validated protocol: handshake violations close the connection", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection twice(server.Port());
  twice.Send(Hex("00 cef7853c"));
  twice.Send(V({Command::kValidate, {}, {}, 0, kValidationMagic}));
  CHECK(twice.Closed());
  RawConnection ping_first(server.Port());
  ping_first.Send(Hex("0d d3700000"));
  CHECK(ping_first.Closed());
  RawConnection wrong_magic(server.Port());
  wrong_magic.Send(Hex("00 cef7853d 0100000000000000"));  // a legacy SET with a huge key
  CHECK(wrong_magic.Closed());
  TcpStoreClient store(server.Client());
  CHECK(store.Ping(0x1234) == 0x1234);
  store.Set("still", B("works"));
  CHECK(store.Get("still") == B("works"));
}

TEST_CASE("queues: push, pop, length, and a blocking pop", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient store(server.Client());
  CHECK(store.QueueLen("q") == 0);
  CHECK_FALSE(store.QueuePop("q").has_value());
  store.QueuePush("q", B("a"));
  store.QueuePush("q", B("b"));
  CHECK(store.QueueLen("q") == 2);
  CHECK(store.QueuePop("q") == B("a"));
  CHECK(store.Check({"q"}));
  CHECK(store.QueuePop("q") == B("b"));
  CHECK_FALSE(store.Check({"q"}));
  CHECK(store.NumKeys() == 0);
  TcpStoreClient consumer(server.Client());
  auto popped = std::async(std::launch::async, [&] {
    consumer.Wait({"q"}, milliseconds(10000));
    return consumer.QueuePop("q");
  });
  server.AwaitWaiters(1);
  store.QueuePush("q", B("c"));
  REQUIRE(popped.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(popped.get() == B("c"));
}

TEST_CASE("BARRIER releases every arrival at world size", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection first(server.Port());
  RawConnection second(server.Port());
  first.Send(Concat({testing::Hello(), V({Command::kBarrier, {"/b"}, {}, 2, 0})}));
  server.AwaitWaiters(1);
  second.Send(Concat({testing::Hello(), V({Command::kBarrier, {"/b"}, {}, 2, 0})}));
  CHECK(second.Read(1) == Hex("00"));
  CHECK(first.Read(1) == Hex("00"));
}

TEST_CASE("the agent's writes on the io thread wake remote waiters", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient store(server.Client());
  auto pending = std::async(std::launch::async, [&] { return store.Get("agent"); });
  server.AwaitWaiters(1);
  server.OnIo([](TcpStoreServer& s) {
    s.WithKeys([](KeySpace& keys) { keys.Set("/agent", B("hi")); });
    return 0;
  });
  REQUIRE(pending.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(pending.get() == B("hi"));
}

TEST_CASE("ADD on a non-number closes only that connection, the client reconnects",
          "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient store(server.Client());
  store.Set("text", B("abc"));
  CHECK_THROWS_AS(store.Add("text", 1), StoreConnectionError);
  CHECK(store.Get("text") == B("abc"));
}

TEST_CASE("binding: ephemeral port, address in use, dual stack", "[store][tcp]") {
  ServerThread server;
  CHECK(server.Port() > 0);
  asio::io_context io;
  ServerOptions taken;
  taken.port = server.Port();
  try {
    TcpStoreServer second(io, taken);
    FAIL("the second bind succeeded");
  } catch (const SystemError& error) {
    CHECK(std::string(error.what()) ==
          "bind 127.0.0.1:" + std::to_string(server.Port()) + ": Address already in use");
  }
  ServerOptions any;
  any.host = "::";
  ServerThread dual(any);
  auto options = dual.Client();
  options.host = "127.0.0.1";
  TcpStoreClient v4(options);
  v4.Set("k", B("v"));
  options.host = "localhost";
  CHECK(TcpStoreClient(options).Get("k") == B("v"));
}

TEST_CASE("client connect retries until the server appears, or gives up", "[store][tcp]") {
  int port = 0;
  {
    ServerThread probe;
    port = probe.Port();
  }
  ClientOptions options;
  options.port = port;
  options.connect_timeout = milliseconds(300);
  CHECK_THROWS_AS(TcpStoreClient(options), StoreConnectionError);
  options.connect_timeout = std::chrono::seconds(20);
  auto client = std::async(std::launch::async, [&] { return TcpStoreClient(options).NumKeys(); });
  ServerOptions late;
  late.port = port;
  ServerThread server(late);
  REQUIRE(client.wait_for(std::chrono::seconds(30)) == std::future_status::ready);
  CHECK(client.get() == 0);
}

TEST_CASE("Load counts open connections and executed requests", "[store][tcp]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  const auto load = [&] { return server.OnIo([](TcpStoreServer& s) { return s.Load(); }); };
  CHECK(load().requests == 0);
  CHECK(load().connections == 0);
  TcpStoreClient store(server.Client());
  store.Set("k", B("v"));
  CHECK(store.Get("k") == B("v"));  // replied: every earlier request of this client executed
  const ServerLoad before = load();
  CHECK(before.connections == 1);
  CHECK(before.requests >= 2);
  CHECK(store.Add("n", 1) == 1);  // one request, one reply
  CHECK(store.Add("n", 1) == 2);
  CHECK(load().requests == before.requests + 2);
}

}  // namespace ddprun::store
