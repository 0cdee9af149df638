#include "store/tcp_store_client.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include "common/host_port.h"

namespace ddprun::store {
namespace {

using Clock = std::chrono::steady_clock;

// The deadline passed while a reply was awaited: the peer is unreachable or stuck (a store
// answers every request at once; only WAIT blocks, and it is cancelled), so this is a broken
// connection, and the reply stream is out of step afterwards.
class ReplyTimeout : public StoreConnectionError {
 public:
  using StoreConnectionError::StoreConnectionError;
};

// A legacy server's WAIT cannot be cancelled: its timeout leaves the connection out of step.
class LegacyWaitTimeout : public StoreTimeout {
 public:
  using StoreTimeout::StoreTimeout;
};

// One connect attempt failed in a way worth retrying.
class ConnectFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::clamp<std::int64_t>(left.count(), 0, 1 << 30));
}

// Polls `fd` for `events` until the deadline; false on timeout.
bool PollUntil(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, RemainingMs(deadline));
    if (ready > 0) return true;
    if (ready == 0) return false;
    if (errno != EINTR) throw StoreConnectionError(std::string("poll: ") + std::strerror(errno));
  }
}

std::string Endpoint(const ClientOptions& options) {
  return HostPort{options.host, options.port}.ToString();
}

// Exponential backoff with ±50% jitter, so that many clients restarting together spread out.
class Backoff {
 public:
  std::chrono::milliseconds Next() {
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    const auto delay =
        std::chrono::milliseconds(static_cast<std::int64_t>(current_ * jitter(rng_)));
    current_ = std::min(current_ * 1.5, 1000.0);
    return delay;
  }

 private:
  double current_ = 50.0;
  std::mt19937 rng_{std::random_device{}()};
};

}  // namespace

