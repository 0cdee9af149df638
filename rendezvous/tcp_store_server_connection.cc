#include "rendezvous/tcp_store_server_connection.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

namespace ddprun::rendezvous {
namespace {

constexpr std::size_t kReadChunk = 32 * 1024;
constexpr std::size_t kMaxReadChunk = 4u << 20;
// Above this much queued output the connection stops reading until the client catches up.
constexpr std::size_t kPauseOutputBytes = 1u << 20;

std::string PeerName(const asio::ip::tcp::socket& socket) {
  boost::system::error_code error;
  const auto endpoint = socket.remote_endpoint(error);
  if (error) return "unknown peer";
  const auto address = endpoint.address();
  const std::string host = address.is_v6() ? "[" + address.to_string() + "]" : address.to_string();
  return host + ":" + std::to_string(endpoint.port());
}

}  // namespace

StoreConnection::StoreConnection(asio::io_context& io, asio::ip::tcp::socket socket,
                                 SharedKeys& shared, const ServerLimits& limits, std::uint64_t id,
                                 ClosedCallback on_closed)
    : io_(io),
      socket_(std::move(socket)),
      shared_(shared),
      keys_(shared.keys),
      limits_(limits),
      protocol_limits_(limits.Protocol()),
      id_(id),
      on_closed_(std::move(on_closed)),
      peer_(PeerName(socket_)) {}

void StoreConnection::Start() {
  boost::system::error_code ignored;
  socket_.non_blocking(true, ignored);  // Flush writes directly and must never block
  ReadMore();
}

void StoreConnection::Close(const std::string& reason) {
  if (closed_) return;
  auto self = shared_from_this();
  closed_ = true;
  spdlog::debug("store: closing connection {}: {}", peer_, reason);
  {
    const std::lock_guard lock(shared_.mutex);
    CancelWaits();
    for (const auto id : watches_) keys_.Unwatch(id);
    watches_.clear();
  }
  boost::system::error_code ignored;
  socket_.close(ignored);
  output_ = {};
  if (on_closed_) on_closed_(id_);
}

// Asio 1.74's reactor makes this one recv per request: after a short read it does not try the
// next read speculatively but queues it, and queuing a read needs no epoll_ctl (an async_wait
// would re-arm the descriptor with one on every request).
void StoreConnection::ReadMore() {
  if (closed_ || reading_ || OutputFull()) return;
  CompactInput();
  const std::size_t pending = input_end_ - input_begin_;
  const std::size_t wanted = need_ > pending ? need_ - pending : 0;
  const std::size_t chunk = std::clamp(wanted, kReadChunk, kMaxReadChunk);
  if (input_.size() < input_end_ + chunk) input_.resize(input_end_ + chunk);
  reading_ = true;
  socket_.async_read_some(
      asio::buffer(input_.data() + input_end_, chunk),
      [self = shared_from_this()](const boost::system::error_code& error, std::size_t bytes) {
        self->reading_ = false;
        if (self->closed_) return;
        self->input_end_ += bytes;
        if (bytes > 0) self->Touch();
        self->OnRead(error, bytes);
      });
}

void StoreConnection::OnRead(const boost::system::error_code& error, std::size_t /*bytes*/) {
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
  Flush();
}

// Moves unparsed bytes to the front; never while a read is filling the buffer.
void StoreConnection::CompactInput() {
  if (reading_ || input_begin_ == 0) return;
  std::copy(input_.begin() + static_cast<std::ptrdiff_t>(input_begin_),
            input_.begin() + static_cast<std::ptrdiff_t>(input_end_), input_.begin());
  input_end_ -= input_begin_;
  input_begin_ = 0;
  if (input_end_ == 0 && input_.size() > 4 * kReadChunk) input_ = Bytes();
}

bool StoreConnection::ProcessOne() {
  if (OutputFull()) {
    Flush();  // a pipelining client: hand the replies so far to the socket and go on if it can
    if (OutputFull()) return false;
  }
  const std::span<const std::uint8_t> data(input_.data() + input_begin_,
                                           input_end_ - input_begin_);
  if (data.size() < need_) return false;
  if (!generation_) {
    generation_ = DetectGeneration(data);
    if (!generation_) {
      need_ = 5;
      return false;
    }
  }
  ParseResult parsed = ParseRequest(*generation_, data, protocol_limits_);
  if (parsed.status == ParseStatus::kMalformed) {
    Close(parsed.error);
    return false;
  }
  if (parsed.status == ParseStatus::kNeedMore) {
    need_ = parsed.size;
    return false;
  }
  input_begin_ += parsed.size;
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
    output_.clear();
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
  in_flight_.clear();
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

}  // namespace ddprun::rendezvous
