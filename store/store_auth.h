// Shared-secret authentication of store connections (docs/reliability.md, "Authenticated
// rendezvous"). Before its first c10d request, a client holding the job's token and a server
// requiring it run a mutual HMAC-SHA256 challenge over fresh random nonces, so that neither the
// token nor anything replayable crosses the network, and each side proves it holds the token:
//   client -> server  HELLO      kAuthHelloCode, "ddprauth", version, client nonce
//   server -> client  CHALLENGE  "ddprauth", server nonce, HMAC(token, "server" nc ns)
//   client -> server  PROOF      HMAC(token, "client" nc ns)
//   server -> client  VERDICT    kAccepted, or kRefused and the connection closes
// The c10d protocol follows on the same connection. A server that requires the token answers
// any other first byte with kAuthRequiredMarker and closes; a server without a token answers a
// HELLO with kNoTokenMarker and closes: a ddprun client reads either where it expects its PING
// echo or the challenge, and names the problem instead of retrying. Nothing here allocates per
// byte or interprets what it receives beyond fixed-size fields.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "store/store.h"

namespace ddprun::store {

inline constexpr std::size_t kNonceBytes = 32;
inline constexpr std::size_t kProofBytes = 32;        // HMAC-SHA256
inline constexpr std::uint8_t kAuthHelloCode = 0xA5;  // not a first byte either generation sends
inline constexpr std::uint8_t kAuthVersion = 1;
inline constexpr std::array<std::uint8_t, 8> kAuthMagic{'d', 'd', 'p', 'r', 'a', 'u', 't', 'h'};
inline constexpr std::size_t kHelloBytes = 1 + kAuthMagic.size() + 1 + kNonceBytes;
inline constexpr std::size_t kChallengeBytes = kAuthMagic.size() + kNonceBytes + kProofBytes;
inline constexpr std::uint8_t kAccepted = 1;
inline constexpr std::uint8_t kRefused = 0;
inline constexpr std::array<std::uint8_t, 4> kAuthRequiredMarker{'D', 'D', 'A', 'R'};
inline constexpr std::array<std::uint8_t, 4> kNoTokenMarker{'D', 'D', 'N', 'T'};
// Tokens shorter than this are refused where they are read (cli/rdzv_token).
inline constexpr std::size_t kMinTokenBytes = 16;
inline constexpr std::string_view kServerRole = "server";
inline constexpr std::string_view kClientRole = "client";

using Nonce = std::array<std::uint8_t, kNonceBytes>;
using Proof = std::array<std::uint8_t, kProofBytes>;

// The job's shared secret. Wiped from memory when destroyed; never printed.
class AuthKey {
 public:
  // Throws std::invalid_argument when `secret` is empty.
  explicit AuthKey(std::string secret);
  ~AuthKey();
  AuthKey(const AuthKey&) = delete;
  AuthKey& operator=(const AuthKey&) = delete;

  // HMAC-SHA256 over role, then both nonces ("server" and "client" proofs differ, so neither
  // side's answer can be replayed as the other's).
  Proof Prove(std::string_view role, const Nonce& client, const Nonce& server) const;

 private:
  std::string secret_;
};

// Compares in time independent of where the bytes differ.
bool SameProof(const Proof& expected, std::span<const std::uint8_t> received);

// Cryptographically random bytes (OpenSSL RAND_bytes); throws std::runtime_error on failure.
Nonce RandomNonce();

Bytes EncodeHello(const Nonce& client);
Bytes EncodeChallenge(const Nonce& server, const Proof& server_proof);

struct Challenge {
  Nonce server;
  Proof proof;
};
// nullopt when the bytes are not a challenge (wrong magic).
std::optional<Challenge> ParseChallenge(std::span<const std::uint8_t, kChallengeBytes> bytes);

// The server's side of one connection's handshake, fed the connection's unparsed bytes. Pure:
// the caller sends `reply`, drops `consumed` bytes, and closes the connection on kRefused.
class ServerHandshake {
 public:
  enum class Status {
    kNeedMore,  // wait for `need` bytes in all
    kAnswered,  // the hello was answered with the challenge; feed what follows
    kAccepted,  // authenticated: what follows is c10d
    kRefused,   // send `reply` (a marker or the verdict), then close; `refusal` says why
  };
  struct Step {
    Status status = Status::kNeedMore;
    std::size_t consumed = 0;
    std::size_t need = 0;
    Bytes reply;
    std::string refusal;
  };

  ServerHandshake(std::shared_ptr<const AuthKey> key, const Nonce& server_nonce);
  Step Feed(std::span<const std::uint8_t> data);

 private:
  Step OnHello(std::span<const std::uint8_t> data);
  Step OnProof(std::span<const std::uint8_t> data);

  std::shared_ptr<const AuthKey> key_;
  Nonce server_nonce_;
  std::optional<Nonce> client_nonce_;  // set once the hello was answered
};

// Whether a connection's first byte starts a HELLO (a server without a token refuses it with
// kNoTokenMarker).
bool IsAuthHello(std::span<const std::uint8_t> data);

}  // namespace ddprun::store
