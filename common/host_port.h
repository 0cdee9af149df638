// host[:port] endpoints as torchrun writes them, IPv6 as "[addr]:port".
#pragma once
#include <optional>
#include <string>
#include <vector>

namespace ddprun {

// torchrun's default port of the master (node 0's store): --master_port, MASTER_PORT.
inline constexpr int kDefaultMasterPort = 29500;
// torchrun's default port of a c10d --rdzv_endpoint (the rendezvous store), and etcd's client
// port, the default of an etcd endpoint.
inline constexpr int kDefaultRendezvousPort = 29400;
inline constexpr int kDefaultEtcdPort = 2379;

struct HostPort {
  std::string host;
  std::optional<int> port;
  std::string ToString() const;  // brackets IPv6 hosts again
  bool operator==(const HostPort&) const = default;
};

// Parses "host", "host:port", "[v6]", "[v6]:port" or a bare IPv6 address. Throws UsageError
// naming `what` (e.g. "--rdzv_endpoint") when the port is not an integer in 0..65535.
HostPort ParseHostPort(const std::string& text, const std::string& what);

// A comma-separated list of endpoints ("h1:p1,h2:p2"; one entry is a list of one). Throws
// UsageError naming `what` for an empty entry or a bad port.
std::vector<HostPort> ParseHostPortList(const std::string& text, const std::string& what);

}  // namespace ddprun