class TcpStoreClient::Socket {
 public:
  Socket(int fd, std::string peer) : fd_(fd), peer_(std::move(peer)) {}
  void SetPeer(std::string peer) { peer_ = std::move(peer); }
  int Fd() const { return fd_; }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  static std::unique_ptr<Socket> Connect(const ClientOptions& options, Clock::time_point deadline) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* results = nullptr;
    const int rc =
        ::getaddrinfo(options.host.c_str(), std::to_string(options.port).c_str(), &hints, &results);
    if (rc != 0) throw ConnectFailure(std::string("resolve: ") + ::gai_strerror(rc));
    std::string last_error = "no address";
    std::unique_ptr<Socket> socket;
    for (addrinfo* ai = results; ai != nullptr && !socket; ai = ai->ai_next) {
      socket = TryAddress(*ai, deadline, last_error);
    }
    ::freeaddrinfo(results);
    if (!socket) throw ConnectFailure(last_error);
    return socket;
  }

  void SendAll(const Bytes& bytes, Clock::time_point deadline) {
    std::size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n > 0) {
        sent += static_cast<std::size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!PollUntil(fd_, POLLOUT, deadline))
          throw ReplyTimeout("send to " + peer_ + " timed out");
      } else {
        throw StoreConnectionError("send to " + peer_ + ": " + std::strerror(errno));
      }
    }
  }

  // Replies are read through a buffer: one poll and one recv usually bring a whole reply (a
  // request costs send + poll + recv), instead of one recv per field and a failed one first.
  void RecvExact(std::uint8_t* out, std::size_t size, Clock::time_point deadline) {
    std::size_t got = TakeBuffered(out, size);
    while (got < size) {
      if (!PollUntil(fd_, POLLIN, deadline)) throw ReplyTimeout("no reply from " + peer_);
      const std::size_t wanted = size - got;
      const bool direct = wanted >= kReceiveBuffer;  // large values skip the copy
      const ssize_t n = direct ? ::recv(fd_, out + got, wanted, 0)
                               : ::recv(fd_, buffer_.data(), buffer_.size(), 0);
      if (n > 0) {
        if (direct) {
          got += static_cast<std::size_t>(n);
        } else {
          buffered_begin_ = 0;
          buffered_end_ = static_cast<std::size_t>(n);
          got += TakeBuffered(out + got, wanted);
        }
      } else if (n == 0) {
        throw StoreConnectionError("connection to the store at " + peer_ + " closed by the peer");
      } else if (errno != EAGAIN && errno != EINTR) {
        throw StoreConnectionError("recv from " + peer_ + ": " + std::strerror(errno));
      }
    }
  }

  std::uint8_t ReadU8(Clock::time_point deadline) {
    std::uint8_t value = 0;
    RecvExact(&value, 1, deadline);
    return value;
  }
  std::uint32_t ReadU32(Clock::time_point deadline) {
    std::uint8_t raw[4];
    RecvExact(raw, 4, deadline);
    return LoadU32(raw);
  }
  std::int64_t ReadI64(Clock::time_point deadline) {
    std::uint8_t raw[8];
    RecvExact(raw, 8, deadline);
    return static_cast<std::int64_t>(LoadU64(raw));
  }
  Bytes ReadBytes(std::size_t max_size, Clock::time_point deadline) {
    const auto size = static_cast<std::uint64_t>(ReadI64(deadline));
    if (size > max_size) {
      throw StoreConnectionError("the peer at " + peer_ + " announced a reply of " +
                                 std::to_string(size) + " bytes: is it a c10d store?");
    }
    Bytes value(static_cast<std::size_t>(size));
    RecvExact(value.data(), value.size(), deadline);
    return value;
  }

 private:
  static std::unique_ptr<Socket> TryAddress(const addrinfo& ai, Clock::time_point deadline,
                                            std::string& error) {
    const int fd = ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      error = std::string("socket: ") + std::strerror(errno);
      return nullptr;
    }
    auto socket = std::make_unique<Socket>(fd, "");
    if (::connect(fd, ai.ai_addr, ai.ai_addrlen) != 0 && errno != EINPROGRESS) {
      error = std::string("connect: ") + std::strerror(errno);
      return nullptr;
    }
    if (!PollUntil(fd, POLLOUT, deadline)) {
      error = "connect: timed out";
      return nullptr;
    }
    int so_error = 0;
    socklen_t length = sizeof(so_error);
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &length);
    if (so_error != 0) {
      error = std::string("connect: ") + std::strerror(so_error);
      return nullptr;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return socket;
  }

  // Copies up to `size` already received bytes to `out`; returns how many.
  std::size_t TakeBuffered(std::uint8_t* out, std::size_t size) {
    const std::size_t n = std::min(size, buffered_end_ - buffered_begin_);
    if (n > 0) std::memcpy(out, buffer_.data() + buffered_begin_, n);
    buffered_begin_ += n;
    return n;
  }

  static constexpr std::size_t kReceiveBuffer = 16 * 1024;
  int fd_;
  std::string peer_;
  std::vector<std::uint8_t> buffer_ = std::vector<std::uint8_t>(kReceiveBuffer);
  std::size_t buffered_begin_ = 0;
  std::size_t buffered_end_ = 0;
};

TcpStoreClient::TcpStoreClient(ClientOptions options) : options_(std::move(options)) {
  timeout_ = options_.timeout;
  Connect();
  if (options_.count_as_worker) {
    Request add{Command::kAdd, {"init/"}, {}, 1, 0};
    Send(add);
    socket_->ReadI64(Clock::now() + timeout_);
  }
}

TcpStoreClient::~TcpStoreClient() = default;

