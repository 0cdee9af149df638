// The server's input buffering: an idle connection reads into a small array of its own, and
// what does not fit it (a large request, a pipelined burst, a request split over many sends)
// continues in a heap buffer. Every size around the small array's must come through intact.
#include <catch2/catch.hpp>
#include <string>
#include <thread>

#include "store/store_protocol.h"
#include "tcp_store_test_util.h"

namespace ddprun::store {
namespace {

using testing::Concat;
using testing::Hello;
using testing::RawConnection;
using testing::ServerThread;
using testing::Threads;

Bytes Encode(Command command, std::vector<std::string> keys, std::vector<Bytes> values = {}) {
  return EncodeRequest(Generation::kValidated, {command, std::move(keys), std::move(values), 0, 0});
}

Bytes ValueOf(std::size_t size, char fill) { return Bytes(size, static_cast<std::uint8_t>(fill)); }

// A GET reply: u64 length + the value.
Bytes ReadValue(RawConnection& connection) {
  const Bytes length = connection.Read(8);
  return connection.Read(LoadU64(length.data()));
}

}  // namespace

TEST_CASE("requests around the small read size come through whole", "[store][tcp]") {
  ServerThread server;
  RawConnection connection(server.Port());
  connection.Send(Hello());
  // A SET frame is 1 + 8 + key + 8 + value bytes: sizes 40..300 cross the small read's size
  // (128) and its double either way.
  for (std::size_t size = 40; size <= 300; ++size) {
    const std::string key = "k" + std::to_string(size);
    const Bytes value = ValueOf(size - 1 - 8 - key.size() - 8, 'a' + size % 26);
    connection.Send(Concat({Encode(Command::kSet, {key}, {value}), Encode(Command::kGet, {key})}));
    REQUIRE(ReadValue(connection) == value);
  }
}

TEST_CASE("a pipelined burst and a large value are parsed across reads", "[store][tcp]") {
  const int threads = GENERATE(1, 2);
  ServerThread server(Threads(threads));
  RawConnection connection(server.Port());
  connection.Send(Hello());
  Bytes burst;
  for (int i = 0; i < 500; ++i) {
    const std::string key = "burst/" + std::to_string(i);
    burst = Concat(
        {burst, Encode(Command::kSet, {key}, {ValueOf(40, 'b')}), Encode(Command::kGet, {key})});
  }
  connection.Send(burst);
  for (int i = 0; i < 500; ++i) REQUIRE(ReadValue(connection) == ValueOf(40, 'b'));

  const Bytes large = ValueOf(3u << 20, 'L');
  connection.Send(
      Concat({Encode(Command::kSet, {"large"}, {large}), Encode(Command::kGet, {"large"})}));
  REQUIRE(ReadValue(connection) == large);
  connection.Send(Encode(Command::kGet, {"burst/7"}));  // and back to small requests
  REQUIRE(ReadValue(connection) == ValueOf(40, 'b'));
}

TEST_CASE("a request sent a byte at a time is parsed once complete", "[store][tcp]") {
  ServerThread server;
  RawConnection connection(server.Port());
  const Bytes request = Concat({Hello(), Encode(Command::kSet, {"slow"}, {ValueOf(300, 's')}),
                                Encode(Command::kGet, {"slow"})});
  for (const std::uint8_t byte : request) {
    connection.Send(Bytes{byte});
    std::this_thread::yield();
  }
  REQUIRE(ReadValue(connection) == ValueOf(300, 's'));
}

}  // namespace ddprun::store
