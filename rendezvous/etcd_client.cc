#include "rendezvous/etcd_client.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include <algorithm>
#include <functional>

#include "common/asio.h"

namespace ddprun::rendezvous::etcd {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxReplyBytes = 64u << 20;
constexpr std::size_t kMaxWatchLineBytes = 64u << 20;

// One member failed this request: the client tries the next.
class MemberError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string Seconds(std::chrono::milliseconds duration) {
  return std::to_string(duration.count() / 1000.0).substr(0, 4) + " s";
}

std::string Problem(const boost::system::error_code& error, std::chrono::milliseconds timeout) {
  if (error == beast::error::timeout) return "no answer within " + Seconds(timeout);
  if (error.category() == http::make_error_code(http::error::bad_version).category()) {
    return "not an HTTP server (" + error.message() + "): is it an etcd client URL?";
  }
  return error.message();
}

// Runs `io` until the operation `start` begins completes; nullopt when `io` was stopped first
// (Interrupt).
template <typename Start>
std::optional<boost::system::error_code> RunOne(asio::io_context& io, Start start) {
  std::optional<boost::system::error_code> result;
  start([&result](const boost::system::error_code& error, auto&&...) { result = error; });
  io.restart();
  io.run();
  return result;
}

// Connects `stream` to the first address of `at` that answers within `timeout`.
void ConnectTo(asio::io_context& io, beast::tcp_stream& stream, const HostPort& at,
               std::chrono::milliseconds timeout) {
  tcp::resolver resolver(io);
  boost::system::error_code error;
  const auto addresses = resolver.resolve(at.host, std::to_string(at.port.value_or(2379)), error);
  if (error) throw MemberError("cannot resolve " + at.host + ": " + error.message());
  stream.expires_after(timeout);
  const auto done = RunOne(io, [&](auto handler) { stream.async_connect(addresses, handler); });
  if (!done) throw MemberError("interrupted");
  if (*done) throw MemberError(Problem(*done, timeout));
}

http::request<http::string_body> Post(const HostPort& at, const std::string& path,
                                      std::string body, bool keep_alive) {
  http::request<http::string_body> request{http::verb::post, path, 11};
  request.set(http::field::host, at.ToString());
  request.set(http::field::content_type, "application/json");
  request.body() = std::move(body);
  request.keep_alive(keep_alive);
  request.prepare_payload();
  return request;
}

// An etcd reply: JSON; 5xx means this member cannot serve now (no leader, shutting down).
json ReplyJson(const http::response<http::string_body>& response) {
  json reply = json::parse(response.body(), nullptr, false);
  if (reply.is_discarded() || !reply.is_object()) {
    throw MemberError("HTTP " + std::to_string(response.result_int()) +
                      " with a body that is not etcd's JSON: is it an etcd client URL?");
  }
  if (response.result_int() >= 500) {
    throw MemberError("HTTP " + std::to_string(response.result_int()) + ": " +
                      reply.value("message", reply.value("error", std::string("unavailable"))));
  }
  return reply;
}

}  // namespace

// One kept-alive connection to one member.
class EtcdClient::Connection {
 public:
  Connection(std::size_t member, const HostPort& at, std::chrono::milliseconds timeout)
      : member_(member), at_(at), timeout_(timeout), stream_(io_) {
    ConnectTo(io_, stream_, at_, timeout_);
  }
  std::size_t Member() const { return member_; }
  asio::io_context& Io() { return io_; }
  bool Reused() const { return calls_ > 0; }

  json Call(const std::string& path, const std::string& body) {
    ++calls_;
    auto request = Post(at_, path, body, true);
    stream_.expires_after(timeout_);
    auto done = RunOne(io_, [&](auto handler) { http::async_write(stream_, request, handler); });
    if (!done) throw MemberError("interrupted");
    if (*done) throw MemberError(Problem(*done, timeout_));
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxReplyBytes);
    stream_.expires_after(timeout_);
    done = RunOne(io_, [&](auto handler) { http::async_read(stream_, buffer_, parser, handler); });
    if (!done) throw MemberError("interrupted");
    if (*done) throw MemberError(Problem(*done, timeout_));
    return ReplyJson(parser.get());
  }

 private:
  std::size_t member_;
  HostPort at_;
  std::chrono::milliseconds timeout_;
  asio::io_context io_{kOneThread};
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  int calls_ = 0;
};

EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {
  if (options_.endpoints.empty()) throw std::invalid_argument("an etcd client without endpoints");
}

EtcdClient::~EtcdClient() = default;

json EtcdClient::Call(const std::string& path, const json& body) {
  const std::string text = body.dump();
  std::lock_guard lock(mutex_);
  std::string problems;
  const std::size_t members = options_.endpoints.size();
  for (std::size_t i = 0; i < members; ++i) {
    const std::size_t member = (current_ + i) % members;
    if (interrupted_) throw EtcdUnavailable("etcd: interrupted");
    try {
      json reply = CallMember(member, path, text);
      current_ = member;
      return reply;
    } catch (const MemberError& error) {
      std::lock_guard io_lock(io_mutex_);
      connection_.reset();
      problems += (problems.empty() ? "" : "; ") + options_.endpoints[member].ToString() + ": " +
                  error.what();
    }
  }
  throw EtcdUnavailable("etcd: no member answered " + path + ": " + problems);
}

