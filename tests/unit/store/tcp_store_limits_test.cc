// Bounds and bad input: oversized or malformed frames close only their connection, a
// half-sent request blocks nobody, connection and output limits hold, and 1000 concurrent
// connections are served by one server.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <memory>
#include <vector>

#include "store_bytes.h"
#include "tcp_store_test_util.h"

namespace ddprun::store {
namespace {

using testing::B;
using testing::Concat;
using testing::RawConnection;
using testing::ServerThread;

Bytes V(Request request) { return EncodeRequest(Generation::kValidated, request); }

ServerOptions Limited(ServerLimits limits) {
  ServerOptions options;
  options.limits = limits;
  return options;
}

void AwaitConnections(ServerThread& server, std::size_t count) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (server.OnIo([](TcpStoreServer& s) { return s.NumConnections(); }) != count) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::yield();
  }
}

void RaiseFileLimit(rlim_t wanted) {
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  if (limit.rlim_cur >= wanted) return;
  limit.rlim_cur = std::min(limit.rlim_max, wanted);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
}

}  // namespace

TEST_CASE("oversized frames close only their connection", "[store][limits]") {
  ServerLimits limits;
  limits.max_key_bytes = 64;
  limits.max_value_bytes = 1024;
  ServerThread server(testing::Threads(GENERATE(1, 3), Limited(limits)));
  TcpStoreClient good(server.Client());
  good.Set("before", B("1"));

  RawConnection long_key(server.Port());
  long_key.Send(
      Concat({testing::Hello(), V({Command::kSet, {std::string(100, 'k')}, {B("v")}, 0, 0})}));
  CHECK(long_key.Closed());

  RawConnection big_value(server.Port());  // only the header of a 1 GiB value is ever sent
  Bytes header = Concat({testing::Hello(), B("\x01")});
  AppendString(header, "/k");
  AppendU64(header, std::uint64_t{1} << 30);
  big_value.Send(header);
  CHECK(big_value.Closed());

  RawConnection scanner(server.Port());
  scanner.Send(B("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  CHECK(scanner.Closed());

  CHECK(good.Get("before") == B("1"));
  good.Set("after", Bytes(1024, 'x'));
  CHECK(good.Get("after").size() == 1024);
  AwaitConnections(server, 1);
}

TEST_CASE("a half-sent request blocks no other client", "[store][limits]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection slow(server.Port());
  const Bytes set = V({Command::kSet, {"/slow"}, {Bytes(100000, 's')}, 0, 0});
  const std::size_t half = set.size() / 2;
  slow.Send(Concat({testing::Hello(), Bytes(set.begin(), set.begin() + static_cast<long>(half))}));
  TcpStoreClient other(server.Client());
  other.Set("k", B("v"));
  CHECK(other.Get("k") == B("v"));
  CHECK_FALSE(other.Check({"slow"}));
  slow.Send(Concat({Bytes(set.begin() + static_cast<long>(half), set.end()),
                    V({Command::kNumKeys, {}, {}, 0, 0})}));
  CHECK(slow.Read(8) == Bytes{2, 0, 0, 0, 0, 0, 0, 0});
  CHECK(other.Get("slow").size() == 100000);
}

TEST_CASE("connections over the limit are closed at once", "[store][limits]") {
  ServerLimits limits;
  limits.max_connections = 3;
  ServerThread server(testing::Threads(GENERATE(1, 3), Limited(limits)));
  std::vector<std::unique_ptr<RawConnection>> open;
  for (int i = 0; i < 3; ++i) open.push_back(std::make_unique<RawConnection>(server.Port()));
  AwaitConnections(server, 3);
  RawConnection extra(server.Port());
  CHECK(extra.Closed());
  open.pop_back();
  AwaitConnections(server, 2);
  TcpStoreClient(server.Client()).Set("ok", B("1"));
}

TEST_CASE("a client that never reads its replies is closed, not buffered", "[store][limits]") {
  ServerLimits limits;
  limits.max_output_bytes = 256 * 1024;
  ServerThread server(testing::Threads(GENERATE(1, 3), Limited(limits)));
  TcpStoreClient writer(server.Client());
  writer.Set("big", Bytes(64 * 1024, 'b'));
  RawConnection greedy(server.Port());
  Bytes requests = testing::Hello();
  const Bytes get = V({Command::kGet, {"/big"}, {}, 0, 0});
  for (int i = 0; i < 400; ++i) requests.insert(requests.end(), get.begin(), get.end());
  greedy.Send(requests);
  AwaitConnections(server, 1);  // only `writer` is left
  CHECK(writer.Get("big").size() == 64 * 1024);
}

TEST_CASE("1000 concurrent connections are served", "[store][limits]") {
  constexpr int kClients = 1000;
  RaiseFileLimit(2 * kClients + 256);
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  std::vector<std::unique_ptr<RawConnection>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(std::make_unique<RawConnection>(server.Port()));
    clients.back()->Send(Concat({testing::Hello(), V({Command::kWait, {"/go"}, {}, 0, 0})}));
  }
  server.AwaitWaiters(kClients, std::chrono::seconds(30));
  TcpStoreClient starter(server.Client());
  starter.Set("go", B("1"));
  const Bytes add = V({Command::kAdd, {"/n"}, {}, 1, 0});
  for (auto& client : clients) {
    REQUIRE(client->Read(1) == Bytes{0});  // STOP_WAITING
    client->Send(add);
  }
  for (auto& client : clients) client->Read(8);
  CHECK(starter.GetString("n") == std::to_string(kClients));
  CHECK(server.OnIo([](TcpStoreServer& s) { return s.NumConnections(); }) == kClients + 1);
}

}  // namespace ddprun::store
