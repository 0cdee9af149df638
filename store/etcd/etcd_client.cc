#include "store/etcd/etcd_client.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <cstring>
#include <functional>
#include <variant>

#include "common/asio.h"
#include "common/duration.h"
#include "common/errors.h"

namespace ddprun::store::etcd {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr std::size_t kMaxReplyBytes = 64u << 20;
constexpr std::size_t kMaxWatchLineBytes = 64u << 20;

using MemberError = EtcdMemberError;

std::string Problem(const boost::system::error_code& error, std::chrono::milliseconds timeout) {
  if (error == beast::error::timeout) return "no answer within " + DurationText(timeout, 2);
  if (error.category() == http::make_error_code(http::error::bad_version).category()) {
    return "not an HTTP server (" + error.message() + "): is it an etcd client URL?";
  }
  return error.message();
}

// Runs `io` until the operation `start` begins completes; nullopt when `io` was stopped first
// or `interrupted` was set (Interrupt sets it, then stops `io`: one or the other ends the run).
template <typename Start>
std::optional<boost::system::error_code> RunOne(asio::io_context& io,
                                                const std::atomic<bool>& interrupted, Start start) {
  std::optional<boost::system::error_code> result;
  start([&result](const boost::system::error_code& error, auto&&...) { result = error; });
  io.restart();
  if (!interrupted) io.run();
  return result;
}

// Connects `stream` to the first address of `at` that answers within `timeout`.
void ConnectTo(asio::io_context& io, const std::atomic<bool>& interrupted,
               beast::tcp_stream& stream, const HostPort& at, std::chrono::milliseconds timeout) {
  tcp::resolver resolver(io);
  boost::system::error_code error;
  const auto addresses =
      resolver.resolve(at.host, std::to_string(at.port.value_or(kDefaultEtcdPort)), error);
  if (error) throw MemberError("cannot resolve " + at.host + ": " + error.message());
  stream.expires_after(timeout);
  const auto done =
      RunOne(io, interrupted, [&](auto handler) { stream.async_connect(addresses, handler); });
  if (!done) throw MemberError("interrupted");
  if (*done) throw MemberError(Problem(*done, timeout), *done == beast::error::timeout);
}

http::request<http::string_body> Post(const HostPort& at, const std::string& path, std::string body,
                                      bool keep_alive) {
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
  if (response.result_int() == 400 &&
      response.body().find("an HTTP request to an HTTPS server") != std::string::npos) {
    throw MemberError(  // Go's TLS servers answer a plain request so; etcd's just close
        "it speaks TLS (HTTP 400: Client sent an HTTP request to an HTTPS server): use "
        "--rdzv_conf protocol=https and cacert=...");
  }
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

// --- TLS files --------------------------------------------------------------------------------

std::string Conf(const char* key, const std::string& path) {
  return std::string("--rdzv_conf ") + key + "=" + path;
}

// OpenSSL's message for a file it cannot open names neither the file nor the errno.
void CheckReadable(const char* key, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw UsageError(Conf(key, path) + ": cannot read it (" + std::strerror(errno) + ")");
  ::close(fd);
}

void LoadCa(ssl::context& context, const std::string& cacert) {
  boost::system::error_code error;
  if (cacert.empty()) {
    context.set_default_verify_paths(error);
    if (!error) return;
    throw UsageError("--rdzv_conf cacert unset and no system CA store: " + error.message());
  }
  CheckReadable("cacert", cacert);
  context.load_verify_file(cacert, error);
  if (error) {
    throw UsageError(Conf("cacert", cacert) + ": no PEM CA certificate in it (" + error.message() +
                     ")");
  }
}

bool KeyMismatch(const boost::system::error_code& error) {
  const auto code = static_cast<unsigned long>(error.value());
  return error.category() == asio::error::get_ssl_category() && ERR_GET_LIB(code) == ERR_LIB_X509 &&
         (ERR_GET_REASON(code) == X509_R_KEY_VALUES_MISMATCH ||
          ERR_GET_REASON(code) == X509_R_KEY_TYPE_MISMATCH);
}

void LoadClientCert(ssl::context& context, const EtcdTls& tls) {
  if (tls.cert.empty() != tls.key.empty()) {
    throw UsageError(tls.cert.empty() ? Conf("key", tls.key) + " without --rdzv_conf cert=..."
                                      : Conf("cert", tls.cert) + " without --rdzv_conf key=...");
  }
  if (tls.cert.empty()) return;
  boost::system::error_code error;
  CheckReadable("cert", tls.cert);
  context.use_certificate_chain_file(tls.cert, error);
  if (error) {
    throw UsageError(Conf("cert", tls.cert) + ": no PEM certificate in it (" + error.message() +
                     ")");
  }
  CheckReadable("key", tls.key);
  context.use_private_key_file(tls.key, ssl::context::pem, error);
  if (KeyMismatch(error) || (!error && SSL_CTX_check_private_key(context.native_handle()) != 1)) {
    throw UsageError(Conf("key", tls.key) + ": not the private key of cert=" + tls.cert);
  }
  if (error) {
    throw UsageError(Conf("key", tls.key) + ": no PEM private key in it (" + error.message() + ")");
  }
}

// Runs when a member asks for a client certificate: noted, so that the member's refusal, which
// comes after the handshake (TLS 1.3) and often as a bare reset, names cert/key.
int NoteCertificateRequest(SSL*, void* requested) {
  *static_cast<bool*>(requested) = true;
  return 1;
}

}  // namespace

class EtcdTlsContext {
 public:
  explicit EtcdTlsContext(const EtcdTls& tls) : has_cert_(!tls.cert.empty()) {
    SSL_CTX_set_min_proto_version(context_.native_handle(), TLS1_2_VERSION);
    context_.set_verify_mode(ssl::verify_peer);
    LoadCa(context_, tls.cacert);
    LoadClientCert(context_, tls);
  }
  ssl::context& Context() { return context_; }
  bool HasCert() const { return has_cert_; }

