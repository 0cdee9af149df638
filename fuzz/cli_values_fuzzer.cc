// Fuzz target: the launcher's option value parsers (cli/cli_internal.h), each given the
// whole input as the value: --rdzv_conf (then its timeouts and counts, as ReadRendezvousSettings
// reads them for either backend), --redirects/--tee, --nnodes, --local_ranks_filter,
// --signals_to_handle, the duplicate-output filters, seconds, ports, endpoints, nproc_per_node
// and ${local_rank} substitution. UsageError is the documented rejection; what is accepted must
// be in the range the option promises.
#include <cmath>
#include <cstdint>
#include <string>

#include "cli/cli_internal.h"
#include "cli/nproc.h"
#include "common/errors.h"
#include "common/exit_status.h"
#include "common/host_port.h"
#include "elastic/arg_template.h"
#include "fuzz/fuzz_support.h"

namespace {

using ddprun::UsageError;
using ddprun::fuzz::Require;
namespace cli = ddprun::cli;

// Runs `parse`, ignoring UsageError.
template <typename Fn>
void Try(Fn parse) {
  try {
    parse();
  } catch (const UsageError&) {
  }
}

bool Stripped(const std::string& text) {
  return !text.empty() && text.front() != ' ' && text.front() != '\t' && text.back() != ' ' &&
         text.back() != '\t';
}

void CheckRdzvConf(const std::string& text) {
  const auto conf = cli::ParseRdzvConf(text, "--rdzv_conf");
  for (const auto& [key, value] : conf) {
    Require(Stripped(key) && Stripped(value), "rdzv_conf: an empty or unstripped key or value");
  }
  for (const char* backend : {"static", "c10d"}) {
    ddprun::elastic::LaunchConfig config;
    config.rdzv_backend = backend;
    config.rdzv_conf = conf;
    Try([&] {
      const auto settings = cli::ReadRendezvousSettings(config);
      for (const auto timeout :
           {settings.join_timeout, settings.last_call_timeout, settings.close_timeout,
            settings.read_timeout, settings.keep_alive_interval, settings.HeartbeatTimeout()}) {
        Require(timeout.count() > 0, "rdzv_conf: a timeout of 0 ms or less from seconds > 0");
      }
      Require(settings.keep_alive_max_attempt >= 1, "rdzv_conf: keep_alive_max_attempt < 1");
    });
  }
}

void CheckStreams(const std::string& text, const char* name) {
  const auto selection = cli::ParseStreamSelection(text, name);
  Require(selection.all >= 0 && selection.all <= 3, "streams: all out of range");
  for (const auto& [rank, streams] : selection.per_rank) {
    Require(rank >= 0 && rank <= 9 && streams >= 0 && streams <= 3,
            "streams: per rank out of range");
  }
}

void CheckLists(const std::string& text) {
  Try([&] {
    const auto [min, max] = cli::ParseNnodes(text, "--nnodes");
    Require(min >= 1 && min <= max, "nnodes: not 0 < MIN <= MAX");
  });
  Try([&] {
    const auto ranks = cli::ParseLocalRanksFilter(text, "--local_ranks_filter");
    for (std::size_t i = 1; i < ranks.size(); ++i) {
      Require(ranks[i - 1] < ranks[i], "local_ranks_filter: not sorted and unique");
    }
  });
  Try([&] {
    for (const std::string& name : cli::ParseSignals(text, "--signals_to_handle")) {
      Require(ddprun::SignalNumber(name).has_value(), "signals: a name that is no signal", name);
    }
  });
  for (const std::string& filter : cli::ParseFilters(text)) {
    Require(!filter.empty(), "filters: an empty filter (it would match every line)");
  }
}

void CheckNumbers(const std::string& text) {
  Try([&] {
    const double seconds = cli::ParsePositiveSeconds(text, "--monitor_interval");
    Require(std::isfinite(seconds) && seconds > 0, "seconds: not finite and > 0");
  });
  Try([&] {
    const int port = cli::ParseIntInRange(text, "--master_port", 0, 65535, "a port");
    Require(port >= 0 && port <= 65535, "port out of range");
  });
  Try([&] {
    const auto gpus = [] { return ddprun::cli::GpuCount{4, ""}; };
    Require(ddprun::cli::ResolveNprocPerNode(text, "--nproc_per_node", gpus) >= 1,
            "nproc_per_node below 1");
  });
}

void CheckEndpoints(const std::string& text) {
  Try([&] {
    for (const auto& endpoint : ddprun::ParseHostPortList(text, "--rdzv_endpoint")) {
      Require(!endpoint.port || (*endpoint.port >= 0 && *endpoint.port <= 65535),
              "endpoint port out of range");
      (void)endpoint.ToString();
    }
  });
  (void)ddprun::elastic::SafeSubstitute(text, {{"local_rank", "0"}});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text = ddprun::fuzz::AsText(data, size);
  Try([&] { CheckRdzvConf(text); });
  Try([&] { CheckStreams(text, "--redirects"); });
  Try([&] { CheckStreams(text, "--tee"); });
  CheckLists(text);
  CheckNumbers(text);
  CheckEndpoints(text);
  return 0;
}