// A kept-alive connection the member closed meanwhile fails once: it is retried on a new one.
json EtcdClient::CallMember(std::size_t member, const std::string& path, const std::string& body) {
  for (int attempt = 0;; ++attempt) {
    if (!connection_ || connection_->Member() != member) {
      auto fresh = std::make_unique<Connection>(member, options_.endpoints[member],
                                                options_.timeout);
      std::lock_guard io_lock(io_mutex_);
      connection_ = std::move(fresh);
      if (interrupted_) connection_->Io().stop();
    }
    try {
      return connection_->Call(path, body);
    } catch (const MemberError&) {
      if (attempt > 0 || !connection_->Reused() || interrupted_) throw;
      std::lock_guard io_lock(io_mutex_);
      connection_.reset();
    }
  }
}

void EtcdClient::Interrupt() {
  interrupted_ = true;
  std::lock_guard io_lock(io_mutex_);
  if (connection_) connection_->Io().stop();
}

HostPort EtcdClient::Current() const {
  std::lock_guard lock(mutex_);
  return options_.endpoints[current_];
}

// --- watch ------------------------------------------------------------------------------------

class EtcdWatch::Stream {
 public:
  Stream(const HostPort& at, std::chrono::milliseconds timeout, const std::string& body)
      : at_(at), stream_(io_) {
    ConnectTo(io_, stream_, at_, timeout);
    auto request = Post(at_, "/v3/watch", body, true);
    stream_.expires_after(timeout);
    auto done = RunOne(io_, [&](auto handler) { http::async_write(stream_, request, handler); });
    if (!done || *done) throw MemberError(done ? Problem(*done, timeout) : "interrupted");
    done = RunOne(io_, [&](auto handler) { http::async_read_header(stream_, buffer_, parser_, handler); });
    if (!done || *done) throw MemberError(done ? Problem(*done, timeout) : "interrupted");
    if (parser_.get().result_int() != 200 || !parser_.chunked()) {
      throw MemberError("HTTP " + std::to_string(parser_.get().result_int()) +
                        " to /v3/watch, not a stream: is it an etcd client URL?");
    }
    stream_.expires_never();  // a watch is idle as long as nothing changes
    parser_.body_limit(boost::none);
    parser_.on_chunk_body(on_chunk_);
  }

  void Interrupt() {
    interrupted_ = true;
    io_.stop();
  }

  std::optional<WatchMessage> Next(Clock::time_point deadline) {
    for (;;) {
      if (auto line = PopLine()) {
        json message = json::parse(*line, nullptr, false);
        if (message.is_discarded()) throw EtcdProtocolError("a watch line that is not JSON");
        return ParseWatch(message);
      }
      if (pending_.size() > kMaxWatchLineBytes) throw EtcdProtocolError("a watch line over 64 MiB");
      if (failed_) {
        throw EtcdUnavailable("etcd: the watch on " + at_.ToString() + " ended: " +
                              failed_->message());
      }
      if (!reading_) {
        reading_ = true;
        http::async_read_some(stream_, buffer_, parser_,
                              [this](const boost::system::error_code& error, std::size_t) {
                                reading_ = false;
                                if (error) failed_ = error;
                                else if (parser_.is_done()) failed_ = http::error::end_of_stream;
                              });
      }
      io_.restart();
      if (!interrupted_) io_.run_until(deadline);
      if (reading_) {
        if (interrupted_) {
          throw EtcdUnavailable("etcd: the watch on " + at_.ToString() + " was interrupted");
        }
        return std::nullopt;  // the deadline came first; the read stays pending
      }
    }
  }

 private:
  std::optional<std::string> PopLine() {
    const auto end = pending_.find('\n');
    if (end == std::string::npos) return std::nullopt;
    std::string line = pending_.substr(0, end);
    pending_.erase(0, end + 1);
    if (line.find_first_not_of(" \r\t") == std::string::npos) return PopLine();
    return line;
  }

  HostPort at_;
  asio::io_context io_{kOneThread};
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::string pending_;
  // The parser holds it by reference: declared before it, so it outlives it.
  std::function<std::size_t(std::uint64_t, beast::string_view, boost::system::error_code&)>
      on_chunk_ = [this](std::uint64_t, beast::string_view data, boost::system::error_code&) {
        pending_.append(data.data(), data.size());
        return data.size();
      };
  http::response_parser<http::empty_body> parser_;
  bool reading_ = false;
  std::optional<boost::system::error_code> failed_;
  std::atomic<bool> interrupted_{false};
};

EtcdWatch::EtcdWatch(const EtcdClientOptions& options, const json& create_body) {
  const std::string body = create_body.dump();
  std::string problems;
  for (const HostPort& at : options.endpoints) {
    try {
      stream_ = std::make_unique<Stream>(at, options.timeout, body);
      return;
    } catch (const MemberError& error) {
      problems += (problems.empty() ? "" : "; ") + at.ToString() + ": " + error.what();
    }
  }
  throw EtcdUnavailable("etcd: no member accepted a watch: " + problems);
}

EtcdWatch::~EtcdWatch() = default;

std::optional<WatchMessage> EtcdWatch::Next(Clock::time_point deadline) {
  return stream_->Next(deadline);
}

void EtcdWatch::Interrupt() { stream_->Interrupt(); }

}  // namespace ddprun::rendezvous::etcd
