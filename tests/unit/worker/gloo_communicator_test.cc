// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
// The real gloo backend on loopback, one thread per rank, rendezvous via an in-memory store.
#ifdef DDPRUN_WORKER_TESTS
#include "worker/gloo_communicator.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "store/in_memory_store.h"
#include "store/prefix_store.h"
#include "worker/check_values.h"

namespace ddprun::worker {
namespace {

using std::chrono::milliseconds;

std::unique_ptr<GlooCommunicator> Connect(int rank, int size, std::shared_ptr<store::Store> store,
                                          milliseconds timeout) {
  GlooConfig config;
  config.rank = rank;
  config.size = size;
  config.address = "127.0.0.1";
  config.timeout = timeout;
  return std::make_unique<GlooCommunicator>(config, std::move(store));
}

// Allreduces the check pattern; returns the number of wrong elements.
template <typename T>
std::size_t AllreducePattern(Communicator& comm, std::size_t count) {
  auto values = PatternFor<T>(comm.Rank(), count);
  auto buffer = comm.Allocate(count * sizeof(T));
  buffer->Upload(values.data(), count * sizeof(T));
  comm.Allreduce(*buffer, count, DataTypeOf<T>());
  buffer->Download(values.data(), count * sizeof(T));
  auto mismatch = CheckPattern(values, comm.Size());
  return mismatch ? mismatch->wrong : 0;
}

std::size_t RunRank(int rank, int size, std::shared_ptr<store::Store> store) {
  auto comm = Connect(rank, size, store, milliseconds(20'000));
  std::size_t wrong = 0;
  for (std::size_t count : {1u, 1000u, 300'000u}) {
    wrong += AllreducePattern<float>(*comm, count);
    wrong += AllreducePattern<double>(*comm, count);
    wrong += AllreducePattern<std::int32_t>(*comm, count);
    wrong += AllreducePattern<std::int64_t>(*comm, count);
  }
  comm->Barrier();
  return wrong;
}

TEST_CASE("gloo allreduce sums every type exactly across 3 ranks", "[worker][gloo]") {
  auto store = std::make_shared<store::InMemoryStore>(milliseconds(20'000));
  std::vector<std::future<std::size_t>> ranks;
  for (int rank = 0; rank < 3; ++rank) {
    ranks.push_back(std::async(std::launch::async, RunRank, rank, 3, store));
  }
  for (auto& rank : ranks) CHECK(rank.get() == 0);
}

TEST_CASE("a single rank needs no peers", "[worker][gloo]") {
  auto store = std::make_shared<store::InMemoryStore>(milliseconds(5'000));
  CHECK(RunRank(0, 1, store) == 0);
}

TEST_CASE("a missing rank makes the rendezvous time out", "[worker][gloo]") {
  auto store = std::make_shared<store::InMemoryStore>(milliseconds(300));
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(Connect(0, 2, store, milliseconds(300)), CollectiveTimeout);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
}

}  // namespace
}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
