// Fuzz target: the c10d store request parser (store/store_protocol.h), both generations.
// The input is what a client sends on one connection. It is parsed as a whole, and fed again in
// pieces (sizes drawn from the input, then byte by byte) the way the server's connection does
// (need-more sizes, generation detection); for the legacy and validated generations and the
// detected one, under the default and under small limits. Checked: both ways give the same
// requests and the same end (need more / malformed, same reason); a complete request re-encodes
// to exactly the bytes it consumed; need-more asks for more than the buffer holds and never for
// more than the request limit. The same input is also what a stranger sends an authenticated
// store before its first request (store/store_auth.h): the server's handshake, fed whole
// and in pieces, must end the same way, consume only what it was given, refuse with a reason,
// and never accept without the token's proof; the client's challenge parser reads its prefix.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "store/store_auth.h"
#include "store/store_protocol.h"

namespace {

using ddprun::fuzz::Require;
using namespace ddprun::store;

struct Outcome {
  std::vector<Request> requests;
  ParseStatus end = ParseStatus::kNeedMore;
  std::string error;
};

// Checks one parse of `data` (the unparsed rest of a connection's input).
void CheckResult(Generation generation, std::span<const std::uint8_t> data,
                 const ProtocolLimits& limits, const ParseResult& result) {
  switch (result.status) {
    case ParseStatus::kComplete: {
      Require(result.size >= 1 && result.size <= data.size(), "complete: size out of range");
      const Bytes frame(data.begin(), data.begin() + static_cast<std::ptrdiff_t>(result.size));
      Require(EncodeRequest(generation, result.request) == frame,
              "complete: the request does not re-encode to the bytes it consumed",
              CommandName(result.request.command));
      for (const Bytes& value : result.request.values) (void)ParseCounter(value);
      break;
    }
    case ParseStatus::kNeedMore:
      Require(result.size > data.size(), "need more: asks for no more than the buffer holds");
      Require(result.size <= limits.max_request_bytes, "need more: asks for more than the limit");
      break;
    case ParseStatus::kMalformed:
      Require(!result.error.empty(), "malformed: no reason given");
      break;
  }
}

// The whole input at once; `generation` nullopt: detected as the server does.
Outcome ParseWhole(std::optional<Generation> generation, std::span<const std::uint8_t> data,
                   const ProtocolLimits& limits) {
  Outcome outcome;
  if (!generation) generation = DetectGeneration(data);
  if (!generation) return outcome;
  std::size_t at = 0;
  while (true) {
    const auto rest = data.subspan(at);
    ParseResult result = ParseRequest(*generation, rest, limits);
    CheckResult(*generation, rest, limits, result);
    if (result.status != ParseStatus::kComplete) {
      outcome.end = result.status;
      outcome.error = result.error;
      return outcome;
    }
    outcome.requests.push_back(std::move(result.request));
    at += result.size;
  }
}

// Piece sizes from the input itself, so that a crash reproduces from the file alone: mostly
// 1 to 16 bytes, now and then up to 4 KiB; or every piece one byte (`bytewise`).
std::vector<std::size_t> Pieces(std::span<const std::uint8_t> data, bool bytewise) {
  std::uint64_t state = 0x9E3779B97F4A7C15ull ^ data.size();
  for (std::uint8_t byte : data) state = (state ^ byte) * 0x100000001B3ull;
  std::vector<std::size_t> pieces;
  for (std::size_t total = 0; total < data.size();) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const std::size_t piece = bytewise ? 1 : state % 32 == 0 ? 1 + state % 4096 : 1 + state % 16;
    pieces.push_back(std::min(piece, data.size() - total));
    total += pieces.back();
  }
  return pieces;
}

