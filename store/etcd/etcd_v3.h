// etcd's v3 API as its JSON/HTTP gateway speaks it (etcd 3.4+: POST /v3/kv/range, /v3/kv/put,
// /v3/kv/txn, /v3/kv/deleterange, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke,
// /v3/watch): the request bodies and the replies' decoding, pure (no I/O), so that the etcd
// rendezvous backend's transport only moves bytes. Keys and values are base64 in JSON; int64
// fields arrive as strings (proto3 JSON) and are read as strings or numbers. A reply that is not
// what the API documents throws EtcdProtocolError naming the field; an error reply
// ({"error", "code", "message"}) throws EtcdError with etcd's message.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::store::etcd {

// The reply does not have the documented shape (not etcd, or a version that speaks otherwise).
class EtcdProtocolError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// etcd answered with an error (gRPC status `code`, e.g. 5 NOT_FOUND for an expired lease).
class EtcdError : public std::runtime_error {
 public:
  EtcdError(int code, const std::string& message)
      : std::runtime_error("etcd: " + message), code_(code) {}
  int Code() const { return code_; }

 private:
  int code_;
};

std::string Base64(std::string_view bytes);
// Throws EtcdProtocolError on characters outside the alphabet or a bad length.
std::string FromBase64(std::string_view text);

// The smallest key above every key that starts with `prefix` (etcd's range_end for a prefix).
std::string PrefixEnd(std::string_view prefix);

struct KeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  std::int64_t lease = 0;
  bool operator==(const KeyValue&) const = default;
};

// --- requests -------------------------------------------------------------------------------
nlohmann::json PutBody(std::string_view key, std::string_view value, std::int64_t lease = 0);
// `range_end` empty: the one key; `limit` 0: no limit.
nlohmann::json RangeBody(std::string_view key, std::string_view range_end = {},
                         bool count_only = false, std::int64_t limit = 0);
nlohmann::json DeleteRangeBody(std::string_view key, std::string_view range_end = {});

// Transaction building blocks: etcd's RequestOp (put, range, delete) and Compare, and a txn.
nlohmann::json PutOp(std::string_view key, std::string_view value);
nlohmann::json RangeOp(std::string_view key, std::string_view range_end = {});
nlohmann::json DeleteOp(std::string_view key, std::string_view range_end = {});
// True when `key`'s create_revision is `revision` (0: the key does not exist).
nlohmann::json CreatedAtCompare(std::string_view key, std::int64_t revision);
// True when `key`'s mod_revision is `revision` (0: the key does not exist).
nlohmann::json ModifiedAtCompare(std::string_view key, std::int64_t revision);
nlohmann::json TxnBody(nlohmann::json compares, nlohmann::json success, nlohmann::json failure);

// A transaction on one key: `desired` is put (with `lease`) when the key's mod_revision is
// `expected_mod_revision` (0: the key does not exist); otherwise the key is read back.
nlohmann::json CompareAndPutBody(std::string_view key, std::int64_t expected_mod_revision,
                                 std::string_view desired, std::int64_t lease = 0);

nlohmann::json LeaseGrantBody(std::int64_t ttl_seconds);
nlohmann::json LeaseKeepAliveBody(std::int64_t lease);
nlohmann::json LeaseRevokeBody(std::int64_t lease);

// Watch `key` (with `range_end`, a range) from `start_revision` (0: from now on).
nlohmann::json WatchCreateBody(std::string_view key, std::string_view range_end,
                               std::int64_t start_revision);

// --- replies --------------------------------------------------------------------------------
struct Header {
  std::int64_t revision = 0;
  std::uint64_t member_id = 0;
};

struct RangeReply {
  Header header;
  std::vector<KeyValue> kvs;
  std::int64_t count = 0;
};

struct PutReply {
  Header header;
};

struct DeleteReply {
  Header header;
  std::int64_t deleted = 0;
};

struct TxnReply {
  Header header;
  bool succeeded = false;
  std::vector<KeyValue> read;  // every range response's kvs, in order (CompareAndPutBody's read)
  std::vector<std::vector<KeyValue>> ranges;  // per response of the branch: its kvs (none: a
                                              // put or a delete)
};

struct LeaseReply {
  Header header;
  std::int64_t id = 0;
  std::int64_t ttl = 0;  // seconds; <= 0 in a keep-alive reply: the lease has expired
};

struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;
};

// One message of a watch stream: creation, events, or cancellation (compaction, an error).
struct WatchMessage {
  Header header;
  bool created = false;
  bool canceled = false;
  std::string cancel_reason;
  std::int64_t compact_revision = 0;  // the watch started below this revision: it was compacted
  std::vector<WatchEvent> events;
};

// Each throws EtcdError for an error reply, EtcdProtocolError for anything unexpected.
RangeReply ParseRange(const nlohmann::json& reply);
PutReply ParsePut(const nlohmann::json& reply);
DeleteReply ParseDelete(const nlohmann::json& reply);
TxnReply ParseTxn(const nlohmann::json& reply);
LeaseReply ParseLease(const nlohmann::json& reply);  // grant, and keepalive's {"result": ...}
// One line of /v3/watch's stream: {"result": {...}} or {"error": {...}}.
WatchMessage ParseWatch(const nlohmann::json& line);

}  // namespace ddprun::store::etcd
