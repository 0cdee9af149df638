#include "launcher/backend/free_port.h"

#include "common/asio.h"
#include "common/errors.h"

namespace ddprun::launcher::backend {

int PickFreePort(const std::string& host) {
  asio::io_context io{kOneThread};
  asio::ip::tcp::acceptor acceptor(io);
  boost::system::error_code error;
  asio::ip::tcp::endpoint endpoint(asio::ip::tcp::v6(), 0);
  if (!host.empty() && host != "::") {
    asio::ip::tcp::resolver resolver(io);
    const auto found = resolver.resolve(host, "0", error);
    if (error || found.empty()) {
      throw SystemError("pick a free port on " + host + ": " +
                        (error ? error.message() : std::string("no address")));
    }
    endpoint = found.begin()->endpoint();
  }
  acceptor.open(endpoint.protocol(), error);
  if (error && endpoint.address().is_v6() && host.empty()) {  // no IPv6 on this host
    endpoint = {asio::ip::tcp::v4(), 0};
    acceptor.open(endpoint.protocol(), error);
  }
  if (!error) acceptor.bind(endpoint, error);
  if (error)
    throw SystemError("pick a free port on " + (host.empty() ? "*" : host) + ": " +
                      error.message());
  return acceptor.local_endpoint().port();
}

}  // namespace ddprun::launcher::backend