// As StoreConnection::ProcessOne: parse when the buffer holds what the last parse asked for.
Outcome ParsePieces(std::optional<Generation> generation, std::span<const std::uint8_t> data,
                    const ProtocolLimits& limits, bool bytewise) {
  Outcome outcome;
  Bytes buffer;
  std::size_t begin = 0;
  std::size_t need = 1;
  std::size_t fed = 0;
  for (std::size_t piece : Pieces(data, bytewise)) {
    buffer.insert(buffer.end(), data.begin() + static_cast<std::ptrdiff_t>(fed),
                  data.begin() + static_cast<std::ptrdiff_t>(fed + piece));
    fed += piece;
    while (true) {
      const std::span<const std::uint8_t> rest(buffer.data() + begin, buffer.size() - begin);
      if (rest.size() < need) break;
      if (!generation) {
        generation = DetectGeneration(rest);
        if (!generation) {
          need = 5;
          break;
        }
      }
      ParseResult result = ParseRequest(*generation, rest, limits);
      CheckResult(*generation, rest, limits, result);
      if (result.status == ParseStatus::kMalformed) {
        outcome.end = ParseStatus::kMalformed;
        outcome.error = result.error;
        return outcome;
      }
      if (result.status == ParseStatus::kNeedMore) {
        need = result.size;
        break;
      }
      outcome.requests.push_back(std::move(result.request));
      begin += result.size;
      need = 1;
    }
  }
  return outcome;
}

void CheckSameOutcome(std::optional<Generation> generation, std::span<const std::uint8_t> data,
                      const ProtocolLimits& limits) {
  const Outcome whole = ParseWhole(generation, data, limits);
  for (bool bytewise : {false, true}) {
    const Outcome pieces = ParsePieces(generation, data, limits, bytewise);
    Require(whole.requests == pieces.requests, "whole and piecewise parses differ in requests",
            whole.error + " | " + pieces.error);
    Require(whole.end == pieces.end, "whole and piecewise parses end differently",
            whole.error + " | " + pieces.error);
    Require(whole.error == pieces.error, "whole and piecewise parses fail differently",
            whole.error + " | " + pieces.error);
  }
}

// The handshake's end for `data` arriving in `pieces` (empty: all at once): the statuses it
// went through, and the refusal if any.
std::string Handshake(std::span<const std::uint8_t> data, const std::vector<std::size_t>& pieces) {
  static const auto key = std::make_shared<const AuthKey>("fuzzing-token-0123456789");
  static const Nonce server_nonce{};  // fixed, so a crash reproduces from the file alone
  ServerHandshake handshake(key, server_nonce);
  std::string trace;
  Bytes buffer;
  std::size_t begin = 0;
  std::size_t fed = 0;
  const std::vector<std::size_t> all{data.size()};
  for (std::size_t piece : pieces.empty() ? all : pieces) {
    buffer.insert(buffer.end(), data.begin() + static_cast<std::ptrdiff_t>(fed),
                  data.begin() + static_cast<std::ptrdiff_t>(fed + piece));
    fed += piece;
    for (;;) {
      const std::span<const std::uint8_t> rest(buffer.data() + begin, buffer.size() - begin);
      const ServerHandshake::Step step = handshake.Feed(rest);
      Require(step.consumed <= rest.size(), "handshake: consumed more than it was given");
      begin += step.consumed;
      switch (step.status) {
        case ServerHandshake::Status::kNeedMore:
          Require(step.need > rest.size(), "handshake: needs no more than it holds");
          break;
        case ServerHandshake::Status::kAnswered:
          Require(step.reply.size() == kChallengeBytes, "handshake: a challenge of another size");
          trace += "answered;";
          continue;
        case ServerHandshake::Status::kAccepted:
          Require(false, "handshake: accepted a proof made without the token");
          break;
        case ServerHandshake::Status::kRefused:
          Require(!step.refusal.empty() && !step.reply.empty(), "handshake: refused silently");
          return trace + "refused: " + step.refusal;
      }
      break;
    }
  }
  return trace + "need more";
}

void CheckHandshake(std::span<const std::uint8_t> data) {
  const std::string whole = Handshake(data, {});
  for (bool bytewise : {false, true}) {
    Require(whole == Handshake(data, Pieces(data, bytewise)),
            "handshake: whole and piecewise feeds end differently", whole);
  }
  if (data.size() >= kChallengeBytes) {
    (void)ParseChallenge(
        std::span<const std::uint8_t, kChallengeBytes>(data.data(), kChallengeBytes));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::uint8_t> input(data, size);
  const ProtocolLimits defaults;
  const ProtocolLimits small{.max_key_bytes = 16,
                             .max_value_bytes = 64,
                             .max_keys_per_request = 4,
                             .max_request_bytes = 256};
  for (const ProtocolLimits& limits : {defaults, small}) {
    CheckSameOutcome(std::nullopt, input, limits);
    CheckSameOutcome(Generation::kLegacy, input, limits);
    CheckSameOutcome(Generation::kValidated, input, limits);
  }
  CheckHandshake(input);
  return 0;
}
