#include "worker/local_address.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "common/errors.h"

namespace ddprun::worker {
namespace {

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};

std::string NumericHost(const sockaddr_storage& addr, socklen_t len) {
  char host[NI_MAXHOST];
  int rc = getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host, sizeof(host), nullptr,
                       0, NI_NUMERICHOST);
  if (rc != 0) throw SystemError(std::string("getnameinfo: ") + gai_strerror(rc));
  return host;
}

// A connected UDP socket only records the route; its local name is the source address.
std::string SourceAddress(const addrinfo& target) {
  int fd = socket(target.ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError(ErrnoMessage("socket", errno));
  sockaddr_storage local{};
  socklen_t len = sizeof(local);
  bool ok = connect(fd, target.ai_addr, target.ai_addrlen) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0;
  int err = errno;
  close(fd);
  if (!ok) throw SystemError(ErrnoMessage("connect/getsockname (route probe)", err));
  return NumericHost(local, len);
}

}  // namespace

std::string LocalAddressToward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* raw = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &raw);
  if (rc != 0) throw SystemError("getaddrinfo " + host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, AddrInfoDeleter> list(raw);
  return SourceAddress(*list);
}

}  // namespace ddprun::worker
