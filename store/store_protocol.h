// The c10d TCPStore wire protocol (docs/store.md, shared c10d-store-protocol.md): op codes of
// the legacy (PyTorch 1.13) and validated (2.x) generations, request encoding, an incremental
// request parser (complete / need more / malformed) and reply encoding helpers. Pure functions.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "store/store.h"

namespace ddprun::store {

enum class Generation : std::uint8_t {
  kLegacy,     // PyTorch <= 2.0: no handshake, SET = 0, WATCH_KEY; also serves the T1 codes 9-12
  kValidated,  // PyTorch 2.x: VALIDATE + PING handshake, VALIDATE = 0, SET = 1
};

// Logical commands; the byte on the wire depends on the generation (WireCode/CommandFromWire).
enum class Command : std::uint8_t {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kWatchKey,
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kQueuePush,
  kQueuePop,
  kQueueLen,
  kListKeys,
  kBarrier,
};

inline constexpr std::uint32_t kValidationMagic = 0x3C85F7CE;

enum class CheckResponse : std::uint8_t { kReady = 0, kNotReady = 1 };
enum class WaitResponse : std::uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };
enum class WatchEvent : std::uint8_t {
  kUpdated = 0,
  kCreated = 1,
  kDeleted = 2,
  kCallbackRegistered = 3,
};

std::optional<Command> CommandFromWire(Generation generation, std::uint8_t code);
std::optional<std::uint8_t> WireCode(Generation generation, Command command);
const char* CommandName(Command command);

// One decoded request. Field use per command:
//   keys: the key (SET, GET, ADD, ...), the key list (CHECK, WAIT, MULTI_GET, MULTI_SET);
//   values: SET/APPEND/QUEUE_PUSH [value], COMPARE_SET [expected, desired], MULTI_SET per key;
//   number: ADD delta, BARRIER world size; word: VALIDATE magic, PING nonce.
struct Request {
  Command command = Command::kNumKeys;
  std::vector<std::string> keys;
  std::vector<Bytes> values;
  std::int64_t number = 0;
  std::uint32_t word = 0;

  bool operator==(const Request&) const = default;
};

// Bounds a server applies while parsing; anything larger is malformed. Defaults are the
// libuv backend's (8 KiB keys, 8 MiB values, 128 Ki keys per request).
struct ProtocolLimits {
  std::size_t max_key_bytes = 8192;
  std::size_t max_value_bytes = 8u << 20;
  std::size_t max_keys_per_request = 131072;
  std::size_t max_request_bytes = 64u << 20;
};

enum class ParseStatus { kComplete, kNeedMore, kMalformed };

struct ParseResult {
  ParseStatus status = ParseStatus::kNeedMore;
  // kComplete: bytes consumed. kNeedMore: the buffer must hold at least this many bytes
  // before parsing again can succeed (a lower bound, not the exact frame size).
  std::size_t size = 0;
  Request request;
  std::string error;  // kMalformed: why, for the debug log
};

// Decides the generation of a new connection from its first bytes (§2.4): `00 CE F7 85 3C`
// is validated, anything else legacy. nullopt: fewer than 5 bytes and they start with 00.
std::optional<Generation> DetectGeneration(std::span<const std::uint8_t> data);

// Parses one request at the start of `data`.
ParseResult ParseRequest(Generation generation, std::span<const std::uint8_t> data,
                         const ProtocolLimits& limits = {});

// Encodes a request as the given generation's client sends it. Throws std::invalid_argument
// when the generation has no such command.
Bytes EncodeRequest(Generation generation, const Request& request);

// Reply building blocks (little-endian, as every supported platform writes them).
void AppendU8(Bytes& out, std::uint8_t value);
void AppendU32(Bytes& out, std::uint32_t value);
void AppendI64(Bytes& out, std::int64_t value);
void AppendU64(Bytes& out, std::uint64_t value);
void AppendBytes(Bytes& out, std::span<const std::uint8_t> value);  // u64 length + bytes
void AppendString(Bytes& out, const std::string& value);

std::uint32_t LoadU32(const std::uint8_t* data);
std::uint64_t LoadU64(const std::uint8_t* data);

// The counter semantics of ADD: the stored value parsed like strtoll (leading blanks skipped,
// trailing junk ignored). nullopt when it does not start with a number or overflows.
std::optional<std::int64_t> ParseCounter(const Bytes& value);

// Why an ADD on `key` fails when ParseCounter refuses its value (the value itself is not shown: it
// may be any bytes): "ADD on key 'k': its value is not an integer".
std::string NotACounter(const std::string& key);

}  // namespace ddprun::store
