// TcpStoreServer::WhenClientsGone, which node 0's store uses before it closes: it waits for
// clients that are still talking, not for connections that went quiet (a lost peer's), and
// never past its deadline.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>

#include "tcp_store_test_util.h"

namespace ddprun::store {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::RawConnection;
using testing::ServerThread;

// Registers WhenClientsGone on the io thread; the future is ready once it has fired.
std::future<void> WhenGone(ServerThread& server, std::chrono::milliseconds quiet_for,
                           Clock::duration linger) {
  auto fired = std::make_shared<std::promise<void>>();
  auto future = fired->get_future();
  const auto deadline = Clock::now() + linger;
  server.OnIo([&](TcpStoreServer& s) {
    s.WhenClientsGone(quiet_for, deadline, [fired] { fired->set_value(); });
    return 0;
  });
  return future;
}

TEST_CASE("WhenClientsGone fires at once when no client is connected", "[store]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  CHECK(WhenGone(server, 60'000ms, 60s).wait_for(10s) == std::future_status::ready);
}

TEST_CASE("WhenClientsGone waits for a talking client until it disconnects", "[store]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  auto client = std::make_unique<TcpStoreClient>(server.Client());
  client->Set("k", Store::ToBytes("v"));
  CHECK(client->Get("k") == Store::ToBytes("v"));  // the server has seen its requests
  auto gone = WhenGone(server, 60'000ms, 60s);
  CHECK(gone.wait_for(200ms) == std::future_status::timeout);
  client.reset();
  CHECK(gone.wait_for(10s) == std::future_status::ready);
}

TEST_CASE("WhenClientsGone does not wait for a connection that went quiet", "[store]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  RawConnection silent(server.Port());  // like a peer behind a pulled cable: never closes
  silent.Send(EncodeRequest(Generation::kLegacy, {Command::kNumKeys, {}, {}, 0, 0}));
  silent.Read(8);  // one request answered: the connection was active just now
  auto gone = WhenGone(server, 2000ms, 60s);
  CHECK(gone.wait_for(200ms) == std::future_status::timeout);  // not quiet for 2 s yet
  CHECK(gone.wait_for(10s) == std::future_status::ready);      // then not waited for
}

TEST_CASE("WhenClientsGone gives up at its deadline", "[store]") {
  ServerThread server(testing::Threads(GENERATE(1, 3)));
  TcpStoreClient client(server.Client());
  client.Set("k", Store::ToBytes("v"));
  CHECK(client.Get("k") == Store::ToBytes("v"));
  const auto started = Clock::now();
  auto gone = WhenGone(server, 60'000ms, 300ms);
  REQUIRE(gone.wait_for(10s) == std::future_status::ready);
  CHECK(Clock::now() - started >= 300ms);
}

}  // namespace
}  // namespace ddprun::store
