#include "bench/storm_conn.h"

#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace ddprun::bench {

using store::Command;
using store::Generation;

sockaddr_in LoopbackAddress(int offset, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK + static_cast<std::uint32_t>(offset));
  return address;
}

bool StormConn::Open(const sockaddr_in& to, const sockaddr_in* from) {
  Close();
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) Fail("socket");
  const int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (from) {
    // The port is chosen at connect(), per destination, instead of one per source at bind().
    ::setsockopt(fd_, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    if (::bind(fd_, reinterpret_cast<const sockaddr*>(from), sizeof *from) != 0) Fail("bind");
  }
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&to), sizeof to) == 0) return true;
  if (errno != EINPROGRESS) Fail("connect");
  connecting_ = true;
  return false;
}

void StormConn::FinishConnect() {
  int error = 0;
  socklen_t size = sizeof error;
  ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size);
  if (error != 0) {
    errno = error;
    Fail("connect");
  }
  connecting_ = false;
}

void StormConn::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  connecting_ = false;
  expected_ = ReplyKind::kNone;
  input_.clear();
}

Bytes StormConn::Encode(const store::Request& request) {
  return store::EncodeRequest(Generation::kValidated, request);
}

void StormConn::SendHandshake() {
  Bytes hello = Encode({Command::kValidate, {}, {}, 0, store::kValidationMagic});
  const Bytes ping = Encode({Command::kPing, {}, {}, 0, static_cast<std::uint32_t>(index_)});
  hello.insert(hello.end(), ping.begin(), ping.end());
  Send(hello, ReplyKind::kU32);
}

void StormConn::Send(const Bytes& requests, ReplyKind kind, int count) {
  input_.clear();
  expected_ = kind;
  count_ = count;
  std::size_t sent = 0;
  while (sent < requests.size()) {  // requests are small: a short write is rare
    const ssize_t n = ::send(fd_, requests.data() + sent, requests.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      Fail("send");
    }
  }
}

bool StormConn::Read() {
  std::uint8_t chunk[4096];
  for (;;) {
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return false;
    if (n == 0) {
      errno = ECONNRESET;
      Fail("the server closed the connection");
    }
    if (n < 0) Fail("recv");
    input_.insert(input_.end(), chunk, chunk + n);
    if (ReplyComplete()) {
      expected_ = ReplyKind::kNone;
      return true;
    }
  }
}

bool StormConn::ReplyComplete() const {
  switch (expected_) {
    case ReplyKind::kNone:
      if (!input_.empty()) Fail("a reply nothing asked for");
      return false;
    case ReplyKind::kU8:
      return !input_.empty();
    case ReplyKind::kU32:
      return input_.size() >= 4;
    case ReplyKind::kI64:
      return input_.size() >= 8;
    case ReplyKind::kValues:
      break;
  }
  std::size_t at = 0;
  for (int i = 0; i < count_; ++i) {
    if (input_.size() < at + 8) return false;
    at += 8 + store::LoadU64(input_.data() + at);
  }
  return input_.size() >= at;
}

std::int64_t StormConn::ReplyI64() const {
  if (input_.size() < 8) Fail("short i64 reply");
  return static_cast<std::int64_t>(store::LoadU64(input_.data()));
}

void StormConn::Fail(const std::string& what) const {
  throw std::runtime_error(what + " (connection " + std::to_string(index_) +
                           "): " + std::strerror(errno));
}

}  // namespace ddprun::bench
