// The rendezvous part of the command line, decided once for the launch and for --dry_run:
// which backend runs, where the static master is, the --rdzv_conf values, and the refusal of
// what this build cannot launch. Each message names the option as the user gave it (flag,
// PET_* variable or preset variable).
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <initializer_list>

#include "cli/cli_internal.h"
#include "cli/rdzv_token.h"
#include "common/errors.h"
#include "common/host_port.h"

namespace ddprun::cli {
namespace {

using elastic::LaunchConfig;
using std::chrono::milliseconds;

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
  if (backend != "static" && backend != "c10d" && backend != "etcd" && backend != "etcd-v2") {
    throw UsageError(given + ": not a rendezvous backend; use static, c10d or etcd");
  }
}

void CheckNodes(const LaunchConfig& config) {
  if (config.rdzv_backend == "static" && config.node_rank >= config.max_nodes) {
    throw UsageError(config.Given("node_rank", std::to_string(config.node_rank)) +
                     ": must be below the number of nodes (" +
                     config.Given("nnodes", NodesText(config)) + ")");
  }
  if (config.Etcd() && config.rdzv_endpoint.empty()) {
    throw UsageError(config.Given("rdzv_backend", config.rdzv_backend) +
                     ": the etcd rendezvous needs --rdzv_endpoint=HOST[:PORT][,HOST[:PORT]...] "
                     "(every member of the etcd cluster; default port " +
                     std::to_string(kDefaultEtcdPort) + ")");
  }
  if (config.Elastic() && config.rdzv_endpoint.empty()) {
    throw UsageError(config.Given("nnodes", NodesText(config)) + " with " +
                     config.Given("rdzv_backend", config.rdzv_backend) +
                     ": the c10d rendezvous needs --rdzv_endpoint=HOST[:PORT] (the node that "
                     "serves the rendezvous store; default port " +
                     std::to_string(kDefaultRendezvousPort) + ")");
  }
}

// A file named by an rdzv_conf key (key=PATH), readable now.
std::string ReadableFile(const LaunchConfig& config, const std::string& key,
                         const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0) {
    throw UsageError(ConfName(config, key) + "=" + path + ": " + std::strerror(errno) +
                     " (give a readable PEM file)");
  }
  return path;
}

// The first of `keys` given (torchrun's etcd and etcd-v2 spell the TLS keys differently).
std::string TlsFile(const LaunchConfig& config, std::initializer_list<const char*> keys) {
  for (const char* key : keys) {
    if (const auto path = ConfValue(config, key)) return ReadableFile(config, key, *path);
  }
  return "";
}

void ReadEtcdSettings(const LaunchConfig& config, elastic::RendezvousSettings& settings) {
  const std::string protocol = ConfValue(config, "protocol").value_or("http");
  if (protocol != "http" && protocol != "https") {
    throw UsageError(ConfName(config, "protocol") + "=" + protocol + ": must be http or https");
  }
  settings.etcd_tls = protocol == "https";
  settings.etcd_cacert = TlsFile(config, {"cacert", "ca_cert"});
  settings.etcd_cert = TlsFile(config, {"cert", "ssl_cert"});
  settings.etcd_key = TlsFile(config, {"key", "ssl_cert_key"});
  if (settings.etcd_cert.empty() != settings.etcd_key.empty()) {
    throw UsageError(config.GivenAs("rdzv_conf") +
                     ": cert and key go together (this node's client certificate and its key)");
  }
  const bool any_tls_file = !settings.etcd_cacert.empty() || !settings.etcd_cert.empty();
  if (any_tls_file && !settings.etcd_tls) {
    throw UsageError(config.GivenAs("rdzv_conf") +
                     ": cacert/cert/key are for TLS; add protocol=https");
  }
  if (const auto prefix = ConfValue(config, "etcd_prefix")) {
    if (prefix->empty() || prefix->front() != '/') {
      throw UsageError(ConfName(config, "etcd_prefix") + "=" + *prefix +
                       ": must start with / (e.g. /ddprun/team-a/)");
    }
    settings.etcd_prefix = prefix->back() == '/' ? *prefix : *prefix + "/";
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
  if (config.Etcd()) ReadEtcdSettings(config, settings);
  return settings;
}

void UseStaticEndpointAsMaster(LaunchConfig& config) {
  if (config.rdzv_backend != "static" || config.rdzv_endpoint.empty()) return;
  const HostPort endpoint = ParseHostPort(config.rdzv_endpoint, config.GivenAs("rdzv_endpoint"));
  config.master_addr = endpoint.host;
  config.master_port = endpoint.port.value_or(kDefaultMasterPort);
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

}  // namespace ddprun::cli
