// One non-blocking c10d store client connection of bench/storm_load: connect (optionally from a
// given source address), the PyTorch 2.x handshake (VALIDATE + PING), requests with exactly one
// reply awaited at a time, and that reply's framing. No threads, no event loop of its own: the
// load generator's epoll loop calls FinishConnect on EPOLLOUT and Read on EPOLLIN. Failures
// throw std::runtime_error naming the connection.
#pragma once
#include <netinet/in.h>

#include <cstdint>
#include <string>

#include "store/store_protocol.h"

namespace ddprun::bench {

using store::Bytes;

// What the request in flight is answered with: nothing, a byte (CHECK, WAIT), the PING echo,
// an i64 (ADD, DELETE_KEY) or `count` u64-length-prefixed values (GET, COMPARE_SET, MULTI_GET).
enum class ReplyKind { kNone, kU8, kU32, kI64, kValues };

class StormConn {
 public:
  explicit StormConn(int index) : index_(index) {}
  ~StormConn() { Close(); }
  StormConn(const StormConn&) = delete;
  StormConn& operator=(const StormConn&) = delete;

  // Opens a socket and starts connecting to `to`, from `from` when it is not null (its port is
  // left to connect(), IP_BIND_ADDRESS_NO_PORT). True when connected at once (loopback with
  // room in the listen queue), false when EPOLLOUT will tell.
  bool Open(const sockaddr_in& to, const sockaddr_in* from);
  // After EPOLLOUT: throws when the connect failed.
  void FinishConnect();
  void Close();
  int fd() const { return fd_; }
  bool connecting() const { return connecting_; }

  // Sends VALIDATE + PING; the PING echo is the reply to wait for.
  void SendHandshake();
  // Sends `requests` (encoded back to back in one send) and expects `kind` for the last one;
  // every earlier one must have no reply (a SET before a WAIT).
  void Send(const Bytes& requests, ReplyKind kind, int count = 1);
  static Bytes Encode(const store::Request& request);

  // Reads what arrived; true when the expected reply is complete. The reply stays readable
  // until the next Send.
  bool Read();
  bool Waiting() const { return expected_ != ReplyKind::kNone; }
  std::int64_t ReplyI64() const;
  std::uint8_t ReplyU8() const { return input_.at(0); }

 private:
  bool ReplyComplete() const;
  [[noreturn]] void Fail(const std::string& what) const;

  int index_;
  int fd_ = -1;
  bool connecting_ = false;
  ReplyKind expected_ = ReplyKind::kNone;
  int count_ = 1;
  Bytes input_;
};

// 127.0.0.1 + offset (offset 0 = 127.0.0.1), port in host order.
sockaddr_in LoopbackAddress(int offset, int port);

}  // namespace ddprun::bench
