#include "worker/backend.h"

#include <cstdlib>

#include "common/duration.h"
#include "common/errors.h"
#include "worker/gloo_communicator.h"
#include "worker/local_address.h"
#include "worker/nccl_loader.h"

namespace ddprun::worker {
namespace {

using store::Store;

// Whether this rank can run NCCL, without throwing.
bool NcclUsable(const WorkerEnv& env) {
  try {
    return NcclPlugin::Get().DeviceCount() > env.local_rank;
  } catch (const BackendUnavailable&) {
    return false;
  }
}

// Every rank says whether it can use NCCL; all of them agree on the answer.
bool VoteForNccl(const WorkerEnv& env, Store& store, std::chrono::milliseconds timeout) {
  if (!NcclUsable(env)) store.Add("nccl_unusable", 1);
  store.Barrier("backend_vote", env.world_size, timeout);
  return store.Add("nccl_unusable", 0) == 0;
}

// How many ranks reached the store, or -1 when the store is gone too.
std::int64_t JoinedRanks(Store& store) {
  try {
    return store.Add("joined", 0);
  } catch (const std::exception&) {
    return -1;
  }
}

// Turns a rendezvous timeout into a diagnosis: how many ranks arrived.
[[noreturn]] void ExplainTimeout(const WorkerEnv& env, Store& store,
                                 std::chrono::milliseconds timeout, const std::string& what) {
  auto joined = JoinedRanks(store);
  std::string world = "WORLD_SIZE=" + std::to_string(env.world_size);
  std::string message = "rank " + std::to_string(env.rank) + "/" + std::to_string(env.world_size) +
                        ": rendezvous timed out after " + DurationText(timeout, 1) + ": ";
  if (joined >= 0 && joined < env.world_size) {
    message += "only " + std::to_string(joined) + " of " + world + " ranks joined";
  } else {
    message += "not every one of " + world + " ranks joined";
  }
  throw CollectiveTimeout(message + " — check WORLD_SIZE and that every rank started (" + what +
                          ")");
}

GlooConfig MakeGlooConfig(const WorkerEnv& env, std::chrono::milliseconds timeout) {
  GlooConfig gloo;
  gloo.rank = env.rank;
  gloo.size = env.world_size;
  gloo.timeout = timeout;
  const char* iface = std::getenv("GLOO_SOCKET_IFNAME");
  std::string ifname = iface ? std::string(iface).substr(0, std::string(iface).find(',')) : "";
  if (!ifname.empty()) {
    gloo.interface = ifname;
  } else {
    gloo.address = LocalAddressToward(env.master_addr, env.master_port);
  }
  return gloo;
}

std::unique_ptr<Communicator> Build(const WorkerEnv& env, std::shared_ptr<Store> store, bool nccl,
                                    std::chrono::milliseconds timeout) {
  if (!nccl) return std::make_unique<GlooCommunicator>(MakeGlooConfig(env, timeout), store);
  NcclPluginArgs args;
  args.rank = env.rank;
  args.size = env.world_size;
  args.device = env.local_rank;
  args.store = store.get();
  args.timeout = timeout;
  return NcclPlugin::Get().Create(args);
}

}  // namespace

BackendKind ParseBackend(const std::string& name) {
  if (name == "cpu" || name == "gloo") return BackendKind::kCpu;
  if (name == "nccl" || name == "cuda") return BackendKind::kNccl;
  if (name == "auto") return BackendKind::kAuto;
  throw UsageError("unknown backend '" + name + "' (cpu, nccl, auto)");
}

std::unique_ptr<Communicator> CreateCommunicator(const WorkerEnv& env, WorkerStore& store,
                                                 const CommunicatorConfig& config) {
  auto scope = store.NextScope("comm");
  scope->SetTimeout(config.timeout);
  scope->Add("joined", 1);
  try {
    bool nccl = config.backend == BackendKind::kNccl;
    if (nccl) NcclPlugin::Get().DeviceCount();  // fail early with the reason
    if (config.backend == BackendKind::kAuto) nccl = VoteForNccl(env, *scope, config.timeout);
    return Build(env, scope, nccl, config.timeout);
  } catch (const store::StoreTimeout& error) {
    ExplainTimeout(env, *scope, config.timeout, error.what());
  } catch (const CollectiveTimeout& error) {
    ExplainTimeout(env, *scope, config.timeout, error.what());
  }
}

}  // namespace ddprun::worker
