// Which local address peers can reach this process at: the source address the kernel picks
// for a route toward the store (MASTER_ADDR), so loopback jobs stay on 127.0.0.1 and
// multi-host jobs use the interface facing the master. No packet is sent.
#pragma once
#include <string>

namespace ddprun::worker {

// Throws SystemError naming the failed call and the host.
std::string LocalAddressToward(const std::string& host, int port);

}  // namespace ddprun::worker
