// The static rendezvous's timeout message prints join_timeout to the millisecond (it printed the
// whole seconds only: 1.5 s as "1 s", 0.25 s as "0 s").
#include <catch2/catch.hpp>

#include "rendezvous/static_rendezvous.h"
#include "store/store.h"

using namespace std::chrono_literals;
using ddprun::rendezvous::RendezvousTimeoutError;
using ddprun::rendezvous::StaticRendezvous;
using ddprun::rendezvous::StaticRendezvousOptions;

TEST_CASE("static rendezvous: the timeout message prints join_timeout exactly",
          "[rendezvous][static]") {
  StaticRendezvousOptions options;
  options.node_rank = 1;
  options.num_nodes = 2;
  options.join_timeout = 250ms;
  StaticRendezvous node1(options,
                         [](std::chrono::milliseconds) -> std::shared_ptr<ddprun::store::Store> {
                           throw ddprun::store::StoreConnectionError("connect: Connection refused");
                         });
  try {
    node1.NextRendezvous();
    FAIL("no timeout");
  } catch (const RendezvousTimeoutError& error) {
    CHECK_THAT(error.what(), Catch::StartsWith("rendezvous timed out after 0.25 s: "));
  }
}
