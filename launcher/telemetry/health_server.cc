#include "launcher/telemetry/health_server.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <list>

#include "common/errors.h"
#include "launcher/telemetry/http_routes.h"

namespace ddprun::launcher::telemetry {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

}  // namespace

class HealthServer::Impl : public std::enable_shared_from_this<Impl> {
 public:
  Impl(asio::io_context& io, AgentTelemetry& telemetry, HealthServerLimits limits)
      : acceptor_(io), telemetry_(telemetry), limits_(limits) {}

  void Listen(const tcp::endpoint& endpoint) {
    acceptor_.open(endpoint.protocol());
    acceptor_.set_option(tcp::acceptor::reuse_address(true));
    acceptor_.bind(endpoint);
    acceptor_.listen();
  }

  void Accept() {
    acceptor_.async_accept(
        [self = shared_from_this()](beast::error_code error, tcp::socket socket) {
          if (error == asio::error::operation_aborted || !self->acceptor_.is_open()) return;
          if (!error) self->Serve(std::move(socket));
          self->Accept();
        });
  }

  void Stop();

  tcp::endpoint Local() const { return acceptor_.local_endpoint(); }

 private:
  class Session;

  void Serve(tcp::socket socket);

  tcp::acceptor acceptor_;
  AgentTelemetry& telemetry_;
  HealthServerLimits limits_;
  int open_ = 0;
  std::list<std::weak_ptr<Session>> sessions_;
};

// One connection: read a request (within the deadline and the size limit), answer, and again
// while the client keeps it alive.
class HealthServer::Impl::Session : public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Impl> server, tcp::socket socket)
      : server_(std::move(server)), stream_(std::move(socket)) {
    ++server_->open_;
  }
  ~Session() { --server_->open_; }

  void Read() {
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(server_->limits_.max_request_bytes));
    parser_->body_limit(server_->limits_.max_request_bytes);
    stream_.expires_after(server_->limits_.read_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code error, std::size_t) {
                       if (error) return self->Close();
                       self->Respond();
                     });
  }

  void Close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.socket().close(ignored);
  }

 private:
  void Respond() {
    const auto& request = parser_->get();
    const HttpAnswer answer = Answer(
        std::string_view(request.method_string().data(), request.method_string().size()),
        std::string_view(request.target().data(), request.target().size()), server_->telemetry_);
    auto response = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(answer.status), request.version());
    response->set(http::field::server, "ddprun");
    response->set(http::field::content_type, answer.content_type);
    if (answer.status == 405) response->set(http::field::allow, "GET");
    response->keep_alive(request.keep_alive());
    response->body() = answer.body;
    response->prepare_payload();
    stream_.expires_after(server_->limits_.read_timeout);
    http::async_write(stream_, *response,
                      [self = shared_from_this(), response](beast::error_code error, std::size_t) {
                        if (error || !response->keep_alive()) return self->Close();
                        self->Read();
                      });
  }

  std::shared_ptr<Impl> server_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
};

void HealthServer::Impl::Stop() {
  beast::error_code ignored;
  acceptor_.close(ignored);
  for (auto& session : sessions_) {
    if (auto open = session.lock()) open->Close();
  }
  sessions_.clear();
}

void HealthServer::Impl::Serve(tcp::socket socket) {
  if (open_ >= limits_.max_connections) {  // over the cap: closed at once, nothing read
    beast::error_code ignored;
    socket.close(ignored);
    return;
  }
  sessions_.remove_if([](const std::weak_ptr<Session>& session) { return session.expired(); });
  auto session = std::make_shared<Session>(shared_from_this(), std::move(socket));
  sessions_.push_back(session);
  session->Read();
}

HealthServer::HealthServer(asio::io_context& io, const std::string& host, int port,
                           AgentTelemetry& telemetry, const std::string& given_as,
                           HealthServerLimits limits)
    : impl_(std::make_shared<Impl>(io, telemetry, limits)) {
  const std::string where = host + ":" + std::to_string(port);
  beast::error_code error;
  const auto address = asio::ip::make_address(host, error);
  if (error) {
    throw UsageError("--health_addr=" + host +
                     ": not an IP address; give one of this host's "
                     "addresses (127.0.0.1, the default, serves this host only; 0.0.0.0 every "
                     "interface)");
  }
  try {
    impl_->Listen(tcp::endpoint(address, static_cast<unsigned short>(port)));
  } catch (const boost::system::system_error& failure) {
    throw UsageError(given_as + "=" + std::to_string(port) + ": cannot listen on " + where + ": " +
                     failure.code().message() + "; choose another port (0: any free one)");
  }
  impl_->Accept();
}

HealthServer::~HealthServer() { Stop(); }

void HealthServer::Stop() { impl_->Stop(); }

std::string HealthServer::Host() const { return impl_->Local().address().to_string(); }

int HealthServer::Port() const { return impl_->Local().port(); }

}  // namespace ddprun::launcher::telemetry