void TcpStoreClient::Connect() {
  if (options_.auth && options_.generation != Generation::kValidated) {
    throw std::invalid_argument("an authenticated store client speaks the validated protocol");
  }
  const auto deadline = Clock::now() + options_.connect_timeout;
  Backoff backoff;
  std::string last_error;
  bool reached_peer = false;  // the last attempt connected but failed the handshake
  for (;;) {
    reached_peer = false;
    try {
      auto socket = Socket::Connect(options_, deadline);
      socket->SetPeer(Endpoint(options_));
      reached_peer = true;
      Handshake(*socket, deadline);
      SetSocket(std::move(socket));
      return;
    } catch (const StoreAuthError&) {
      throw;
    } catch (const std::exception& error) {  // ConnectFailure, reset, EOF or handshake timeout
      last_error = error.what();
    }
    const auto delay = backoff.Next();
    if (Clock::now() + delay >= deadline || interrupted_) break;
    SleepUnlessInterrupted(std::chrono::duration_cast<std::chrono::milliseconds>(delay));
  }
  std::string hint;
  if (options_.generation == Generation::kValidated && reached_peer) {
    hint = options_.auth ? " (was its agent started with the job's token?)"
                         : " (a PyTorch <= 2.0 store needs the legacy protocol)";
  }
  throw StoreConnectionError("cannot reach the store at " + Endpoint(options_) + ": " + last_error +
                             hint);
}

// Authentication (with a token), then VALIDATE and PING in one write: a legacy server then fails
// fast instead of blocking. A store that requires a token answers the PING with its marker.
void TcpStoreClient::Handshake(Socket& socket, Clock::time_point deadline) {
  if (options_.generation != Generation::kValidated) return;
  if (options_.auth) Authenticate(socket, deadline);
  const auto nonce = static_cast<std::uint32_t>(::getpid());
  Bytes hello =
      EncodeRequest(Generation::kValidated, {Command::kValidate, {}, {}, 0, kValidationMagic});
  const Bytes ping = EncodeRequest(Generation::kValidated, {Command::kPing, {}, {}, 0, nonce});
  hello.insert(hello.end(), ping.begin(), ping.end());
  socket.SendAll(hello, deadline);
  if (options_.auth) {
    const std::uint8_t verdict = socket.ReadU8(deadline);
    if (verdict != kAccepted) {
      throw StoreAuthError("the store at " + Endpoint(options_) +
                           " refused this node's token: give every node of the job the same one");
    }
  }
  const std::uint32_t echo = socket.ReadU32(deadline);
  if (echo == LoadU32(kAuthRequiredMarker.data())) {
    throw StoreAuthError("the store at " + Endpoint(options_) +
                         " requires a token: give this node the job's token (--rdzv_conf "
                         "token_file=PATH, or DDPRUN_RDZV_TOKEN_FILE / DDPRUN_RDZV_TOKEN)");
  }
  if (echo != nonce) throw ConnectFailure("wrong PING echo");
}

// HELLO, then the server must prove it holds the token before this client proves it does.
void TcpStoreClient::Authenticate(Socket& socket, Clock::time_point deadline) {
  const Nonce mine = RandomNonce();
  socket.SendAll(EncodeHello(mine), deadline);
  std::array<std::uint8_t, kChallengeBytes> received{};
  socket.RecvExact(received.data(), kNoTokenMarker.size(), deadline);
  if (std::equal(kNoTokenMarker.begin(), kNoTokenMarker.end(), received.begin())) {
    throw StoreAuthError("the store at " + Endpoint(options_) +
                         " runs without a token while this node has one: give every node of the "
                         "job the same token, or none");
  }
  socket.RecvExact(received.data() + kNoTokenMarker.size(), received.size() - kNoTokenMarker.size(),
                   deadline);
  const auto challenge = ParseChallenge(received);
  if (!challenge) {
    throw StoreAuthError("the peer at " + Endpoint(options_) +
                         " answered the authentication with something else: is it a ddprun store?");
  }
  if (!SameProof(options_.auth->Prove(kServerRole, mine, challenge->server), challenge->proof)) {
    throw StoreAuthError("the store at " + Endpoint(options_) +
                         " does not hold this node's token (another job's store, or another "
                         "token): give every node of the job the same one");
  }
  const Proof proof = options_.auth->Prove(kClientRole, mine, challenge->server);
  socket.SendAll(Bytes(proof.begin(), proof.end()), deadline);
}

