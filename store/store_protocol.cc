#include "store/store_protocol.h"

#include <array>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace ddprun::store {
namespace {

// Wire codes per generation, indexed by Command; -1 = not in this generation.
constexpr int kNone = -1;
constexpr std::array<int, 20> kLegacyCodes = {
    kNone, 0,     1,     2,     3,     4,    5, 6, 7, 8,  // VALIDATE .. DELETE_KEY
    9,     10,    11,    12,  // T1 additions: APPEND, MULTI_GET, MULTI_SET, CANCEL_WAIT
    kNone, kNone, kNone, kNone, kNone, kNone};
constexpr std::array<int, 20> kValidatedCodes = {0, 1,  2,  3,  4,  5,  6,  7,  kNone, 8,
                                                 9, 10, 11, 12, 13, 14, 15, 16, 17,    18};
constexpr std::array<const char*, 20> kNames = {
    "VALIDATE",   "SET",        "COMPARE_SET", "GET",       "ADD",       "CHECK",     "WAIT",
    "GETNUMKEYS", "WATCH_KEY",  "DELETE_KEY",  "APPEND",    "MULTI_GET", "MULTI_SET", "CANCEL_WAIT",
    "PING",       "QUEUE_PUSH", "QUEUE_POP",   "QUEUE_LEN", "LIST_KEYS", "BARRIER"};

const std::array<int, 20>& CodeTable(Generation generation) {
  return generation == Generation::kLegacy ? kLegacyCodes : kValidatedCodes;
}

// Reads fields from a byte span; a short read records how many bytes would be needed, a length
// over a limit records an error. With decode=false nothing is copied (completeness check only).
class Reader {
 public:
  Reader(std::span<const std::uint8_t> data, const ProtocolLimits& limits, bool decode)
      : data_(data), limits_(limits), decode_(decode) {}

  bool U8(std::uint8_t& value) {
    if (!Have(1)) return false;
    value = data_[pos_++];
    return true;
  }
  bool U32(std::uint32_t& value) {
    if (!Have(4)) return false;
    value = LoadU32(data_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool U64(std::uint64_t& value) {
    if (!Have(8)) return false;
    value = LoadU64(data_.data() + pos_);
    pos_ += 8;
    return true;
  }
  bool I64(std::int64_t& value) {
    std::uint64_t raw = 0;
    if (!U64(raw)) return false;
    value = static_cast<std::int64_t>(raw);
    return true;
  }
  bool Key(std::vector<std::string>& keys) {
    return Blob(limits_.max_key_bytes, "key", [&](const std::uint8_t* p, std::size_t n) {
      keys.emplace_back(reinterpret_cast<const char*>(p), n);
    });
  }
  bool Value(std::vector<Bytes>& values) {
    return Blob(limits_.max_value_bytes, "value",
                [&](const std::uint8_t* p, std::size_t n) { values.emplace_back(p, p + n); });
  }
  bool Count(std::uint64_t& count) {
    if (!U64(count)) return false;
    if (count > limits_.max_keys_per_request) return Fail("too many keys in one request");
    return true;
  }
  bool Fail(const std::string& error) {
    error_ = error;
    return false;
  }

  std::size_t Position() const { return pos_; }
  std::size_t Needed() const { return needed_; }
  const std::string& Error() const { return error_; }

 private:
  // The request limit is checked before the buffer is: a request over it is malformed however
  // much of it has arrived (n is at most a value's limit, so pos_ + n cannot overflow).
  bool Have(std::size_t n) {
    needed_ = pos_ + n;
    if (needed_ > limits_.max_request_bytes) return Fail("request larger than the limit");
    return data_.size() - pos_ >= n;
  }
  template <typename Sink>
  bool Blob(std::size_t max_size, const char* what, Sink sink) {
    std::uint64_t size = 0;
    if (!U64(size)) return false;
    if (size > max_size) {
      return Fail(std::string(what) + " of " + std::to_string(size) + " bytes over the limit");
    }
    if (!Have(static_cast<std::size_t>(size))) return false;
    if (decode_) sink(data_.data() + pos_, static_cast<std::size_t>(size));
    pos_ += static_cast<std::size_t>(size);
    return true;
  }

  std::span<const std::uint8_t> data_;
  const ProtocolLimits& limits_;
  bool decode_;
  std::size_t pos_ = 0;
  std::size_t needed_ = 0;
  std::string error_;
};

bool ReadKeyList(Reader& in, Request& request) {
  std::uint64_t count = 0;
  if (!in.Count(count)) return false;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (!in.Key(request.keys)) return false;
  }
  return true;
}

bool ReadMultiSet(Reader& in, Request& request) {
  std::uint64_t count = 0;
  if (!in.Count(count)) return false;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (!in.Key(request.keys) || !in.Value(request.values)) return false;
  }
  return true;
}

// Reads the fields that follow the command byte (table in §3.3).
bool ReadBody(Reader& in, Request& request) {
  switch (request.command) {
    case Command::kValidate:
    case Command::kPing:
      return in.U32(request.word);
    case Command::kSet:
    case Command::kAppend:
    case Command::kQueuePush:
      return in.Key(request.keys) && in.Value(request.values);
    case Command::kCompareSet:
      return in.Key(request.keys) && in.Value(request.values) && in.Value(request.values);
    case Command::kGet:
    case Command::kDeleteKey:
    case Command::kWatchKey:
    case Command::kQueuePop:
    case Command::kQueueLen:
      return in.Key(request.keys);
    case Command::kAdd:
    case Command::kBarrier:
      return in.Key(request.keys) && in.I64(request.number);
    case Command::kCheck:
    case Command::kWait:
    case Command::kMultiGet:
      return ReadKeyList(in, request);
    case Command::kMultiSet:
      return ReadMultiSet(in, request);
    case Command::kNumKeys:
    case Command::kCancelWait:
    case Command::kListKeys:
      return true;
  }
  return in.Fail("unhandled command");
}

ParseResult ParsePass(Generation generation, std::span<const std::uint8_t> data,
                      const ProtocolLimits& limits, bool decode) {
  ParseResult result;
  Reader in(data, limits, decode);
  std::uint8_t code = 0;
  if (!in.U8(code)) {
    result.size = 1;
    return result;
  }
  const auto command = CommandFromWire(generation, code);
  if (!command) {
    result.status = ParseStatus::kMalformed;
    result.error = "unknown command byte " + std::to_string(code);
    return result;
  }
  result.request.command = *command;
  if (ReadBody(in, result.request)) {
    result.status = ParseStatus::kComplete;
    result.size = in.Position();
  } else if (!in.Error().empty()) {
    result.status = ParseStatus::kMalformed;
    result.error = std::string(CommandName(*command)) + ": " + in.Error();
  } else {
    result.size = in.Needed();
  }
  return result;
}

void AppendKeyList(Bytes& out, const std::vector<std::string>& keys) {
  AppendU64(out, keys.size());
  for (const auto& key : keys) AppendString(out, key);
}

const std::string& KeyAt(const Request& request, std::size_t i) {
  if (request.keys.size() <= i) throw std::invalid_argument("request is missing a key");
  return request.keys[i];
}

const Bytes& ValueAt(const Request& request, std::size_t i) {
  if (request.values.size() <= i) throw std::invalid_argument("request is missing a value");
  return request.values[i];
}

void EncodeBody(const Request& request, Bytes& out) {
  switch (request.command) {
    case Command::kValidate:
    case Command::kPing:
      return AppendU32(out, request.word);
    case Command::kSet:
    case Command::kAppend:
    case Command::kQueuePush:
      AppendString(out, KeyAt(request, 0));
      return AppendBytes(out, ValueAt(request, 0));
    case Command::kCompareSet:
      AppendString(out, KeyAt(request, 0));
      AppendBytes(out, ValueAt(request, 0));
      return AppendBytes(out, ValueAt(request, 1));
    case Command::kGet:
    case Command::kDeleteKey:
    case Command::kWatchKey:
    case Command::kQueuePop:
    case Command::kQueueLen:
      return AppendString(out, KeyAt(request, 0));
    case Command::kAdd:
    case Command::kBarrier:
      AppendString(out, KeyAt(request, 0));
      return AppendI64(out, request.number);
    case Command::kCheck:
    case Command::kWait:
    case Command::kMultiGet:
      return AppendKeyList(out, request.keys);
    case Command::kMultiSet:
      AppendU64(out, request.keys.size());
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        AppendString(out, request.keys[i]);
        AppendBytes(out, ValueAt(request, i));
      }
      return;
    case Command::kNumKeys:
    case Command::kCancelWait:
    case Command::kListKeys:
      return;
  }
}

}  // namespace

