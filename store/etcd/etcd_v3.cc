#include "store/etcd/etcd_v3.h"

#include <boost/beast/core/detail/base64.hpp>
#include <charconv>
#include <type_traits>

namespace ddprun::store::etcd {
namespace {

namespace base64 = boost::beast::detail::base64;
using nlohmann::json;

[[noreturn]] void Unexpected(const std::string& what) {
  throw EtcdProtocolError("an etcd reply that is not what the v3 API documents: " + what);
}

// An error reply: {"error": "...", "code": N, "message": "..."} (a watch line nests it).
void ThrowIfError(const json& reply) {
  if (!reply.is_object()) Unexpected("not a JSON object");
  const auto error = reply.find("error");
  if (error == reply.end()) return;
  const json& body = error->is_object() ? *error : reply;
  const std::string message =
      body.value("message", error->is_string() ? error->get<std::string>() : std::string("error"));
  const auto code = body.find("code");
  throw EtcdError(code != body.end() && code->is_number_integer() ? code->get<int>() : -1, message);
}

// proto3 JSON: (u)int64 as a string (etcd), tolerated as a JSON integer of the type's sign;
// absent means 0.
template <typename Integer>
Integer IntegerField(const json& object, const char* name, const char* type) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return 0;
  const bool number =
      std::is_signed_v<Integer> ? it->is_number_integer() : it->is_number_unsigned();
  if (number) return it->get<Integer>();
  if (!it->is_string()) Unexpected(std::string(name) + " is neither a number nor a string");
  const std::string& text = it->get_ref<const std::string&>();
  Integer value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    Unexpected(std::string(name) + " '" + text.substr(0, 32) + "' is not " + type);
  }
  return value;
}

std::int64_t Int64(const json& object, const char* name) {
  return IntegerField<std::int64_t>(object, name, "an int64");
}

std::uint64_t Uint64(const json& object, const char* name) {
  return IntegerField<std::uint64_t>(object, name, "a uint64");
}

std::string Bytes64(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return {};
  if (!it->is_string()) Unexpected(std::string(name) + " is not a string");
  return FromBase64(it->get_ref<const std::string&>());
}

const json& Object(const json& parent, const char* name) {
  static const json kEmpty = json::object();
  const auto it = parent.find(name);
  if (it == parent.end() || it->is_null()) return kEmpty;
  if (!it->is_object()) Unexpected(std::string(name) + " is not an object");
  return *it;
}

const json& Array(const json& parent, const char* name) {
  static const json kEmpty = json::array();
  const auto it = parent.find(name);
  if (it == parent.end() || it->is_null()) return kEmpty;
  if (!it->is_array()) Unexpected(std::string(name) + " is not an array");
  return *it;
}

Header ReadHeader(const json& reply) {
  const json& header = Object(reply, "header");
  return {Int64(header, "revision"), Uint64(header, "member_id")};
}

KeyValue ReadKeyValue(const json& kv) {
  if (!kv.is_object()) Unexpected("a key-value that is not an object");
  return {Bytes64(kv, "key"),        Bytes64(kv, "value"), Int64(kv, "create_revision"),
          Int64(kv, "mod_revision"), Int64(kv, "version"), Int64(kv, "lease")};
}

std::vector<KeyValue> ReadKvs(const json& reply) {
  std::vector<KeyValue> kvs;
  for (const json& kv : Array(reply, "kvs")) kvs.push_back(ReadKeyValue(kv));
  return kvs;
}

// Runs a decoder; nlohmann's own type errors (a field of another type) are protocol errors.
template <typename Decode>
auto Guarded(Decode decode) {
  try {
    return decode();
  } catch (const json::exception& error) {
    Unexpected(error.what());
  }
}

// int64 fields go out as strings, as etcd's own clients send them.
std::string Text(std::int64_t value) { return std::to_string(value); }

}  // namespace

std::string Base64(std::string_view bytes) {
  std::string out(base64::encoded_size(bytes.size()), '\0');
  out.resize(base64::encode(out.data(), bytes.data(), bytes.size()));
  return out;
}

