// The in-memory store, the prefix decorator and the key space semantics they share with the
// TCP server (PyTorch's rules for compare_set, add, waiters and queues).
#include "store/in_memory_store.h"

#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <thread>

#include "store/prefix_store.h"
#include "store/tcp_store_server_keys.h"
#include "store_bytes.h"

namespace ddprun::store {
namespace {

using std::chrono::milliseconds;
using testing::B;

}  // namespace

TEST_CASE("in-memory store basic operations", "[store][memory]") {
  InMemoryStore store(milliseconds(2000));
  store.Set("k", B("v"));
  CHECK(store.Get("k") == B("v"));
  CHECK(store.Add("cnt", 5) == 5);  // missing key counts as 0
  CHECK(store.Add("cnt", -2) == 3);
  CHECK(store.GetString("cnt") == "3");
  CHECK(store.Check({"k", "cnt"}));
  CHECK_FALSE(store.Check({"k", "nope"}));
  CHECK(store.NumKeys() == 2);
  CHECK(store.DeleteKey("k"));
  CHECK_FALSE(store.DeleteKey("k"));
  CHECK(store.NumKeys() == 1);
  store.MultiSet({"a", "b"}, {B("1"), B("22")});
  CHECK(store.MultiGet({"a", "b"}) == std::vector<Bytes>{B("1"), B("22")});
  store.Append("a", B("x"));
  store.Append("new", B("y"));
  CHECK(store.Get("a") == B("1x"));
  CHECK(store.Get("new") == B("y"));
  store.Set("text", B("abc"));
  CHECK_THROWS_AS(store.Add("text", 1), KeySpaceError);
  CHECK(store.Get("text") == B("abc"));
}

TEST_CASE("compare_set follows PyTorch's rules", "[store][memory]") {
  InMemoryStore store(milliseconds(1000));
  CHECK(store.CompareSet("k", B("x"), B("y")) == B("x"));  // missing, expected set: "pretends"
  CHECK_FALSE(store.Check({"k"}));
  CHECK(store.CompareSet("k", B(""), B("first")) == B("first"));   // missing, expected empty
  CHECK(store.CompareSet("k", B("wrong"), B("z")) == B("first"));  // mismatch: current value
  CHECK(store.CompareSet("k", B("first"), B("second")) == B("second"));
  CHECK(store.Get("k") == B("second"));
}

TEST_CASE("in-memory Get and Wait block until a writer or the deadline", "[store][memory]") {
  InMemoryStore store(milliseconds(5000));
  CHECK_THROWS_AS(store.Wait({"late"}, milliseconds(50)), StoreTimeout);
  std::promise<void> waiting;
  auto reader = std::async(std::launch::async, [&] {
    waiting.set_value();
    return store.Get("late");
  });
  waiting.get_future().wait();
  store.Set("late", B("here"));
  REQUIRE(reader.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK(reader.get() == B("here"));
  auto multi = std::async(std::launch::async, [&] {
    store.Wait({"m1", "m2"}, milliseconds(5000));
  });
  store.Set("m1", B("1"));
  store.Add("m2", 1);
  REQUIRE(multi.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  multi.get();
}

TEST_CASE("Barrier releases every caller once all arrived", "[store][memory]") {
  auto store = std::make_shared<InMemoryStore>(milliseconds(5000));
  std::vector<std::future<void>> arrivals;
  for (int i = 0; i < 4; ++i) {
    arrivals.push_back(
        std::async(std::launch::async, [&] { store->Barrier("bar", 4, milliseconds(5000)); }));
  }
  for (auto& arrival : arrivals) {
    REQUIRE(arrival.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    arrival.get();
  }
}

TEST_CASE("PrefixStore maps keys to prefix/key", "[store][prefix]") {
  auto inner = std::make_shared<InMemoryStore>(milliseconds(1000));
  PrefixStore store("/worker/attempt_0", inner);
  store.Set("k", B("v"));
  CHECK(inner->Get("/worker/attempt_0/k") == B("v"));
  CHECK(store.Get("k") == B("v"));
  CHECK(store.Add("c", 2) == 2);
  CHECK(inner->GetString("/worker/attempt_0/c") == "2");
  CHECK(store.Check({"k", "c"}));
  CHECK_FALSE(store.Check({"other"}));
  CHECK(store.CompareSet("k", B("v"), B("w")) == B("w"));
  store.MultiSet({"a", "b"}, {B("1"), B("2")});
  CHECK(store.MultiGet({"a", "b"}) == std::vector<Bytes>{B("1"), B("2")});
  store.Append("a", B("+"));
  CHECK(inner->Get("/worker/attempt_0/a") == B("1+"));
  store.Wait({"a"}, milliseconds(100));
  CHECK_THROWS_AS(store.Wait({"nope"}, milliseconds(20)), StoreTimeout);
  CHECK(store.DeleteKey("a"));
  CHECK(store.NumKeys() == inner->NumKeys());
  PrefixStore nested("outer", std::make_shared<PrefixStore>("inner", inner));
  nested.Set("x", B("1"));
  CHECK(inner->Check({"inner/outer/x"}));
}

TEST_CASE("key space waiters fire once per key write and can be cancelled", "[store][keys]") {
  KeySpace keys;
  int fired = 0;
  CHECK(keys.Wait({}, [&] { ++fired; }) == KeySpace::kNoWaiter);
  const auto id = keys.Wait({"a", "b"}, [&] { ++fired; });
  REQUIRE(id != KeySpace::kNoWaiter);
  CHECK(keys.WaiterRegistrations() == 2);
  keys.Set("a", B("1"));
  CHECK(fired == 0);
  keys.Add("b", 1);
  CHECK(fired == 1);
  CHECK(keys.WaiterRegistrations() == 0);
  const auto cancelled = keys.Wait({"c"}, [&] { ++fired; });
  keys.CancelWait(cancelled);
  keys.CancelWait(cancelled);  // idempotent
  keys.Set("c", B("x"));
  CHECK(fired == 1);
  // Creating a key with compare_set wakes its waiters (PyTorch's legacy server does not).
  keys.Wait({"cas"}, [&] { ++fired; });
  keys.CompareSet("cas", B(""), B("v"));
  CHECK(fired == 2);
  keys.Wait({"ap"}, [&] { ++fired; });
  keys.Append("ap", B("v"));
  CHECK(fired == 3);
}

TEST_CASE("key space queues wake one waiter per push", "[store][keys]") {
  KeySpace keys;
  int first = 0;
  int second = 0;
  keys.Wait({"q"}, [&] { ++first; });
  keys.Wait({"q"}, [&] { ++second; });
  keys.QueuePush("q", B("1"));
  CHECK(first + second == 1);
  CHECK(keys.QueueLen("q") == 1);
  CHECK(keys.Check({"q"}));
  keys.QueuePush("q", B("2"));
  CHECK(first + second == 2);
  auto [length, item] = keys.QueuePop("q");
  CHECK(length == 2);
  CHECK(item == B("1"));
  CHECK(keys.QueuePop("q").first == 1);
  CHECK(keys.QueuePop("q").first == 0);
  CHECK_FALSE(keys.QueuePop("q").second.has_value());
  CHECK(keys.NumKeys() == 0);  // queues are not keys
}

TEST_CASE("key space limits refuse growth", "[store][keys]") {
  ServerLimits limits;
  limits.max_keys = 2;
  limits.max_stored_bytes = 64;
  limits.max_waiters = 1;
  KeySpace keys(limits);
  keys.Set("a", B("1"));
  keys.Set("b", B("2"));
  CHECK_THROWS_AS(keys.Set("c", B("3")), KeySpaceError);
  keys.Set("a", B("replaced"));  // replacing is not growth in keys
  CHECK_THROWS_AS(keys.Set("b", Bytes(100, 'x')), KeySpaceError);
  keys.Wait({"x"}, [] {});
  CHECK_THROWS_AS(keys.Wait({"y"}, [] {}), KeySpaceError);
}

TEST_CASE("key space barrier and watch", "[store][keys]") {
  KeySpace keys;
  int released = 0;
  CHECK(keys.Barrier("b", 3, [&] { ++released; }) != KeySpace::kNoWaiter);
  CHECK(keys.Barrier("b", 3, [&] { ++released; }) != KeySpace::kNoWaiter);
  CHECK(keys.Barrier("b", 3, [&] { ++released; }) == KeySpace::kNoWaiter);
  CHECK(released == 2);
  std::vector<WatchEvent> events;
  const auto watch = keys.Watch("w", [&](WatchEvent event, const std::string&, const Bytes&,
                                         const Bytes&) { events.push_back(event); });
  keys.Set("w", B("1"));
  keys.Set("w", B("2"));
  keys.DeleteKey("w");
  keys.Unwatch(watch);
  keys.Set("w", B("3"));
  CHECK(events ==
        std::vector<WatchEvent>{WatchEvent::kCreated, WatchEvent::kUpdated, WatchEvent::kDeleted});
}

}  // namespace ddprun::store