std::optional<Command> CommandFromWire(Generation generation, std::uint8_t code) {
  const auto& table = CodeTable(generation);
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (table[i] == code) return static_cast<Command>(i);
  }
  return std::nullopt;
}

std::optional<std::uint8_t> WireCode(Generation generation, Command command) {
  const int code = CodeTable(generation).at(static_cast<std::size_t>(command));
  if (code == kNone) return std::nullopt;
  return static_cast<std::uint8_t>(code);
}

const char* CommandName(Command command) { return kNames.at(static_cast<std::size_t>(command)); }

std::optional<Generation> DetectGeneration(std::span<const std::uint8_t> data) {
  if (!data.empty() && data[0] != 0) return Generation::kLegacy;
  if (data.size() < 5) return std::nullopt;
  return LoadU32(data.data() + 1) == kValidationMagic ? Generation::kValidated
                                                      : Generation::kLegacy;
}

ParseResult ParseRequest(Generation generation, std::span<const std::uint8_t> data,
                         const ProtocolLimits& limits) {
  ParseResult check = ParsePass(generation, data, limits, false);
  if (check.status != ParseStatus::kComplete) return check;
  return ParsePass(generation, data, limits, true);
}

Bytes EncodeRequest(Generation generation, const Request& request) {
  const auto code = WireCode(generation, request.command);
  if (!code) {
    throw std::invalid_argument(std::string(CommandName(request.command)) +
                                " does not exist in this protocol generation");
  }
  Bytes out;
  AppendU8(out, *code);
  EncodeBody(request, out);
  return out;
}

void AppendU8(Bytes& out, std::uint8_t value) { out.push_back(value); }

void AppendU32(Bytes& out, std::uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void AppendU64(Bytes& out, std::uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void AppendI64(Bytes& out, std::int64_t value) {
  AppendU64(out, static_cast<std::uint64_t>(value));
}

void AppendBytes(Bytes& out, std::span<const std::uint8_t> value) {
  AppendU64(out, value.size());
  out.insert(out.end(), value.begin(), value.end());
}

void AppendString(Bytes& out, const std::string& value) {
  AppendU64(out, value.size());
  out.insert(out.end(), value.begin(), value.end());
}

std::uint32_t LoadU32(const std::uint8_t* data) {
  std::uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = (value << 8) | data[i];
  return value;
}

std::uint64_t LoadU64(const std::uint8_t* data) {
  std::uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | data[i];
  return value;
}

std::optional<std::int64_t> ParseCounter(const Bytes& value) {
  const std::string text(value.begin(), value.end());
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  if (end == text.c_str() || errno == ERANGE) return std::nullopt;
  return static_cast<std::int64_t>(parsed);
}

std::string NotACounter(const std::string& key) {
  return "ADD on key '" + key + "': its value is not an integer";
}

}  // namespace ddprun::store
