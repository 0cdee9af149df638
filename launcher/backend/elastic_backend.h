// The elastic backend (--rdzv_backend=c10d with --nnodes=N>1 or MIN:MAX, or etcd): the agent joins rounds
// of the dynamic rendezvous at --rdzv_endpoint (default port 29400), serves its round's worker
// store when it has group rank 0, watches the round (ElasticMonitor), and re-rendezvouses when
// a node fails, is lost or arrives. The node whose address matches the (first) endpoint's host
// (or with rdzv_conf is_host=true) serves the rendezvous store on its own thread; one that
// finds the port already served joins as a client, as torchrun 2.x does (several agents on one
// host, or a separate `ddprun-store serve`). When the store is lost, it moves to a member of
// the last round (TcpStoreSite serves it there). With etcd the rendezvous store is the etcd
// cluster (EtcdStoreSite): never served here, never moved.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "common/host_port.h"
#include "launcher/backend/launch_backend.h"
#include "store/etcd/etcd_store.h"

namespace ddprun::launcher::backend {

// Whether `host` names this machine: localhost or a loopback address, its host name or FQDN,
// --local_addr, or a name resolving to one of `local_addresses` (numeric, as getifaddrs gives).
bool NamesThisMachine(const std::string& host, const std::vector<std::string>& names,
                      const std::vector<std::string>& local_addresses);

// --rdzv_endpoint as a list (a ddprun extension; one endpoint keeps torchrun's meaning), each
// with its port (default 29400; etcd 2379): c10d's first one serves the store at first
// (docs/elastic.md); etcd's are every member of the cluster.
std::vector<HostPort> RendezvousEndpoints(const elastic::LaunchConfig& config);

// For --rdzv_backend=etcd-v2: that ddprun speaks etcd's v3 API.
std::optional<std::string> EtcdV2Note(const elastic::LaunchConfig& config);

// The EtcdStore options of an etcd launch: every member, the per-request timeout, the prefix.
store::etcd::EtcdStoreOptions EtcdOptions(const elastic::LaunchConfig& config);

// Whether this node serves the rendezvous store of `config` (is_host, else the endpoint's host
// names this machine): LaunchPlan::serves_rendezvous_store.
bool ServesRendezvousStore(const elastic::LaunchConfig& config);

// As its plan (LaunchKind::kElastic) says: the endpoints, whether this node serves the
// rendezvous store first, etcd's cluster and prefix, the stores' bind address.
std::unique_ptr<LaunchBackend> MakeElasticBackend(asio::io_context& io,
                                                  const elastic::LaunchConfig& config,
                                                  const LaunchPlan& plan,
                                                  const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
