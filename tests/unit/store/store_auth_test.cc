// The authenticated store (store_auth.h): the pure server handshake, then a real server and
// client on loopback: the same token gets through, no token, another token, and a token
// offered to a store without one are refused at once with a line naming the problem; raw
// unauthenticated bytes never reach the key space; a silent client is dropped at the deadline;
// each refused connection is logged once, however many bytes it sends.
#include "store/store_auth.h"

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <sstream>
#include <string>

#include "tcp_store_test_util.h"

namespace ddprun::store {
namespace {

using testing::RawConnection;
using testing::ServerThread;
using Clock = std::chrono::steady_clock;
using Status = ServerHandshake::Status;

std::shared_ptr<const AuthKey> Key(const std::string& secret) {
  return std::make_shared<const AuthKey>(secret);
}

const std::string kToken = "0123456789abcdef-the-job-token";

ServerOptions WithToken(std::shared_ptr<const AuthKey> key) {
  ServerOptions options;
  options.auth = std::move(key);
  return options;
}

ClientOptions ClientWith(const ServerThread& server, std::shared_ptr<const AuthKey> key) {
  ClientOptions options = server.Client();
  options.auth = std::move(key);
  return options;
}

// The client's side of a handshake over a raw connection, up to the challenge.
Challenge ReadChallenge(RawConnection& connection, const Nonce& mine) {
  connection.Send(EncodeHello(mine));
  const Bytes bytes = connection.Read(kChallengeBytes);
  const auto challenge =
      ParseChallenge(std::span<const std::uint8_t, kChallengeBytes>(bytes.data(), kChallengeBytes));
  REQUIRE(challenge);
  return *challenge;
}

std::size_t NumKeys(ServerThread& server) {
  return server.WithKeys([](KeySpace& keys) { return keys.ListKeys().size(); });
}

// Sends the default logger's lines to a string while alive.
class CapturedLog {
 public:
  CapturedLog() : previous_(spdlog::default_logger()) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(out_);
    spdlog::set_default_logger(std::make_shared<spdlog::logger>("captured", sink));
  }
  ~CapturedLog() { spdlog::set_default_logger(previous_); }
  std::size_t Count(const std::string& text) {
    spdlog::default_logger()->flush();
    const std::string all = out_.str();
    std::size_t count = 0;
    for (auto at = all.find(text); at != std::string::npos; at = all.find(text, at + 1)) ++count;
    return count;
  }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::logger> previous_;
};

// Reads what the server sent (a marker) until it closed; false when it kept it open past the
// connection's receive timeout.
bool ClosedAfterReading(RawConnection& connection) {
  for (int i = 0; i < 64; ++i) {
    std::uint8_t byte = 0;
    const ssize_t r = ::recv(connection.Fd(), &byte, 1, 0);
    if (r == 0 || (r < 0 && errno == ECONNRESET)) return true;
    if (r < 0) return false;
  }
  return false;
}

}  // namespace

TEST_CASE("the server handshake accepts the token's proof and nothing else", "[store][auth]") {
  const auto key = Key(kToken);
  const Nonce server_nonce = RandomNonce();
  const Nonce client_nonce = RandomNonce();
  ServerHandshake handshake(key, server_nonce);
  const Bytes hello = EncodeHello(client_nonce);

  // Byte by byte, the hello waits for all of it.
  const auto partial = handshake.Feed(std::span(hello).first(5));
  CHECK(partial.status == Status::kNeedMore);
  CHECK(partial.need == kHelloBytes);

  const auto answered = handshake.Feed(hello);
  REQUIRE(answered.status == Status::kAnswered);
  CHECK(answered.consumed == kHelloBytes);
  const auto challenge = ParseChallenge(
      std::span<const std::uint8_t, kChallengeBytes>(answered.reply.data(), kChallengeBytes));
  REQUIRE(challenge);
  CHECK(challenge->server == server_nonce);
  CHECK(SameProof(key->Prove(kServerRole, client_nonce, server_nonce), challenge->proof));

  SECTION("the client's proof") {
    const Proof proof = key->Prove(kClientRole, client_nonce, server_nonce);
    const auto accepted = handshake.Feed(proof);
    CHECK(accepted.status == Status::kAccepted);
    CHECK(accepted.reply == Bytes{kAccepted});
    CHECK(accepted.consumed == kProofBytes);
  }
  SECTION("another token's proof") {
    const Proof proof =
        Key("another-token-of-16+bytes")->Prove(kClientRole, client_nonce, server_nonce);
    const auto refused = handshake.Feed(proof);
    CHECK(refused.status == Status::kRefused);
    CHECK(refused.reply == Bytes{kRefused});
    CHECK_THAT(refused.refusal, Catch::Contains("wrong token"));
  }
  SECTION("the server's own proof replayed as the client's") {
    const auto refused = handshake.Feed(challenge->proof);
    CHECK(refused.status == Status::kRefused);
  }
}

