#include "store/tcp_store_server_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace ddprun::store {
namespace {

// Reads beyond small_ (a request that does not fit, or a pipelining client's burst).
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kMaxReadChunk = 4u << 20;
// Above this much queued output the connection stops reading until the client catches up.
constexpr std::size_t kPauseOutputBytes = 1u << 20;

}  // namespace

struct StoreConnection::Handshake {
  Handshake(asio::io_context& io, std::shared_ptr<const AuthKey> key)
      : server(std::move(key), RandomNonce()), deadline(io) {}
  ServerHandshake server;
  asio::steady_timer deadline;
};

StoreConnection::StoreConnection(asio::io_context& io, asio::ip::tcp::socket socket,
                                 const asio::ip::tcp::endpoint& peer, SharedKeys& shared,
                                 const ServerLimits& limits, std::uint64_t id,
                                 std::weak_ptr<ConnectionOwner> owner,
                                 std::shared_ptr<const AuthKey> auth)
    : io_(io),
      socket_(std::move(socket)),
      shared_(shared),
      keys_(shared.keys),
      limits_(limits),
      id_(id),
      owner_(std::move(owner)),
      peer_(peer) {
  if (auth) handshake_ = std::make_unique<Handshake>(io, std::move(auth));
}

StoreConnection::~StoreConnection() = default;

void StoreConnection::Start() {
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // Flush writes directly and must never block
  if (handshake_) {
    handshake_->deadline.expires_after(limits_.auth_timeout);
    handshake_->deadline.async_wait([weak = weak_from_this()](const boost::system::error_code& e) {
      if (auto self = weak.lock(); self && !e) self->OnHandshakeDeadline();
    });
  }
  ReadMore();
}

void StoreConnection::OnHandshakeDeadline() {
  if (closed_ || !handshake_) return;
  Refuse("it did not authenticate within " + std::to_string(limits_.auth_timeout.count()) + " ms",
         {});
}

void StoreConnection::Refuse(const std::string& why, const Bytes& reply) {
  if (closed_) return;
  spdlog::warn("store: refused the connection from {}: {}", PeerName(), why);
  if (!reply.empty()) {
    boost::system::error_code ignored;
    socket_.write_some(asio::buffer(reply), ignored);  // best effort: a few bytes, never blocks
  }
  Close("refused: " + why);
}

// Handshake bytes only; true once more can be processed (the next step, or c10d requests).
bool StoreConnection::Authenticate(std::span<const std::uint8_t> data) {
  ServerHandshake::Step step = handshake_->server.Feed(data);
  Consume(step.consumed);
  switch (step.status) {
    case ServerHandshake::Status::kNeedMore:
      need_ = step.need;
      return false;
    case ServerHandshake::Status::kRefused:
      Refuse(step.refusal, step.reply);
      return false;
    case ServerHandshake::Status::kAccepted:
      handshake_.reset();  // cancels the deadline
      break;
    case ServerHandshake::Status::kAnswered:
      break;
  }
  need_ = 1;
  Reply(step.reply);
  return true;
}

