#include "launcher/master_endpoint.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/errors.h"
#include "common/hostname.h"

namespace ddprun::launcher {

int FindFreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw SystemError(ErrnoMessage("socket", errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t length = sizeof address;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) throw SystemError(ErrnoMessage("bind 0.0.0.0:0 to find a free port", error));
  return ntohs(address.sin_port);
}

rendezvous::RendezvousInfo ChooseMasterEndpoint(const elastic::LaunchConfig& config) {
  if (config.max_nodes > 1) {
    throw UsageError("--nnodes=" + std::to_string(config.min_nodes) + ":" +
                     std::to_string(config.max_nodes) +
                     ": multi-node launches are not implemented in this build yet; run one "
                     "node with --standalone");
  }
  rendezvous::RendezvousInfo info;
  if (config.standalone || config.rdzv_backend != "static") {
    info.master_addr = config.local_addr.value_or(Fqdn());
    info.master_port = FindFreePort();
  } else {
    info.master_addr = config.master_addr;
    info.master_port = config.master_port.value_or(29500);
  }
  info.use_agent_store = false;
  return info;
}

}  // namespace ddprun::launcher