 private:
  ssl::context context_{ssl::context::tls_client};
  bool has_cert_;
};

namespace {

std::shared_ptr<EtcdTlsContext> MakeTls(const std::optional<EtcdTls>& tls) {
  return tls ? std::make_shared<EtcdTlsContext>(*tls) : nullptr;
}

// --- TLS connections --------------------------------------------------------------------------

std::uint64_t SslReason(const boost::system::error_code& error) {
  if (error.category() != asio::error::get_ssl_category()) return 0;
  return ERR_GET_REASON(static_cast<unsigned long>(error.value()));
}

// An alert by which the member refuses this client's certificate (or its absence).
bool RefusedCertificate(const boost::system::error_code& error) {
  switch (SslReason(error)) {
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

// A member that closes the connection on a ClientHello or answers it in plain text.
bool NotTls(const boost::system::error_code& error) {
  const auto reason = SslReason(error);
  return reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING ||
         error == ssl::error::stream_truncated || error == asio::error::eof ||
         error == asio::error::connection_reset;
}

std::string HandshakeProblem(const boost::system::error_code& error, SSL* ssl) {
  const bool closed = error == ssl::error::stream_truncated || error == asio::error::eof;
  const std::string failed =
      "TLS handshake failed (" + (closed ? "the member closed the connection" : error.message());
  if (SslReason(error) == SSL_R_CERTIFICATE_VERIFY_FAILED) {
    return failed + ": " + X509_verify_cert_error_string(SSL_get_verify_result(ssl)) +
           "): check --rdzv_conf cacert";
  }
  if (NotTls(error)) {
    return failed + "): it seems to speak plain HTTP: use --rdzv_conf protocol=http";
  }
  return failed + ")";
}

using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

}  // namespace

// TCP to one member, or TLS over it. Every operation, the handshake too, is bounded by the TCP
// layer's expiry; Problem() explains a failed one in the member's terms. (Not in the anonymous
// namespace: the classes of the header's names hold one.)
class EtcdTransport {
 public:
  EtcdTransport(asio::io_context& io, EtcdTlsContext* tls)
      : io_(io), tls_(tls), stream_(Make(io, tls)) {}

  // Connects to `at`, then shakes hands over TLS, each within `timeout`. Throws MemberError.
  void Open(const HostPort& at, std::chrono::milliseconds timeout) {
    ConnectTo(io_, interrupted_, Tcp(), at, timeout);
    auto* secure = std::get_if<TlsStream>(&stream_);
    if (!secure) return;
    ExpectName(secure->native_handle(), at.host);
    SSL_set_cert_cb(secure->native_handle(), NoteCertificateRequest, &cert_requested_);
    const auto handshake = [secure](auto&, auto handler) {
      secure->async_handshake(ssl::stream_base::client, handler);
    };
    Run(handshake, timeout);
    handshaken_ = true;
  }

  // Runs `operation(stream, handler)` on the plain or the TLS stream within `timeout`. Throws
  // MemberError.
  template <typename Operation>
  void Run(Operation operation, std::chrono::milliseconds timeout) {
    Tcp().expires_after(timeout);
    const auto done = RunOne(io_, interrupted_, [&](auto handler) {
      std::visit([&](auto& stream) { operation(stream, handler); }, stream_);
    });
    if (!done) throw MemberError("interrupted");
    if (*done) throw MemberError(Problem(*done, timeout), *done == beast::error::timeout);
    if (handshaken_) ++exchanged_;
  }

  // Ends the operation running or the next one started ("interrupted"); from any thread.
  void Interrupt() {
    interrupted_ = true;
    io_.stop();
  }
  bool Interrupted() const { return interrupted_; }

  beast::tcp_stream& Tcp() {
    return std::visit(
        [](auto& stream) -> beast::tcp_stream& { return beast::get_lowest_layer(stream); },
        stream_);
  }
  // Calls `start(stream)` with the plain or the TLS stream.
  template <typename Operation>
  void Start(Operation start) {
    std::visit(start, stream_);
  }

  std::string Problem(const boost::system::error_code& error, std::chrono::milliseconds timeout) {
    auto* secure = std::get_if<TlsStream>(&stream_);
    if (error == beast::error::timeout) return etcd::Problem(error, timeout);
    if (!secure) return PlainProblem(error, timeout);
    if (!handshaken_ && !RefusedCertificate(error)) {
      return HandshakeProblem(error, secure->native_handle());
    }
    // TLS 1.3: a member that refuses the client's certificate does so after the handshake,
    // often with a reset that loses its alert: the first exchange fails.
    if (RefusedCertificate(error) || (cert_requested_ && exchanged_ < 2)) {
      return CertificateProblem(error);
    }
    return etcd::Problem(error, timeout);
  }

 private:
  static std::variant<PlainStream, TlsStream> Make(asio::io_context& io, EtcdTlsContext* tls) {
    if (!tls) return std::variant<PlainStream, TlsStream>(std::in_place_type<PlainStream>, io);
    return std::variant<PlainStream, TlsStream>(std::in_place_type<TlsStream>, io, tls->Context());
  }

  // The certificate must name `host`: its IP address for an IP literal (which takes no SNI, RFC
  // 6066), else its DNS name.
  static void ExpectName(SSL* ssl, const std::string& host) {
    boost::system::error_code not_ip;
    asio::ip::make_address(host, not_ip);
    const bool set = !not_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host.c_str()) == 1
                             : SSL_set_tlsext_host_name(ssl, host.c_str()) == 1 &&
                                   SSL_set1_host(ssl, host.c_str()) == 1;
    if (!set) throw MemberError("cannot check its certificate for the name " + host);
  }

  std::string CertificateProblem(const boost::system::error_code& error) const {
    if (!tls_->HasCert()) {
      return "the member asks for a client certificate (" + error.message() +
             "): set --rdzv_conf cert=... and key=...";
    }
    if (RefusedCertificate(error)) {
      return "the member refused this client's certificate (" + error.message() +
             "): check --rdzv_conf cert and key";
    }
    return "the member ended the connection after asking for this client's certificate (" +
           error.message() + "): check --rdzv_conf cert and key";
  }

  // A plain-HTTP member's problems; a TLS member closes a plain connection without a word.
  static std::string PlainProblem(const boost::system::error_code& error,
                                  std::chrono::milliseconds timeout) {
    if (error == http::error::end_of_stream) {
      return "closed the connection without an answer: if it speaks TLS, use --rdzv_conf "
             "protocol=https and cacert=...";
    }
    return etcd::Problem(error, timeout);
  }

  asio::io_context& io_;
  EtcdTlsContext* tls_;
  std::variant<PlainStream, TlsStream> stream_;
  bool cert_requested_ = false;  // set by NoteCertificateRequest during the handshake
  bool handshaken_ = false;
  int exchanged_ = 0;  // operations done since the handshake
  std::atomic<bool> interrupted_{false};
};

namespace {

// One kept-alive connection to one member.
class MemberConnection {
 public:
  MemberConnection(std::size_t member, const HostPort& at, EtcdTlsContext* tls)
      : member_(member), at_(at), transport_(io_, tls) {}
  // Connects (and shakes hands) within `timeout` each; apart from construction so that
  // Interrupt() reaches it.
  void Open(std::chrono::milliseconds timeout) { transport_.Open(at_, timeout); }
  std::size_t Member() const { return member_; }
  void Interrupt() { transport_.Interrupt(); }
  bool Reused() const { return calls_ > 1; }  // an earlier call used it (Call() counts first)