void StoreConnection::Close(const std::string& reason) {
  if (closed_) return;
  auto self = shared_from_this();
  closed_ = true;
  handshake_.reset();
  if (spdlog::should_log(spdlog::level::debug)) {
    spdlog::debug("store: closing connection {}: {}", PeerName(), reason);
  }
  {
    const std::lock_guard lock(shared_.mutex);
    CancelWaits();
    for (const auto id : watches_) keys_.Unwatch(id);
    watches_.clear();
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  output_ = {};
  ReleaseInput();
  if (auto owner = owner_.lock()) owner->OnConnectionClosed(id_);
}

std::string StoreConnection::PeerName() const {
  const auto address = peer_.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(peer_.port());
}

// Asio 1.74's reactor makes this one recv per request: after a short read it does not try the
// next read speculatively but queues it, and queuing a read needs no epoll_ctl (an async_wait
// would re-arm the descriptor with one on every request). So the read stays pending while the
// connection is idle, and its buffer is the connection's small_: 16,000 idle clients cost
// 2 MiB of it instead of a heap buffer each.
void StoreConnection::ReadMore() {
  if (closed_ || reading_ || OutputFull()) return;
  reading_ = true;
  if (input_begin_ == input_end_ && !burst_) {
    ReleaseInput();
    socket_.async_read_some(
        asio::buffer(small_),
        [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
          self->OnSmallRead(error, bytes);
        });
    return;
  }
  CompactInput();
  const std::size_t pending = input_end_ - input_begin_;
  const std::size_t wanted = need_ > pending ? need_ - pending : 0;
  const std::size_t chunk = std::clamp(wanted, kReadChunk, kMaxReadChunk);
  if (input_.size() < input_end_ + chunk) input_.resize(input_end_ + chunk);
  socket_.async_read_some(asio::buffer(input_.data() + input_end_, chunk),
                          [self = shared_from_this(), chunk](const boost::system::error_code& error,
                                                             std::size_t bytes) {
                            self->reading_ = false;
                            if (self->closed_) return;
                            self->input_end_ += bytes;
                            self->burst_ = bytes == chunk;
                            if (bytes > 0) self->Touch();
                            self->OnRead(error);
                          });
}

// Requests are parsed where they landed; only the bytes of an incomplete one move to input_.
void StoreConnection::OnSmallRead(const boost::system::error_code& error, std::size_t bytes) {
  reading_ = false;
  if (closed_) return;
  if (bytes > 0) Touch();
  small_begin_ = 0;
  small_end_ = static_cast<std::uint16_t>(bytes);
  burst_ = bytes == small_.size();
  OnRead(error);
}

void StoreConnection::OnRead(const boost::system::error_code& error) {
  if (error) {
    Close(error == asio::error::eof ? "closed by peer" : error.message());
    return;
  }
  ProcessInput();
  ReadMore();
}

void StoreConnection::ProcessInput() {
  processing_ = true;
  while (!closed_ && ProcessOne()) {
  }
  processing_ = false;
  KeepUnparsed();
  Flush();
}

std::span<const std::uint8_t> StoreConnection::Unparsed() const {
  if (small_begin_ < small_end_) return {small_.data() + small_begin_, small_.data() + small_end_};
  return {input_.data() + input_begin_, input_end_ - input_begin_};
}

void StoreConnection::Consume(std::size_t bytes) {
  if (small_begin_ < small_end_) {
    small_begin_ = static_cast<std::uint16_t>(small_begin_ + bytes);
  } else {
    input_begin_ += bytes;
  }
}

// The next read overwrites small_: what is left of it waits in input_ (which is empty then).
void StoreConnection::KeepUnparsed() {
  if (small_begin_ < small_end_ && !closed_) {
    input_.assign(small_.begin() + small_begin_, small_.begin() + small_end_);
    input_begin_ = 0;
    input_end_ = input_.size();
  }
  small_begin_ = small_end_ = 0;
}

// Moves unparsed bytes to the front; never while a read is filling the buffer.
void StoreConnection::CompactInput() {
  if (input_begin_ == 0) return;
  std::copy(input_.begin() + static_cast<std::ptrdiff_t>(input_begin_),
            input_.begin() + static_cast<std::ptrdiff_t>(input_end_), input_.begin());
  input_end_ -= input_begin_;
  input_begin_ = 0;
}

void StoreConnection::ReleaseInput() {
  Bytes().swap(input_);
  input_begin_ = input_end_ = 0;
}

bool StoreConnection::ProcessOne() {
  if (OutputFull()) {
    Flush();  // a pipelining client: hand the replies so far to the socket and go on if it can
    if (OutputFull()) return false;
  }
  const std::span<const std::uint8_t> data = Unparsed();
  if (data.size() < need_) return false;
  if (handshake_) return Authenticate(data);
  if (!generation_ && IsAuthHello(data)) {
    Refuse(
        "it offered a token, but this store runs without one (give every agent the same "
        "token, or none)",
        Bytes(kNoTokenMarker.begin(), kNoTokenMarker.end()));
    return false;
  }
  if (!generation_) {
    generation_ = DetectGeneration(data);
    if (!generation_) {
      need_ = 5;
      return false;
    }
  }
  ParseResult parsed = ParseRequest(*generation_, data, limits_.Protocol());
  if (parsed.status == ParseStatus::kMalformed) {
    Close(parsed.error);
    return false;
  }
  if (parsed.status == ParseStatus::kNeedMore) {
    need_ = parsed.size;
    return false;
  }
  Consume(parsed.size);
  need_ = 1;
  try {
    const std::lock_guard lock(shared_.mutex);
    Execute(parsed.request);
  } catch (const std::exception& error) {
    Close(std::string(CommandName(parsed.request.command)) + ": " + error.what());
    return false;
  }
  return true;
}

void StoreConnection::Reply(const Bytes& bytes) {
  if (closed_) return;
  if (output_.size() + in_flight_.size() + bytes.size() > limits_.max_output_bytes) {
    Close("the client does not read its replies (output limit reached)");
    return;
  }
  output_.insert(output_.end(), bytes.begin(), bytes.end());
  if (!processing_) Flush();
}

// Replies usually fit in the socket buffer: they are written at once (one send, no completion
// handler), and only what the kernel did not take waits for writability.
void StoreConnection::Flush() {
  if (closed_ || write_active_ || output_.empty()) return;
  Touch();
  boost::system::error_code error;
  const std::size_t written = socket_.write_some(asio::buffer(output_), error);
  if (error && error != asio::error::would_block && error != asio::error::try_again) {
    Close("write failed: " + error.message());
    return;
  }
  if (written == output_.size()) {
    Bytes().swap(output_);  // an idle connection keeps no reply storage
    return;
  }
  in_flight_.assign(output_.begin() + static_cast<std::ptrdiff_t>(written), output_.end());
  output_.clear();
  write_active_ = true;
  asio::async_write(socket_, asio::buffer(in_flight_),
                    [self = shared_from_this()](const boost::system::error_code& error,
                                                std::size_t /*bytes*/) { self->OnWritten(error); });
}

void StoreConnection::OnWritten(const boost::system::error_code& error) {
  write_active_ = false;
  Bytes().swap(in_flight_);
  if (closed_) return;
  if (error) {
    Close("write failed: " + error.message());
    return;
  }
  Flush();
  if (!OutputFull()) {
    ProcessInput();  // requests held back while the output was full
    ReadMore();
  }
}

bool StoreConnection::OutputFull() const { return output_.size() >= kPauseOutputBytes; }

void StoreConnection::OnOwnThread(std::function<void()> fn) {
  if (io_.get_executor().running_in_this_thread()) {
    fn();
  } else {
    asio::post(io_, std::move(fn));
  }
}

void StoreConnection::Touch() {
  last_activity_.store(std::chrono::steady_clock::now(), std::memory_order_relaxed);
}

}  // namespace ddprun::store