TcpStoreClient::Socket& TcpStoreClient::Connected() {
  if (interrupted_) throw StoreConnectionError("the store connection was interrupted");
  if (!socket_) Connect();
  return *socket_;
}

void TcpStoreClient::SetSocket(std::unique_ptr<Socket> socket) {
  std::lock_guard lock(interrupt_mutex_);
  fd_ = socket ? socket->Fd() : -1;
  socket_ = std::move(socket);
  if (interrupted_ && fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void TcpStoreClient::SleepUnlessInterrupted(std::chrono::milliseconds delay) {
  retry_pause_.Pause(delay);
}

void TcpStoreClient::Interrupt() {
  {
    std::lock_guard lock(interrupt_mutex_);
    interrupted_ = true;
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
  }
  retry_pause_.Cancel();
}

// Runs `fn` under the mutex; a broken or out-of-step connection is dropped (and reopened by the
// next call) before the error propagates.
template <typename Fn>
auto TcpStoreClient::Locked(Fn fn) {
  std::lock_guard lock(mutex_);
  try {
    return fn();
  } catch (const LegacyWaitTimeout&) {
    SetSocket(nullptr);
    throw;
  } catch (const StoreConnectionError&) {
    SetSocket(nullptr);
    throw;
  }
}

void TcpStoreClient::Send(const Request& request) {
  Connected().SendAll(EncodeRequest(options_.generation, request), Clock::now() + timeout_);
}

Request TcpStoreClient::Command1(Command command, const std::string& key) const {
  return Request{command, {options_.key_prefix + key}, {}, 0, 0};
}

std::vector<std::string> TcpStoreClient::Prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> prefixed;
  prefixed.reserve(keys.size());
  for (const auto& key : keys) prefixed.push_back(options_.key_prefix + key);
  return prefixed;
}

void TcpStoreClient::Set(const std::string& key, const Bytes& value) {
  Locked([&] {
    Request request = Command1(Command::kSet, key);
    request.values.push_back(value);
    Send(request);
  });
}

Bytes TcpStoreClient::Get(const std::string& key) {
  return Locked([&] {
    WaitLocked({key}, timeout_);
    Send(Command1(Command::kGet, key));
    return socket_->ReadBytes(options_.max_reply_bytes, Clock::now() + timeout_);
  });
}

std::int64_t TcpStoreClient::Add(const std::string& key, std::int64_t delta) {
  return Locked([&] {
    Request request = Command1(Command::kAdd, key);
    request.number = delta;
    Send(request);
    return socket_->ReadI64(Clock::now() + timeout_);
  });
}

Bytes TcpStoreClient::CompareSet(const std::string& key, const Bytes& expected,
                                 const Bytes& desired) {
  return Locked([&] {
    Request request = Command1(Command::kCompareSet, key);
    request.values = {expected, desired};
    Send(request);
    return socket_->ReadBytes(options_.max_reply_bytes, Clock::now() + timeout_);
  });
}

bool TcpStoreClient::Check(const std::vector<std::string>& keys) {
  return Locked([&] {
    Send(Request{Command::kCheck, Prefixed(keys), {}, 0, 0});
    return socket_->ReadU8(Clock::now() + timeout_) ==
           static_cast<std::uint8_t>(CheckResponse::kReady);
  });
}

void TcpStoreClient::Wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  Locked([&] { WaitLocked(keys, timeout); });
}

