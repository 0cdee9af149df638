// The store server with several io threads: connections land on different threads, so a write
// on one releases waiters on others. Counters stay exact under concurrent clients, a release
// that races a client's CANCEL_WAIT never shifts its replies, and stopping the server ends
// every thread and frees every client. (The other server tests, watchers and barriers
// included, run with io_threads 1 and 3.)
#include <barrier>
#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "common/errors.h"
#include "store_bytes.h"
#include "tcp_store_test_util.h"

namespace ddprun::store {
namespace {

using namespace std::chrono_literals;
using testing::B;
using testing::Concat;
using testing::ServerThread;
using testing::Threads;

constexpr int kIoThreads = 4;

Bytes V(Request request) { return EncodeRequest(Generation::kValidated, request); }

// One client per thread slot: consecutive connections land on consecutive io threads.
std::vector<std::unique_ptr<TcpStoreClient>> Clients(
    ServerThread& server, int count, Generation generation = Generation::kValidated) {
  std::vector<std::unique_ptr<TcpStoreClient>> clients;
  for (int i = 0; i < count; ++i) {
    clients.push_back(std::make_unique<TcpStoreClient>(server.Client(generation)));
    clients.back()->NumKeys();  // connected now, in this order
  }
  return clients;
}

}  // namespace

TEST_CASE("threads: concurrent ADDs from every thread stay exact", "[store][threads]") {
  ServerThread server(Threads(kIoThreads));
  constexpr int kClients = 8;
  constexpr int kAdds = 300;
  auto clients = Clients(server, kClients);
  std::vector<std::future<void>> done;
  for (int c = 0; c < kClients; ++c) {
    done.push_back(std::async(std::launch::async, [&, c] {
      for (int i = 0; i < kAdds; ++i) clients[c]->Add("counter", 1);
      clients[c]->Set("done/" + std::to_string(c), B("1"));
    }));
  }
  TcpStoreClient observer(server.Client());
  std::vector<std::string> all_done;
  for (int c = 0; c < kClients; ++c) all_done.push_back("done/" + std::to_string(c));
  observer.Wait(all_done, 30s);  // released by writes on every thread
  for (auto& future : done) REQUIRE(future.wait_for(30s) == std::future_status::ready);
  CHECK(observer.Add("counter", 0) == kClients * kAdds);
}

TEST_CASE("threads: ping-pong between clients on different threads", "[store][threads]") {
  ServerThread server(Threads(kIoThreads));
  const auto generation = GENERATE(Generation::kValidated, Generation::kLegacy);
  auto clients = Clients(server, 2, generation);
  constexpr int kRounds = 200;
  auto ponger = std::async(std::launch::async, [&] {
    for (int i = 0; i < kRounds; ++i) {
      const auto ball = clients[1]->Get("ping/" + std::to_string(i));  // waits, then reads
      clients[1]->Set("pong/" + std::to_string(i), ball);
    }
  });
  for (int i = 0; i < kRounds; ++i) {
    clients[0]->Set("ping/" + std::to_string(i), B(std::to_string(i)));
    REQUIRE(clients[0]->Get("pong/" + std::to_string(i)) == B(std::to_string(i)));
  }
  REQUIRE(ponger.wait_for(30s) == std::future_status::ready);
  ponger.get();
}

TEST_CASE("threads: a release racing CANCEL_WAIT never shifts later replies", "[store][threads]") {
  ServerThread server(Threads(kIoThreads));
  testing::RawConnection waiter(server.Port());  // io thread 0
  waiter.Send(testing::Hello());
  TcpStoreClient writer(server.Client());  // io thread 1
  writer.NumKeys();
  constexpr int kRounds = 1000;
  std::barrier<> both(2);
  auto writes = std::async(std::launch::async, [&] {
    for (int i = 0; i < kRounds; ++i) {
      both.arrive_and_wait();
      writer.Set("race/" + std::to_string(i), B("x"));
    }
  });
  // A failed REQUIRE leaves the loop early: leave the barrier too, so the writer finishes alone.
  struct Leave {
    std::barrier<>& barrier;
    int rounds_left;
    ~Leave() {
      if (rounds_left > 0) barrier.arrive_and_drop();
    }
  } leave{both, kRounds};
  int released_first = 0;
  for (int i = 0; i < kRounds; ++i, --leave.rounds_left) {
    both.arrive_and_wait();
    // WAIT and CANCEL_WAIT in one segment while the other thread writes the key: the release
    // comes before the WAIT, between the two, or (handed across threads) after the cancel.
    waiter.Send(Concat({V({Command::kWait, {"/race/" + std::to_string(i)}, {}, 0, 0}),
                        V({Command::kCancelWait, {}, {}, 0, 0})}));
    Bytes reply = waiter.Read(1);
    if (reply == Bytes{0x00}) {  // STOP_WAITING first; WAIT_CANCELED must follow
      ++released_first;
      reply = waiter.Read(1);
    }
    REQUIRE(reply == Bytes{0x01});
    waiter.Send(V({Command::kAdd, {"/replies"}, {}, 1, 0}));
    Bytes expected;
    AppendI64(expected, i + 1);
    REQUIRE(waiter.Read(8) == expected);  // a late STOP_WAITING would show up here
  }
  REQUIRE(writes.wait_for(30s) == std::future_status::ready);
  writes.get();
  CHECK(server.WaiterRegistrations() == 0);
  INFO("STOP_WAITING before WAIT_CANCELED in " << released_first << " of " << kRounds);
  SUCCEED();
}

TEST_CASE("threads: stopping the server ends its threads and frees waiting clients",
          "[store][threads]") {
  auto server = std::make_unique<ServerThread>(Threads(kIoThreads));
  auto clients = Clients(*server, kIoThreads);
  std::vector<std::future<void>> waits;
  for (auto& client : clients) {
    waits.push_back(std::async(std::launch::async, [&client] { client->Wait({"never"}, 60s); }));
  }
  server->AwaitWaiters(kIoThreads);
  server.reset();  // joins every io thread
  for (auto& wait : waits) {
    REQUIRE(wait.wait_for(10s) == std::future_status::ready);
    CHECK_THROWS_AS(wait.get(), StoreConnectionError);
  }
}

}  // namespace ddprun::store