TEST_CASE("the server handshake refuses what is not a hello", "[store][auth]") {
  ServerHandshake handshake(Key(kToken), RandomNonce());
  SECTION("a c10d request") {
    const auto refused = handshake.Feed(Bytes{0, 0x3c, 0x1d, 0x2a, 0x4b});
    CHECK(refused.status == Status::kRefused);
    CHECK(refused.reply == Bytes(kAuthRequiredMarker.begin(), kAuthRequiredMarker.end()));
    CHECK_THAT(refused.refusal, Catch::Contains("did not authenticate"));
  }
  SECTION("a hello with another magic or version") {
    Bytes hello = EncodeHello(RandomNonce());
    const std::size_t at = GENERATE(1, 1 + kAuthMagic.size());
    hello[at] ^= 0x40;
    CHECK(handshake.Feed(hello).status == Status::kRefused);
  }
}

TEST_CASE("a client with the store's token works as any client", "[store][auth]") {
  const auto key = Key(kToken);
  ServerThread server(WithToken(key));
  TcpStoreClient client(ClientWith(server, key));
  client.SetString("a", "1");
  CHECK(client.GetString("a") == "1");
  CHECK(client.Add("n", 2) == 2);
  TcpStoreClient second(ClientWith(server, Key(kToken)));  // the same secret, its own copy
  CHECK(second.GetString("a") == "1");
}

TEST_CASE("a store that requires a token refuses others at once, naming the fix", "[store][auth]") {
  ServerThread server(WithToken(Key(kToken)));
  const auto start = Clock::now();
  SECTION("no token") {
    CHECK_THROWS_WITH(TcpStoreClient(ClientWith(server, nullptr)),
                      Catch::Contains("requires a token") && Catch::Contains("DDPRUN_RDZV_TOKEN"));
  }
  SECTION("another token") {
    CHECK_THROWS_WITH(TcpStoreClient(ClientWith(server, Key("a-different-token-value"))),
                      Catch::Contains("does not hold this node's token"));
  }
  // Not retried until connect_timeout (10 s): the answer is final.
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  CHECK(NumKeys(server) == 0);
}

TEST_CASE("a token offered to a store without one is refused at once", "[store][auth]") {
  ServerThread server;
  const auto start = Clock::now();
  CHECK_THROWS_WITH(TcpStoreClient(ClientWith(server, Key(kToken))),
                    Catch::Contains("runs without a token"));
  CHECK(Clock::now() - start < std::chrono::seconds(5));
  TcpStoreClient plain(server.Client());  // the store still serves clients without one
  plain.SetString("k", "v");
}

TEST_CASE("unauthenticated bytes never reach the key space", "[store][auth]") {
  const auto key = Key(kToken);
  ServerThread server(WithToken(key));
  SECTION("a c10d SET first") {
    RawConnection connection(server.Port());
    connection.Send(testing::Concat(
        {testing::Hello(),
         EncodeRequest(Generation::kValidated, {Command::kSet, {"/stolen"}, {Bytes{1}}, 0, 0})}));
    const Bytes marker = connection.Read(kAuthRequiredMarker.size());
    CHECK(marker == Bytes(kAuthRequiredMarker.begin(), kAuthRequiredMarker.end()));
    CHECK(connection.Closed());
  }
  SECTION("a wrong proof with a SET behind it") {
    RawConnection connection(server.Port());
    const Nonce mine = RandomNonce();
    ReadChallenge(connection, mine);
    Proof forged{};
    connection.Send(testing::Concat(
        {Bytes(forged.begin(), forged.end()), testing::Hello(),
         EncodeRequest(Generation::kValidated, {Command::kSet, {"/stolen"}, {Bytes{1}}, 0, 0})}));
    CHECK(connection.Read(1) == Bytes{kRefused});
    CHECK(connection.Closed());
  }
  CHECK(NumKeys(server) == 0);
}

TEST_CASE("a client that does not authenticate is dropped at the deadline", "[store][auth]") {
  ServerOptions options = WithToken(Key(kToken));
  options.limits.auth_timeout = std::chrono::milliseconds(200);
  ServerThread server(options);
  RawConnection connection(server.Port());
  const auto start = Clock::now();
  CHECK(connection.Closed());  // within the 10 s receive timeout, else false
  CHECK(Clock::now() - start < std::chrono::seconds(5));
}

TEST_CASE("each refused connection is logged once, not per byte", "[store][auth]") {
  CapturedLog log;
  {
    ServerThread server(WithToken(Key(kToken)));
    constexpr int kConnections = 3;
    for (int i = 0; i < kConnections; ++i) {
      RawConnection connection(server.Port());
      // 64 separate sends of one byte each; the first refuses the connection.
      for (int byte = 0; byte < 64; ++byte) {
        const Bytes one{static_cast<std::uint8_t>(byte)};
        if (::send(connection.Fd(), one.data(), 1, MSG_NOSIGNAL) != 1) break;
      }
      CHECK(ClosedAfterReading(connection));
    }
  }  // the server thread is joined: every line is written
  CHECK(log.Count("refused the connection") == 3);
  CHECK(log.Count("did not authenticate") == 3);
}

TEST_CASE("an empty token is not a key", "[store][auth]") {
  CHECK_THROWS_AS(AuthKey(""), std::invalid_argument);
}

}  // namespace ddprun::store