void TcpStoreClient::WaitLocked(const std::vector<std::string>& keys,
                                std::chrono::milliseconds timeout) {
  Send(Request{Command::kWait, Prefixed(keys), {}, 0, 0});
  std::uint8_t reply = 0;
  try {
    reply = socket_->ReadU8(Clock::now() + timeout);
  } catch (const ReplyTimeout&) {
    // Legacy servers cannot cancel: Locked() drops the connection, the stale STOP_WAITING with it.
    if (options_.generation == Generation::kLegacy) {
      throw LegacyWaitTimeout(WaitTimeoutMessage(keys, timeout));
    }
    Send(Request{Command::kCancelWait, {}, {}, 0, 0});
    const auto deadline = Clock::now() + timeout_;
    reply = socket_->ReadU8(deadline);
    if (reply == static_cast<std::uint8_t>(WaitResponse::kStopWaiting)) {
      reply = socket_->ReadU8(deadline);
    }
    if (reply != static_cast<std::uint8_t>(WaitResponse::kWaitCanceled)) {
      throw StoreConnectionError("unexpected reply to CANCEL_WAIT");
    }
    throw StoreTimeout(WaitTimeoutMessage(keys, timeout));
  }
  if (reply != static_cast<std::uint8_t>(WaitResponse::kStopWaiting)) {
    throw StoreConnectionError("unexpected reply to WAIT: " + std::to_string(reply));
  }
}

bool TcpStoreClient::DeleteKey(const std::string& key) {
  return Locked([&] {
    Send(Command1(Command::kDeleteKey, key));
    return socket_->ReadI64(Clock::now() + timeout_) == 1;
  });
}

std::int64_t TcpStoreClient::NumKeys() {
  return Locked([&] {
    Send(Request{Command::kNumKeys, {}, {}, 0, 0});
    return socket_->ReadI64(Clock::now() + timeout_);
  });
}

std::vector<Bytes> TcpStoreClient::MultiGet(const std::vector<std::string>& keys) {
  if (options_.generation == Generation::kLegacy) return Store::MultiGet(keys);
  return Locked([&] {
    WaitLocked(keys, timeout_);
    Send(Request{Command::kMultiGet, Prefixed(keys), {}, 0, 0});
    std::vector<Bytes> values;
    const auto deadline = Clock::now() + timeout_;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      values.push_back(socket_->ReadBytes(options_.max_reply_bytes, deadline));
    }
    return values;
  });
}

void TcpStoreClient::MultiSet(const std::vector<std::string>& keys,
                              const std::vector<Bytes>& values) {
  if (keys.size() != values.size()) throw std::invalid_argument("MultiSet: keys/values differ");
  if (options_.generation == Generation::kLegacy) return Store::MultiSet(keys, values);
  Locked([&] { Send(Request{Command::kMultiSet, Prefixed(keys), values, 0, 0}); });
}

void TcpStoreClient::Append(const std::string& key, const Bytes& value) {
  if (options_.generation == Generation::kLegacy) return Store::Append(key, value);
  Locked([&] {
    Request request = Command1(Command::kAppend, key);
    request.values.push_back(value);
    Send(request);
  });
}

std::uint32_t TcpStoreClient::Ping(std::uint32_t nonce) {
  return Locked([&] {
    Send(Request{Command::kPing, {}, {}, 0, nonce});
    return socket_->ReadU32(Clock::now() + timeout_);
  });
}

void TcpStoreClient::QueuePush(const std::string& queue, const Bytes& item) {
  Locked([&] {
    Request request = Command1(Command::kQueuePush, queue);
    request.values.push_back(item);
    Send(request);
  });
}

std::optional<Bytes> TcpStoreClient::QueuePop(const std::string& queue) {
  return Locked([&]() -> std::optional<Bytes> {
    Send(Command1(Command::kQueuePop, queue));
    const auto deadline = Clock::now() + timeout_;
    if (socket_->ReadI64(deadline) <= 0) return std::nullopt;
    return socket_->ReadBytes(options_.max_reply_bytes, deadline);
  });
}

std::int64_t TcpStoreClient::QueueLen(const std::string& queue) {
  return Locked([&] {
    Send(Command1(Command::kQueueLen, queue));
    return socket_->ReadI64(Clock::now() + timeout_);
  });
}

}  // namespace ddprun::store