std::string FromBase64(std::string_view text) {
  if (text.size() % 4 != 0) Unexpected("base64 of a length that is not a multiple of 4");
  std::size_t data = text.size();
  for (int pad = 0; pad < 2 && data > 0 && text[data - 1] == '='; ++pad) --data;
  std::string out(base64::decoded_size(text.size()), '\0');
  const auto [written, read] = base64::decode(out.data(), text.data(), data);
  if (read != data) Unexpected("base64 with a character outside its alphabet");
  out.resize(written);
  return out;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto& last = reinterpret_cast<unsigned char&>(end.back());
    if (last < 0xff) {
      ++last;
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key (etcd's convention for "no end")
}

json PutBody(std::string_view key, std::string_view value, std::int64_t lease) {
  json body{{"key", Base64(key)}, {"value", Base64(value)}};
  if (lease != 0) body["lease"] = Text(lease);
  return body;
}

json RangeBody(std::string_view key, std::string_view range_end, bool count_only,
               std::int64_t limit) {
  json body{{"key", Base64(key)}};
  if (!range_end.empty()) body["range_end"] = Base64(range_end);
  if (count_only) body["count_only"] = true;
  if (limit > 0) body["limit"] = Text(limit);
  return body;
}

json DeleteRangeBody(std::string_view key, std::string_view range_end) {
  json body{{"key", Base64(key)}};
  if (!range_end.empty()) body["range_end"] = Base64(range_end);
  return body;
}

json PutOp(std::string_view key, std::string_view value) {
  return json{{"requestPut", PutBody(key, value)}};
}
json RangeOp(std::string_view key, std::string_view range_end) {
  return json{{"requestRange", RangeBody(key, range_end)}};
}
json DeleteOp(std::string_view key, std::string_view range_end) {
  return json{{"requestDeleteRange", DeleteRangeBody(key, range_end)}};
}

json CreatedAtCompare(std::string_view key, std::int64_t revision) {
  return json{{"key", Base64(key)},
              {"result", "EQUAL"},
              {"target", "CREATE"},
              {"create_revision", Text(revision)}};
}

json ModifiedAtCompare(std::string_view key, std::int64_t revision) {
  return json{{"key", Base64(key)},
              {"result", "EQUAL"},
              {"target", "MOD"},
              {"mod_revision", Text(revision)}};
}

json TxnBody(json compares, json success, json failure) {
  return json{{"compare", std::move(compares)},
              {"success", std::move(success)},
              {"failure", std::move(failure)}};
}

json CompareAndPutBody(std::string_view key, std::int64_t expected_mod_revision,
                       std::string_view desired, std::int64_t lease) {
  return TxnBody(json::array({ModifiedAtCompare(key, expected_mod_revision)}),
                 json::array({json{{"requestPut", PutBody(key, desired, lease)}}}),
                 json::array({RangeOp(key)}));
}

json LeaseGrantBody(std::int64_t ttl_seconds) { return json{{"TTL", Text(ttl_seconds)}}; }
json LeaseKeepAliveBody(std::int64_t lease) { return json{{"ID", Text(lease)}}; }
json LeaseRevokeBody(std::int64_t lease) { return json{{"ID", Text(lease)}}; }

json WatchCreateBody(std::string_view key, std::string_view range_end,
                     std::int64_t start_revision) {
  json create{{"key", Base64(key)}};
  if (!range_end.empty()) create["range_end"] = Base64(range_end);
  if (start_revision > 0) create["start_revision"] = Text(start_revision);
  return json{{"create_request", create}};
}

RangeReply ParseRange(const json& reply) {
  return Guarded([&]() -> RangeReply {
    ThrowIfError(reply);
    return {ReadHeader(reply), ReadKvs(reply), Int64(reply, "count")};
  });
}

PutReply ParsePut(const json& reply) {
  return Guarded([&]() -> PutReply {
    ThrowIfError(reply);
    return {ReadHeader(reply)};
  });
}

DeleteReply ParseDelete(const json& reply) {
  return Guarded([&]() -> DeleteReply {
    ThrowIfError(reply);
    return {ReadHeader(reply), Int64(reply, "deleted")};
  });
}

TxnReply ParseTxn(const json& reply) {
  return Guarded([&]() -> TxnReply {
    ThrowIfError(reply);
    TxnReply txn{ReadHeader(reply), false, {}, {}};
    const auto succeeded = reply.find("succeeded");
    if (succeeded != reply.end() && !succeeded->is_boolean()) Unexpected("succeeded is not a bool");
    txn.succeeded = succeeded != reply.end() && succeeded->get<bool>();
    for (const json& response : Array(reply, "responses")) {
      if (!response.is_object()) Unexpected("a txn response is not an object");
      std::vector<KeyValue> kvs;
      if (response.contains("response_range")) kvs = ReadKvs(Object(response, "response_range"));
      txn.read.insert(txn.read.end(), kvs.begin(), kvs.end());
      txn.ranges.push_back(std::move(kvs));
    }
    return txn;
  });
}

LeaseReply ParseLease(const json& reply) {
  return Guarded([&]() -> LeaseReply {
    ThrowIfError(reply);
    const json& body = reply.contains("result") ? Object(reply, "result") : reply;
    ThrowIfError(body);
    return {ReadHeader(body), Int64(body, "ID"), Int64(body, "TTL")};
  });
}

WatchMessage ParseWatch(const json& line) {
  return Guarded([&]() -> WatchMessage {
    ThrowIfError(line);
    const auto result = line.find("result");
    if (result == line.end() || !result->is_object()) Unexpected("a watch line without a result");
    WatchMessage message;
    message.header = ReadHeader(*result);
    message.created = result->value("created", false);
    message.canceled = result->value("canceled", false);
    message.cancel_reason = result->value("cancel_reason", std::string());
    message.compact_revision = Int64(*result, "compact_revision");
    for (const json& event : Array(*result, "events")) {
      if (!event.is_object()) Unexpected("a watch event that is not an object");
      const std::string type = event.value("type", std::string("PUT"));
      if (type != "PUT" && type != "DELETE") Unexpected("a watch event of type " + type);
      message.events.push_back({type == "PUT" ? WatchEvent::Type::kPut : WatchEvent::Type::kDelete,
                                ReadKeyValue(Object(event, "kv"))});
    }
    return message;
  });
}

}  // namespace ddprun::store::etcd