  // Writes the request and reads its reply, each within `timeout`.
  json Call(const std::string& path, const std::string& body, std::chrono::milliseconds timeout) {
    ++calls_;
    auto request = Post(at_, path, body, true);
    transport_.Run([&](auto& stream, auto handler) { http::async_write(stream, request, handler); },
                   timeout);
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxReplyBytes);
    transport_.Run(
        [&](auto& stream, auto handler) { http::async_read(stream, buffer_, parser, handler); },
        timeout);
    return ReplyJson(parser.get());
  }

 private:
  std::size_t member_;
  HostPort at_;
  asio::io_context io_{kOneThread};
  EtcdTransport transport_;
  beast::flat_buffer buffer_;
  int calls_ = 0;
};

// The real round trip: HTTP over one kept-alive connection, to the member last asked; a request
// to another member, or a failed one, drops it.
class HttpRoundTrip : public EtcdRoundTrip {
 public:
  HttpRoundTrip(const EtcdClientOptions& options, EtcdTlsContext* tls)
      : options_(options), tls_(tls) {}

  json Post(std::size_t member, const std::string& path, const std::string& body,
            std::chrono::milliseconds timeout) override {
    try {
      return PostOn(member, path, body, timeout);
    } catch (const MemberError&) {
      std::lock_guard io_lock(io_mutex_);
      connection_.reset();
      throw;
    }
  }

