// Command execution of StoreConnection: the reply rules of §3.3 and the semantics of §4 of
// the protocol doc. Deviations from PyTorch's own servers are listed in docs/store.md.
#include <algorithm>
#include <stdexcept>

#include "store/tcp_store_server_connection.h"

namespace ddprun::store {
namespace {

// A request that is well formed but not allowed here; the connection is closed.
class ProtocolViolation : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Bytes U8Reply(std::uint8_t value) { return Bytes{value}; }

Bytes I64Reply(std::int64_t value) {
  Bytes out;
  AppendI64(out, value);
  return out;
}

Bytes BytesReply(const Bytes& value) {
  Bytes out;
  AppendBytes(out, value);
  return out;
}

}  // namespace

void StoreConnection::Execute(const Request& request) {
  shared_.requests.fetch_add(1, std::memory_order_relaxed);
  const Command command = request.command;
  if (*generation_ == Generation::kValidated && !validated_ && command != Command::kValidate) {
    throw ProtocolViolation("the first request must be VALIDATE");
  }
  switch (command) {
    case Command::kValidate:
      if (validated_) throw ProtocolViolation("VALIDATE sent twice");
      if (request.word != kValidationMagic) throw ProtocolViolation("wrong validation magic");
      validated_ = true;
      return;
    case Command::kPing: {
      Bytes echo;
      AppendU32(echo, request.word);
      return Reply(echo);
    }
    case Command::kSet:
      return keys_.Set(request.keys[0], request.values[0]);
    case Command::kCompareSet:
      return Reply(
          BytesReply(keys_.CompareSet(request.keys[0], request.values[0], request.values[1])));
    case Command::kGet: {
      // PyTorch's legacy server closes the connection on a missing key; like the libuv
      // server, reply an empty value.
      const Bytes* value = keys_.Find(request.keys[0]);
      return Reply(BytesReply(value ? *value : Bytes{}));
    }
    case Command::kAdd:
      return Reply(I64Reply(keys_.Add(request.keys[0], request.number)));
    case Command::kCheck:
      return Reply(U8Reply(static_cast<std::uint8_t>(
          keys_.Check(request.keys) ? CheckResponse::kReady : CheckResponse::kNotReady)));
    case Command::kWait:
      return ExecuteWait(request);
    case Command::kNumKeys:
      return Reply(I64Reply(keys_.NumKeys()));
    case Command::kWatchKey:
      return ExecuteWatch(request);
    case Command::kDeleteKey:
      return Reply(I64Reply(keys_.DeleteKey(request.keys[0]) ? 1 : 0));
    case Command::kAppend:
      return keys_.Append(request.keys[0], request.values[0]);
    case Command::kMultiGet:
      return ExecuteMultiGet(request);
    case Command::kMultiSet:
      for (std::size_t i = 0; i < request.keys.size(); ++i) {
        keys_.Set(request.keys[i], request.values[i]);
      }
      return;
    case Command::kCancelWait:
      CancelWaits();
      return Reply(U8Reply(static_cast<std::uint8_t>(WaitResponse::kWaitCanceled)));
    case Command::kQueuePush:
      return keys_.QueuePush(request.keys[0], request.values[0]);
    case Command::kQueuePop:
      return ExecuteQueuePop(request);
    case Command::kQueueLen:
      return Reply(I64Reply(keys_.QueueLen(request.keys[0])));
    case Command::kListKeys:
      return ExecuteListKeys();
    case Command::kBarrier:
      return ExecuteBarrier(request);
  }
}

void StoreConnection::ExecuteWait(const Request& request) {
  auto slot = std::make_shared<KeySpace::WaiterId>(KeySpace::kNoWaiter);
  const auto id = keys_.Wait(request.keys, WaitReadyCallback(slot));
  if (id == KeySpace::kNoWaiter) {
    return Reply(U8Reply(static_cast<std::uint8_t>(WaitResponse::kStopWaiting)));
  }
  *slot = id;
  waits_.push_back(id);
}

void StoreConnection::ExecuteBarrier(const Request& request) {
  auto slot = std::make_shared<KeySpace::WaiterId>(KeySpace::kNoWaiter);
  const auto id = keys_.Barrier(request.keys[0], request.number, WaitReadyCallback(slot));
  if (id == KeySpace::kNoWaiter) {
    return Reply(U8Reply(static_cast<std::uint8_t>(WaitResponse::kStopWaiting)));
  }
  *slot = id;
  waits_.push_back(id);
}

// The waiter's id is in `slot` by the time a write can release it: the registering request
// holds the key space's lock until it has stored the id.
KeySpace::ReadyCallback StoreConnection::WaitReadyCallback(
    std::shared_ptr<KeySpace::WaiterId> slot) {
  return [weak = weak_from_this(), slot] {
    if (auto self = weak.lock()) {
      self->OnOwnThread([self, id = *slot] { self->OnWaitReady(id); });
    }
  };
}

// A release handed over from another thread can arrive after this client's CANCEL_WAIT was
// answered; the wait is gone from waits_ then and gets no late STOP_WAITING (which would shift
// every later reply of the client).
void StoreConnection::OnWaitReady(KeySpace::WaiterId id) {
  if (closed_ || std::erase(waits_, id) == 0) return;
  if (waits_.empty()) waits_.shrink_to_fit();  // an idle connection keeps no storage
  Reply(U8Reply(static_cast<std::uint8_t>(WaitResponse::kStopWaiting)));
}

void StoreConnection::ExecuteWatch(const Request& request) {
  const auto id = keys_.Watch(
      request.keys[0], [weak = weak_from_this()](WatchEvent event, const std::string& key,
                                                 const Bytes& old_value, const Bytes& new_value) {
        auto self = weak.lock();
        if (!self) return;
        auto out = std::make_shared<Bytes>();
        AppendU8(*out, static_cast<std::uint8_t>(event));
        AppendString(*out, key);
        AppendBytes(*out, old_value);
        AppendBytes(*out, new_value);
        self->OnOwnThread([self, out] { self->Reply(*out); });
      });
  watches_.push_back(id);
  Reply(U8Reply(static_cast<std::uint8_t>(WatchEvent::kCallbackRegistered)));
}

void StoreConnection::ExecuteMultiGet(const Request& request) {
  // Missing keys read as empty values (libuv's behaviour; the legacy server closes).
  std::size_t size = 0;
  for (const auto& key : request.keys) {
    const Bytes* value = keys_.Find(key);
    size += 8 + (value ? value->size() : 0);
  }
  if (size > limits_.max_output_bytes) throw ProtocolViolation("reply larger than the limit");
  Bytes out;
  out.reserve(size);
  for (const auto& key : request.keys) {
    const Bytes* value = keys_.Find(key);
    AppendBytes(out, value ? *value : Bytes{});
  }
  Reply(out);
}

void StoreConnection::ExecuteQueuePop(const Request& request) {
  auto [length, item] = keys_.QueuePop(request.keys[0]);
  Bytes out;
  AppendI64(out, length);
  if (item) AppendBytes(out, *item);
  Reply(out);
}

void StoreConnection::ExecuteListKeys() {
  const auto keys = keys_.ListKeys();
  Bytes out;
  AppendI64(out, static_cast<std::int64_t>(keys.size()));
  for (const auto& key : keys) AppendString(out, key);
  if (out.size() > limits_.max_output_bytes) throw ProtocolViolation("reply larger than the limit");
  Reply(out);
}

void StoreConnection::CancelWaits() {
  for (const auto id : waits_) keys_.CancelWait(id);
  waits_.clear();
}

}  // namespace ddprun::store
