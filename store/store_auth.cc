#include "store/store_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <algorithm>
#include <stdexcept>

namespace ddprun::store {
namespace {

template <std::size_t N>
void Append(Bytes& out, const std::array<std::uint8_t, N>& bytes) {
  out.insert(out.end(), bytes.begin(), bytes.end());
}

template <std::size_t N>
std::array<std::uint8_t, N> Take(std::span<const std::uint8_t> data, std::size_t at) {
  std::array<std::uint8_t, N> out{};
  std::copy_n(data.begin() + static_cast<std::ptrdiff_t>(at), N, out.begin());
  return out;
}

template <std::size_t N>
Bytes Marker(const std::array<std::uint8_t, N>& marker) {
  return Bytes(marker.begin(), marker.end());
}

}  // namespace

AuthKey::AuthKey(std::string secret) : secret_(std::move(secret)) {
  if (secret_.empty()) throw std::invalid_argument("an empty authentication token");
}

AuthKey::~AuthKey() { OPENSSL_cleanse(secret_.data(), secret_.size()); }

Proof AuthKey::Prove(std::string_view role, const Nonce& client, const Nonce& server) const {
  Bytes message(role.begin(), role.end());
  Append(message, client);
  Append(message, server);
  Proof proof{};
  unsigned int length = 0;
  if (::HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()), message.data(),
             message.size(), proof.data(), &length) == nullptr ||
      length != proof.size()) {
    throw std::runtime_error("HMAC-SHA256 failed (OpenSSL)");
  }
  return proof;
}

bool SameProof(const Proof& expected, std::span<const std::uint8_t> received) {
  return received.size() == expected.size() &&
         CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

Nonce RandomNonce() {
  Nonce nonce{};
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) {
    throw std::runtime_error("no random bytes for an authentication nonce (OpenSSL RAND_bytes)");
  }
  return nonce;
}

Bytes EncodeHello(const Nonce& client) {
  Bytes out{kAuthHelloCode};
  Append(out, kAuthMagic);
  out.push_back(kAuthVersion);
  Append(out, client);
  return out;
}

Bytes EncodeChallenge(const Nonce& server, const Proof& server_proof) {
  Bytes out;
  Append(out, kAuthMagic);
  Append(out, server);
  Append(out, server_proof);
  return out;
}

std::optional<Challenge> ParseChallenge(std::span<const std::uint8_t, kChallengeBytes> bytes) {
  if (!std::equal(kAuthMagic.begin(), kAuthMagic.end(), bytes.begin())) return std::nullopt;
  return Challenge{Take<kNonceBytes>(bytes, kAuthMagic.size()),
                   Take<kProofBytes>(bytes, kAuthMagic.size() + kNonceBytes)};
}

bool IsAuthHello(std::span<const std::uint8_t> data) {
  return !data.empty() && data[0] == kAuthHelloCode;
}

ServerHandshake::ServerHandshake(std::shared_ptr<const AuthKey> key, const Nonce& server_nonce)
    : key_(std::move(key)), server_nonce_(server_nonce) {
  if (!key_) throw std::invalid_argument("ServerHandshake without a key");
}

ServerHandshake::Step ServerHandshake::Feed(std::span<const std::uint8_t> data) {
  return client_nonce_ ? OnProof(data) : OnHello(data);
}

ServerHandshake::Step ServerHandshake::OnHello(std::span<const std::uint8_t> data) {
  Step step;
  if (data.empty()) {
    step.need = 1;
    return step;
  }
  if (!IsAuthHello(data)) {
    step.status = Status::kRefused;
    step.reply = Marker(kAuthRequiredMarker);
    step.refusal =
        "it did not authenticate: a client without the job's token (a PyTorch "
        "client cannot have one; docs/reliability.md)";
    return step;
  }
  if (data.size() < kHelloBytes) {
    step.need = kHelloBytes;
    return step;
  }
  const bool magic = std::equal(kAuthMagic.begin(), kAuthMagic.end(), data.begin() + 1);
  if (!magic || data[1 + kAuthMagic.size()] != kAuthVersion) {
    step.status = Status::kRefused;
    step.reply = Marker(kAuthRequiredMarker);
    step.refusal = magic ? "an authentication version this ddprun does not speak (" +
                               std::to_string(data[1 + kAuthMagic.size()]) + ")"
                         : "a malformed authentication hello";
    return step;
  }
  client_nonce_ = Take<kNonceBytes>(data, 2 + kAuthMagic.size());
  step.status = Status::kAnswered;
  step.consumed = kHelloBytes;
  step.reply =
      EncodeChallenge(server_nonce_, key_->Prove(kServerRole, *client_nonce_, server_nonce_));
  return step;
}

ServerHandshake::Step ServerHandshake::OnProof(std::span<const std::uint8_t> data) {
  Step step;
  if (data.size() < kProofBytes) {
    step.need = kProofBytes;
    return step;
  }
  step.consumed = kProofBytes;
  const Proof expected = key_->Prove(kClientRole, *client_nonce_, server_nonce_);
  if (SameProof(expected, data.first(kProofBytes))) {
    step.status = Status::kAccepted;
    step.reply = {kAccepted};
  } else {
    step.status = Status::kRefused;
    step.reply = {kRefused};
    step.refusal = "a wrong token (the client holds another secret than this store)";
  }
  return step;
}

}  // namespace ddprun::store
