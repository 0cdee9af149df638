// The rendezvous part of the command line, decided once for the launch and for --dry_run:
// which backend runs, where the static master is, the --rdzv_conf values, and the refusal of
// what this build cannot launch. Each message names the option as the user gave it (flag,
// PET_* variable or preset variable).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

#include "common/errors.h"
#include "common/host_port.h"
#include "launcher/cli_internal.h"
#include "launcher/rdzv_token.h"

namespace ddprun::launcher::cli {
namespace {

using elastic::LaunchConfig;
using std::chrono::milliseconds;

constexpr const char* kEtcdTracking =
    "the etcd rendezvous is not implemented in this build yet; use --rdzv_backend=c10d (one "
    "node) or static (--master_addr/--master_port/--node_rank)";

// "--rdzv_conf join_timeout" (validators append "=<value>: <why>").
std::string ConfName(const LaunchConfig& config, const std::string& key) {
  return config.GivenAs("rdzv_conf") + " " + key;
}

std::optional<std::string> ConfValue(const LaunchConfig& config, const std::string& key) {
  const auto it = config.rdzv_conf.find(key);
  return it == config.rdzv_conf.end() ? std::nullopt : std::optional(it->second);
}

// About 31 years: a deadline this far ahead still fits the clocks' int64 nanoseconds.
constexpr double kMaxTimeoutSeconds = 1e9;

milliseconds Seconds(const LaunchConfig& config, const std::string& key, milliseconds fallback) {
  const auto text = ConfValue(config, key);
  if (!text) return fallback;
  const double seconds = ParsePositiveSeconds(*text, ConfName(config, key));
  if (seconds > kMaxTimeoutSeconds) {
    throw UsageError(ConfName(config, key) + "=" + *text + ": must be at most 1e9 seconds");
  }
  // Rounded (1.001 s is 1001 ms, not 1000), and never 0: a keep-alive interval of 0 means "off".
  return milliseconds(std::max<std::int64_t>(1, std::llround(seconds * 1000)));
}

int PositiveCount(const LaunchConfig& config, const std::string& key, int fallback) {
  const auto text = ConfValue(config, key);
  if (!text) return fallback;
  return ParseIntInRange(*text, ConfName(config, key), 1, 1'000'000, "an integer >= 1");
}

// torchrun's RendezvousParameters.get_as_bool spellings.
std::optional<bool> Bool(const LaunchConfig& config, const std::string& key) {
  const auto text = ConfValue(config, key);
  if (!text) return std::nullopt;
  std::string lower = *text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  for (const char* yes : {"1", "true", "t", "yes", "y"}) {
    if (lower == yes) return true;
  }
  for (const char* no : {"0", "false", "f", "no", "n"}) {
    if (lower == no) return false;
  }
  throw UsageError(ConfName(config, key) + "=" + *text + ": must be true or false (1/0, yes/no)");
}

std::string NodesText(const LaunchConfig& config) {
  return config.min_nodes == config.max_nodes
             ? std::to_string(config.max_nodes)
             : std::to_string(config.min_nodes) + ":" + std::to_string(config.max_nodes);
}

void CheckBackend(const LaunchConfig& config) {
  const std::string& backend = config.rdzv_backend;
  const std::string given = config.Given("rdzv_backend", backend);
  if (backend == "etcd" || backend == "etcd-v2") throw UsageError(given + ": " + kEtcdTracking);
  if (backend != "static" && backend != "c10d") {
    throw UsageError(given +
                     ": not a rendezvous backend; use static or c10d (etcd and "
                     "etcd-v2 are not implemented in this build yet)");
  }
}

void CheckNodes(const LaunchConfig& config) {
  if (config.rdzv_backend == "static" && config.node_rank >= config.max_nodes) {
    throw UsageError(config.Given("node_rank", std::to_string(config.node_rank)) +
                     ": must be below the number of nodes (" +
                     config.Given("nnodes", NodesText(config)) + ")");
  }
  if (config.Elastic() && config.rdzv_endpoint.empty()) {
    throw UsageError(config.Given("nnodes", NodesText(config)) + " with " +
                     config.Given("rdzv_backend", config.rdzv_backend) +
                     ": the c10d rendezvous needs --rdzv_endpoint=HOST[:PORT] (the node that "
                     "serves the rendezvous store; default port 29400)");
  }
}

}  // namespace

elastic::RendezvousSettings ReadRendezvousSettings(const LaunchConfig& config) {
  elastic::RendezvousSettings settings;
  // `timeout` is join_timeout's alias; static alone defaults to torchrun's injected 900 s.
  const milliseconds join_default =
      config.rdzv_backend == "static" ? milliseconds{900'000} : settings.join_timeout;
  settings.join_timeout = Seconds(config, "join_timeout", Seconds(config, "timeout", join_default));
  settings.last_call_timeout = Seconds(config, "last_call_timeout", settings.last_call_timeout);
  settings.close_timeout = Seconds(config, "close_timeout", settings.close_timeout);
  settings.read_timeout = Seconds(config, "read_timeout", settings.read_timeout);
  settings.keep_alive_interval =
      Seconds(config, "keep_alive_interval", settings.keep_alive_interval);
  settings.keep_alive_max_attempt =
      PositiveCount(config, "keep_alive_max_attempt", settings.keep_alive_max_attempt);
  settings.is_host = Bool(config, "is_host");
  if (const auto bind = ConfValue(config, "store_bind")) {
    if (bind->empty()) {
      throw UsageError(ConfName(config, "store_bind") +
                       "=: give an address of this machine, 0.0.0.0 or :: (every interface)");
    }
    settings.store_bind = *bind;
  }
  return settings;
}

void UseStaticEndpointAsMaster(LaunchConfig& config) {
  if (config.rdzv_backend != "static" || config.rdzv_endpoint.empty()) return;
  const HostPort endpoint = ParseHostPort(config.rdzv_endpoint, config.GivenAs("rdzv_endpoint"));
  config.master_addr = endpoint.host;
  config.master_port = endpoint.port;
}

void ReadAuthentication(LaunchConfig& config, const EnvLookup& env) {
  auto token = ReadRendezvousToken(config.rdzv_conf, config.GivenAs("rdzv_conf"), env);
  if (!token) return;
  config.rdzv_settings.auth = std::move(token->key);
  config.rdzv_settings.auth_source = std::move(token->source);
}

void CheckLaunchable(const LaunchConfig& config) {
  CheckBackend(config);
  CheckNodes(config);
}

}  // namespace ddprun::launcher::cli
