#include "launcher/backend/tcp_store_site.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/errors.h"
#include "launcher/backend/launch_backend.h"

namespace ddprun::launcher::backend {
namespace {

using rendezvous::Reach;

// One non-blocking connect to one resolved address, awaited at most `timeout`.
Reach ProbeAddress(const addrinfo& address, std::chrono::milliseconds timeout) {
  const int fd = ::socket(address.ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Reach::kSilent;
  Reach reach = Reach::kSilent;
  if (::connect(fd, address.ai_addr, address.ai_addrlen) == 0) {
    reach = Reach::kAnswered;
  } else if (errno == ECONNREFUSED) {
    reach = Reach::kRefused;
  } else if (errno == EINPROGRESS) {
    pollfd entry{fd, POLLOUT, 0};
    if (::poll(&entry, 1, static_cast<int>(timeout.count())) == 1) {
      int error = 0;
      socklen_t length = sizeof error;
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
      reach = error == 0 ? Reach::kAnswered
                         : (error == ECONNREFUSED ? Reach::kRefused : Reach::kSilent);
    }
  }
  ::close(fd);
  return reach;
}

}  // namespace

Reach ProbeTcp(const HostPort& at, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(at.port.value_or(0));
  if (::getaddrinfo(at.host.c_str(), port.c_str(), &hints, &found) != 0) return Reach::kSilent;
  bool all_refused = true;
  for (const addrinfo* entry = found; entry != nullptr; entry = entry->ai_next) {
    const Reach reach = ProbeAddress(*entry, timeout);
    if (reach == Reach::kAnswered) {
      ::freeaddrinfo(found);
      return reach;
    }
    all_refused = all_refused && reach == Reach::kRefused;
  }
  ::freeaddrinfo(found);
  return all_refused ? Reach::kRefused : Reach::kSilent;
}

Reach TcpStoreSite::Probe(const HostPort& at, std::chrono::milliseconds timeout) {
  return ProbeTcp(at, timeout);
}

std::shared_ptr<store::Store> TcpStoreSite::Connect(const HostPort& at,
                                                    std::chrono::milliseconds timeout) {
  return TcpStoreConnector(at.host, at.port.value_or(0), options_.reply_timeout,
                           options_.serve.auth)(timeout);
}

std::optional<HostPort> TcpStoreSite::Serve(int port) {
  std::lock_guard lock(mutex_);
  try {
    store::ServerOptions serve = options_.serve;
    serve.port = port;
    served_ = std::make_unique<store::StoreServerThread>(
        serve,
        store::StoreThreadOptions{options_.linger, options_.quiet_for,
                                  "--rdzv_conf store_bind names an address of this machine", true});
  } catch (const store::PortInUseError&) {
    return std::nullopt;  // served already (another agent of this machine, or another program)
  }
  const std::string& host = options_.serve.host;
  const bool every_interface = host.empty() || host == "::" || host == "0.0.0.0";
  return HostPort{every_interface ? "127.0.0.1" : host, served_->Port()};
}

// The server lingers for its clients (up to `linger`) outside the lock, so scrapes go on.
void TcpStoreSite::StopServing() {
  std::unique_ptr<store::StoreServerThread> stopped;
  {
    std::lock_guard lock(mutex_);
    stopped = std::move(served_);
  }
}

// Never waits: Serve holds the lock while a replaced server lingers for its clients, and the
// caller is the agent's event loop (a scrape then reads no store).
std::optional<store::ServerLoad> TcpStoreSite::ServedLoad() {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || !served_) return std::nullopt;
  return served_->Load();
}

}  // namespace ddprun::launcher::backend