  void Interrupt() override {
    interrupted_ = true;
    std::lock_guard io_lock(io_mutex_);
    if (connection_) connection_->Interrupt();
  }

 private:
  // A kept-alive connection the member closed meanwhile fails once: it is retried on a new one.
  // One that got no answer in time is not: the member is frozen or cut off, and a second
  // timeout on it would cost the caller twice the time before the next member (a lease renewed
  // every TTL/3 would expire at a 2 x TTL/2 failover).
  json PostOn(std::size_t member, const std::string& path, const std::string& body,
              std::chrono::milliseconds timeout) {
    for (int attempt = 0;; ++attempt) {
      if (!connection_ || connection_->Member() != member) Connect(member, timeout);
      try {
        return connection_->Call(path, body, timeout);
      } catch (const MemberError& error) {
        if (attempt > 0 || !connection_->Reused() || interrupted_ || error.TimedOut()) throw;
        std::lock_guard io_lock(io_mutex_);
        connection_.reset();
      }
    }
  }

  void Connect(std::size_t member, std::chrono::milliseconds timeout) {
    auto fresh = std::make_unique<MemberConnection>(member, options_.endpoints.at(member), tls_);
    {
      std::lock_guard io_lock(io_mutex_);
      connection_ = std::move(fresh);
      if (interrupted_) connection_->Interrupt();
    }
    connection_->Open(timeout);  // a MemberError: Post() drops the connection
  }

  const EtcdClientOptions& options_;  // the client's
  EtcdTlsContext* tls_;
  std::unique_ptr<MemberConnection> connection_;  // kept alive; replaced under io_mutex_ too
  std::mutex io_mutex_;                           // connection_ for Interrupt() on another thread
  std::atomic<bool> interrupted_{false};
};

}  // namespace

EtcdClient::EtcdClient(EtcdClientOptions options, const EtcdRoundTripWrap& wrap)
    : options_(std::move(options)),
      tls_(MakeTls(options_.tls)),
      round_trip_(std::make_unique<HttpRoundTrip>(options_, tls_.get())) {
  if (options_.endpoints.empty()) throw std::invalid_argument("an etcd client without endpoints");
  if (wrap) round_trip_ = wrap(std::move(round_trip_));
}

EtcdClient::~EtcdClient() = default;

json EtcdClient::Call(const std::string& path, const json& body) {
  const std::string text = body.dump();
  std::lock_guard lock(mutex_);
  const auto give_up = std::chrono::steady_clock::now() + options_.patience;
  for (;;) {
    try {
      return CallMembers(path, text);
    } catch (const EtcdUnavailable&) {
      if (std::chrono::steady_clock::now() + kPatiencePause > give_up) throw;
      if (!PauseUnlessInterrupted(kPatiencePause)) throw;
    }
  }
}

bool EtcdClient::PauseUnlessInterrupted(std::chrono::milliseconds duration) {
  return patience_pause_.Pause(duration);
}

json EtcdClient::CallMembers(const std::string& path, const std::string& text) {
  std::string problems;
  const std::size_t members = options_.endpoints.size();
  for (std::size_t i = 0; i < members; ++i) {
    const std::size_t member = (current_ + i) % members;
    if (interrupted_) throw EtcdUnavailable("etcd: interrupted");
    const auto timeout = pace_.Timeout();
    try {
      const auto asked = Clock::now();
      json reply = round_trip_->Post(member, path, text, timeout);
      pace_.Answered(std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - asked));
      current_ = member;
      return reply;
    } catch (const MemberError& error) {
      if (error.TimedOut()) pace_.TimedOut(timeout);
      problems += (problems.empty() ? "" : "; ") + options_.endpoints[member].ToString() + ": " +
                  error.what();
    }
  }
  throw EtcdUnavailable("etcd: no member answered " + path + ": " + problems);
}

