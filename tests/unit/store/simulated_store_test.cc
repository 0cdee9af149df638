// The simulation of tests/unit/store/simulated_store.h: time moves only when every participant
// waits, to the earliest deadline; a write wakes its waiters before time can move on; a stuck
// simulation fails with a message instead of hanging.
#include "tests/unit/store/simulated_store.h"

#include <catch2/catch.hpp>
#include <future>

namespace {

using ddprun::store::StoreTimeout;
using ddprun::store::testing::SimulatedStore;
using ddprun::store::testing::Simulation;
using ddprun::store::testing::SimulationStuck;
using std::chrono::milliseconds;

milliseconds Ms(std::chrono::nanoseconds elapsed) {
  return std::chrono::duration_cast<milliseconds>(elapsed);
}

}  // namespace

TEST_CASE("a simulated wait ends at its deadline, the earliest first", "[simulated_store]") {
  Simulation sim;
  SimulatedStore store(sim);
  auto short_wait = sim.Spawn([&] {
    CHECK_THROWS_AS(store.Wait({"never"}, milliseconds{20}), StoreTimeout);
    return Ms(sim.Elapsed());
  });
  auto long_wait = sim.Spawn([&] {
    CHECK_THROWS_AS(store.Wait({"never"}, milliseconds{30}), StoreTimeout);
    return Ms(sim.Elapsed());
  });
  CHECK(sim.Ready(short_wait, milliseconds{1'000}) == milliseconds{20});
  CHECK(sim.Ready(long_wait, milliseconds{1'000}) == milliseconds{30});
  CHECK(Ms(sim.Elapsed()) == milliseconds{30});
}

TEST_CASE("a write wakes its waiter before simulated time moves on", "[simulated_store]") {
  Simulation sim;
  SimulatedStore store(sim);
  auto reader = sim.Spawn([&] {
    store.Wait({"key"}, milliseconds{1'000});
    return Ms(sim.Elapsed());
  });
  auto writer = sim.Spawn([&] {
    CHECK_THROWS_AS(store.Wait({"never"}, milliseconds{10}), StoreTimeout);
    store.SetString("key", "1");
    // Blocks at once again: the reader must run before time reaches this wait's end.
    CHECK_THROWS_AS(store.Wait({"never"}, milliseconds{500}), StoreTimeout);
  });
  CHECK(sim.Ready(reader, milliseconds{5'000}) == milliseconds{10});
  sim.Ready(writer, milliseconds{5'000});
  CHECK(Ms(sim.Elapsed()) == milliseconds{510});
}

TEST_CASE("the test's own wait on a spawned thread is bounded in simulated time",
          "[simulated_store]") {
  Simulation sim;
  SimulatedStore store(sim);
  auto never = sim.Spawn([&] { store.Wait({"never"}, milliseconds{60'000}); });
  CHECK_FALSE(sim.Finishes(never, milliseconds{300}));
  CHECK(Ms(sim.Elapsed()) == milliseconds{300});
  store.SetString("never", "now");
  CHECK(sim.Finishes(never, milliseconds{1}));
  CHECK(Ms(sim.Elapsed()) == milliseconds{300});  // it ran before time moved
}

TEST_CASE("a cancelled simulated pause ends without time moving", "[simulated_store]") {
  Simulation sim;
  ddprun::Cancellation cancellation;
  auto paused = sim.Spawn([&] { return sim.Pause(milliseconds{1'000}, cancellation); });
  cancellation.Cancel();
  CHECK_FALSE(sim.Ready(paused, milliseconds{5'000}));
  CHECK(Ms(sim.Elapsed()) == milliseconds{0});
  ddprun::Cancellation other;
  auto full = sim.Spawn([&] { return sim.Pause(milliseconds{250}, other); });
  CHECK(sim.Ready(full, milliseconds{5'000}));
  CHECK(Ms(sim.Elapsed()) == milliseconds{250});
}

TEST_CASE("a simulation stuck outside its waits fails instead of hanging", "[simulated_store]") {
  Simulation sim(milliseconds{200});
  std::promise<void> release;
  auto outside = sim.Spawn([future = release.get_future()]() mutable { future.wait(); });
  // The spawned thread is never blocked in the simulation, so time never moves.
  CHECK_THROWS_WITH(sim.Finishes(outside, milliseconds{10}),
                    Catch::Contains("simulation stuck: a participant waited 200 ms of real time "
                                    "without being woken (2 participants, 1 blocked"));
  release.set_value();
}

TEST_CASE("a thread outside the simulation may not wait on its store", "[simulated_store]") {
  Simulation sim;
  SimulatedStore store(sim);
  auto outsider = std::async(std::launch::async, [&] { store.Wait({"never"}, milliseconds{1}); });
  CHECK_THROWS_AS(outsider.get(), std::logic_error);
}
