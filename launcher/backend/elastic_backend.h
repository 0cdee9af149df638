// The elastic backend (--rdzv_backend=c10d with --nnodes=N>1 or MIN:MAX, or etcd), wired as its
// plan (LaunchKind::kElastic) says: the agent joins rounds of the dynamic rendezvous at the
// plan's endpoints, serves its round's worker store when it has group rank 0, watches the round
// (ElasticMonitor), and re-rendezvouses when a node fails, is lost or arrives. A node whose plan
// says it serves the rendezvous store serves it on its own thread; one that finds the port
// already served joins as a client, as torchrun 2.x does (several agents on one host, or a
// separate `ddprun-store serve`). When the store is lost, it moves to a member of the last round
// (TcpStoreSite serves it there). With etcd the rendezvous store is the etcd cluster
// (EtcdStoreSite): never served here, never moved. Every decision is the plan's; this file only
// wires.
#pragma once
#include "launcher/backend/launch_backend.h"

namespace ddprun::launcher::backend {

// `spec` gives the number of workers this node runs (its rendezvous record).
std::unique_ptr<LaunchBackend> MakeElasticBackend(asio::io_context& io, const LaunchPlan& plan,
                                                  const elastic::WorkerSpec& spec);

}  // namespace ddprun::launcher::backend