void EtcdClient::Interrupt() {
  interrupted_ = true;
  patience_pause_.Cancel();
  round_trip_->Interrupt();
}

HostPort EtcdClient::Current() const {
  std::lock_guard lock(mutex_);
  return options_.endpoints[current_];
}

// --- watch ------------------------------------------------------------------------------------

class EtcdWatch::Stream {
 public:
  Stream(const HostPort& at, std::chrono::milliseconds timeout, const std::string& body,
         std::shared_ptr<EtcdTlsContext> tls)
      : at_(at), tls_(std::move(tls)), transport_(io_, tls_.get()) {
    transport_.Open(at_, timeout);
    auto request = Post(at_, "/v3/watch", body, true);
    transport_.Run([&](auto& stream, auto handler) { http::async_write(stream, request, handler); },
                   timeout);
    transport_.Run(
        [&](auto& stream, auto handler) {
          http::async_read_header(stream, buffer_, parser_, handler);
        },
        timeout);
    if (parser_.get().result_int() != 200 || !parser_.chunked()) {
      throw MemberError("HTTP " + std::to_string(parser_.get().result_int()) +
                        " to /v3/watch, not a stream: is it an etcd client URL?");
    }
    transport_.Tcp().expires_never();  // a watch is idle as long as nothing changes
    parser_.body_limit(boost::none);
    parser_.on_chunk_body(on_chunk_);
  }

  void Interrupt() { transport_.Interrupt(); }

  std::optional<WatchMessage> Next(Clock::time_point deadline) {
    for (;;) {
      if (auto line = PopLine()) {
        json message = json::parse(*line, nullptr, false);
        if (message.is_discarded()) throw EtcdProtocolError("a watch line that is not JSON");
        return ParseWatch(message);
      }
      if (pending_.size() > kMaxWatchLineBytes) throw EtcdProtocolError("a watch line over 64 MiB");
      if (failed_) {
        throw EtcdUnavailable("etcd: the watch on " + at_.ToString() +
                              " ended: " + failed_->message());
      }
      if (!reading_) {
        reading_ = true;
        transport_.Start([this](auto& stream) {
          http::async_read_some(stream, buffer_, parser_,
                                [this](const boost::system::error_code& error, std::size_t) {
                                  reading_ = false;
                                  if (error)
                                    failed_ = error;
                                  else if (parser_.is_done())
                                    failed_ = http::error::end_of_stream;
                                });
        });
      }
      io_.restart();
      if (!transport_.Interrupted()) io_.run_until(deadline);
      if (reading_) {
        if (transport_.Interrupted()) {
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
  std::shared_ptr<EtcdTlsContext> tls_;
  EtcdTransport transport_;
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
};

EtcdWatch::EtcdWatch(const EtcdClientOptions& options, const json& create_body)
    : EtcdWatch(options, MakeTls(options.tls), create_body) {}

EtcdWatch::EtcdWatch(const EtcdClient& client, const json& create_body)
    : EtcdWatch(client.options_, client.tls_, create_body) {}

EtcdWatch::EtcdWatch(const EtcdClientOptions& options, const std::shared_ptr<EtcdTlsContext>& tls,
                     const json& create_body) {
  const std::string body = create_body.dump();
  std::string problems;
  for (const HostPort& at : options.endpoints) {
    try {
      stream_ = std::make_unique<Stream>(at, options.timeout, body, tls);
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

}  // namespace ddprun::store::etcd
