#include "cli/env_presets.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>

#include "common/errors.h"
#include "common/integer.h"

namespace ddprun::cli {
namespace {

using elastic::EnvPresetSetting;

// ---- SLURM hostlists ----

constexpr std::size_t kMaxHosts = 1'000'000;

struct Range {
  unsigned long long low = 0;
  unsigned long long high = 0;
  std::size_t width = 0;  // of the low bound as written: zero padding is kept
};
// Literal text, or (when `ranges` is not empty) one bracket group.
struct Part {
  std::string text;
  std::vector<Range> ranges;
};
using Entry = std::vector<Part>;

[[noreturn]] void Malformed(const std::string& why) { throw std::invalid_argument(why); }

unsigned long long ParseBound(const std::string& digits) {
  const bool plain = digits.find_first_not_of("0123456789") == std::string::npos;  // no sign
  const auto value = plain ? ParseInt(digits) : std::nullopt;
  if (!value) Malformed("in brackets, " + NotAnInteger(digits));
  return static_cast<unsigned long long>(*value);
}

Range ParseRange(const std::string& item) {
  const auto dash = item.find('-');
  Range range;
  range.width = dash == std::string::npos ? item.size() : dash;
  range.low = ParseBound(item.substr(0, range.width));
  range.high = dash == std::string::npos ? range.low : ParseBound(item.substr(dash + 1));
  if (range.high < range.low) Malformed("range '" + item + "' goes down");
  return range;
}

// "01-04,07" (the text between brackets).
std::vector<Range> ParseGroup(const std::string& text) {
  std::vector<Range> ranges;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    ranges.push_back(ParseRange(text.substr(start, comma - start)));
    if (comma == text.size()) return ranges;
    start = comma + 1;
  }
}

// Splits at the commas outside brackets, checking that brackets pair up.
std::vector<Entry> ParseHostlist(const std::string& hostlist) {
  std::vector<Entry> entries(1);
  std::size_t at = 0;
  while (at < hostlist.size()) {
    const char c = hostlist[at];
    if (c == ',') {
      if (entries.back().empty()) Malformed("empty host name");
      entries.emplace_back();
      ++at;
    } else if (c == '[') {
      const auto close = hostlist.find(']', at);
      const auto next_open = hostlist.find('[', at + 1);
      if (close == std::string::npos || next_open < close) Malformed("unclosed '['");
      entries.back().push_back({"", ParseGroup(hostlist.substr(at + 1, close - at - 1))});
      at = close + 1;
    } else if (c == ']') {
      Malformed("']' without '['");
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      Malformed("blank inside the list");
    } else {
      const auto end = std::min(hostlist.find_first_of(",[] \t\n", at), hostlist.size());
      entries.back().push_back({hostlist.substr(at, end - at), {}});
      at = end;
    }
  }
  if (entries.back().empty()) Malformed(hostlist.empty() ? "empty list" : "empty host name");
  return entries;
}

std::string Format(unsigned long long value, std::size_t width) {
  std::string digits = std::to_string(value);
  return std::string(width > digits.size() ? width - digits.size() : 0, '0') + digits;
}

std::vector<std::string> GroupValues(const std::vector<Range>& ranges, std::size_t budget) {
  std::vector<std::string> values;
  for (const Range& range : ranges) {
    if (range.high - range.low >= budget - values.size()) {
      Malformed("more than " + std::to_string(kMaxHosts) + " hosts");
    }
    for (auto value = range.low; value <= range.high; ++value) {
      values.push_back(Format(value, range.width));
    }
  }
  return values;
}

void ExpandEntry(const Entry& entry, std::vector<std::string>& hosts) {
  std::vector<std::string> names{""};
  for (const Part& part : entry) {
    const auto values =
        part.ranges.empty() ? std::vector{part.text} : GroupValues(part.ranges, kMaxHosts);
    if (names.size() * values.size() + hosts.size() > kMaxHosts) {
      Malformed("more than " + std::to_string(kMaxHosts) + " hosts");
    }
    std::vector<std::string> longer;
    for (const auto& name : names) {
      for (const auto& value : values) longer.push_back(name + value);
    }
    names = std::move(longer);
  }
  hosts.insert(hosts.end(), names.begin(), names.end());
}

// ---- presets ----

// Reads one preset's variables; every failure names the preset and the variable.
class PresetReader {
 public:
  PresetReader(const std::string& given_as, const std::string& preset, const EnvLookup& env)
      : prefix_(given_as + "=" + preset + ": "), env_(env) {}

  std::optional<std::string> Get(const std::string& variable) const { return env_(variable); }

  std::string Text(const std::string& variable, const std::string& expected) const {
    const auto value = Get(variable);
    if (!value) Fail(variable + " is not set; expected " + expected);
    if (value->empty() || value->find_first_of(" \t\n") != std::string::npos) {
      Fail(variable + "=" + *value + ": expected " + expected);
    }
    return *value;
  }

  long long Integer(const std::string& variable, long long min, long long max,
                    const std::string& expected) const {
    const auto value = Get(variable);
    if (!value) Fail(variable + " is not set; expected " + expected);
    return CheckedInteger(variable, *value, min, max, expected);
  }

  long long CheckedInteger(const std::string& variable, const std::string& value, long long min,
                           long long max, const std::string& expected) const {
    const bool digits_only = value.find_first_not_of("0123456789") == npos;  // no sign
    const auto number = digits_only ? ParseInt(value) : std::nullopt;
    if (!number || *number < min || *number > max) {
      Fail(variable + "=" + value + ": expected " + expected);
    }
    return *number;
  }

  [[noreturn]] void Fail(const std::string& what) const { throw UsageError(prefix_ + what); }

  void Add(const std::string& option, const std::string& value, const std::string& variable) {
    settings_.push_back({option, value, variable, ""});
  }
  void AddInteger(const std::string& option, long long value, const std::string& variable) {
    Add(option, std::to_string(value), variable);
  }

  // A node rank must name one of the nodes.
  void CheckRank(long long rank, const std::string& rank_variable, long long nodes,
                 const std::string& nodes_variable) const {
    if (rank >= nodes) {
      Fail(rank_variable + "=" + std::to_string(rank) + ": expected a node rank below " +
           nodes_variable + "=" + std::to_string(nodes));
    }
  }

  std::vector<EnvPresetSetting> Settings() const { return settings_; }

 private:
  static constexpr auto npos = std::string::npos;
  std::string prefix_;
  const EnvLookup& env_;
  std::vector<EnvPresetSetting> settings_;
};

constexpr long long kMaxInt = 2147483647;
constexpr const char* kNodes = "the number of nodes, an integer >= 1";
constexpr const char* kRank = "this node's rank, an integer >= 0";
constexpr const char* kHost = "the master node's host name or address";
constexpr const char* kPort = "the master node's port, an integer between 1 and 65535";

void AddMaster(PresetReader& reader) {
  reader.Add("master_addr", reader.Text("MASTER_ADDR", kHost), "MASTER_ADDR");
  reader.AddInteger("master_port", reader.Integer("MASTER_PORT", 1, 65535, kPort), "MASTER_PORT");
}

// Platforms that export the node count, this node's rank and MASTER_ADDR/MASTER_PORT.
void NodesRankAndMaster(PresetReader& reader, const char* nodes_variable, const char* nodes_hint,
                        const char* rank_variable) {
  const long long nodes = reader.Integer(nodes_variable, 1, kMaxInt, nodes_hint);
  const long long rank = reader.Integer(rank_variable, 0, kMaxInt, kRank);
  reader.CheckRank(rank, rank_variable, nodes, nodes_variable);
  reader.AddInteger("nnodes", nodes, nodes_variable);
  reader.AddInteger("node_rank", rank, rank_variable);
  AddMaster(reader);
}

// AI Platform Training: node-level WORLD_SIZE (nodes) and RANK (node rank), master address.
void AiPlatform(PresetReader& reader) { NodesRankAndMaster(reader, "WORLD_SIZE", kNodes, "RANK"); }

// AzureML per-node launch (one process per node, so WORLD_SIZE is the node count).
void AzureMl(PresetReader& reader) {
  NodesRankAndMaster(reader, "WORLD_SIZE", "the number of nodes (per-node launch), an integer >= 1",
                     "NODE_RANK");
}

// SLURM, one ddprun per node. Inside a job step (srun), where ddprun belongs, the step's
// variables describe the nodes that run it: SLURM_NODEID is relative to the step, whose nodes
// are SLURM_STEP_NODELIST (a subset of the job's when the step has fewer nodes, e.g. srun -N2 in a
// 3-node job; the whole set of a heterogeneous job's components with srun --het-group=0,1) and
// SLURM_STEP_NUM_NODES. Outside a step (the batch script, an salloc shell), the job's. The first
// host of that list is the master; it has node id 0. Values as seen on Slurm 22.05
// (tests/integration/test_slurm.py runs a real cluster).
void Slurm(PresetReader& reader) {
  const bool in_step = reader.Get("SLURM_STEP_NODELIST").has_value();
  const std::string nodes_variable =
      in_step && reader.Get("SLURM_STEP_NUM_NODES") ? "SLURM_STEP_NUM_NODES" : "SLURM_NNODES";
  const std::string list_variable = in_step ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST";
  const long long nodes = reader.Integer(nodes_variable, 1, kMaxInt, kNodes);
  const long long rank = reader.Integer("SLURM_NODEID", 0, kMaxInt, kRank);
  reader.CheckRank(rank, "SLURM_NODEID", nodes, nodes_variable);
  const std::string list_expected = "a SLURM hostlist such as node[01-04,07]";
  const std::string nodelist = reader.Text(list_variable, list_expected);
  std::string first_host;
  try {
    first_host = FirstSlurmHost(nodelist);
  } catch (const std::invalid_argument& error) {
    reader.Fail(list_variable + "=" + nodelist + ": " + error.what() + "; expected " +
                list_expected);
  }
  // Two ddpruns on one node would both claim its node rank (srun's default task count is the
  // job's, e.g. #SBATCH --ntasks-per-node=8): every node of the step must run exactly one task.
  if (in_step && reader.Get("SLURM_STEP_NUM_TASKS")) {
    const long long tasks = reader.Integer("SLURM_STEP_NUM_TASKS", 1, kMaxInt,
                                           "the number of tasks of the step, an integer >= 1");
    if (tasks != nodes) {
      reader.Fail("SLURM_STEP_NUM_TASKS=" + std::to_string(tasks) +
                  ": expected one task per node (" + nodes_variable + "=" + std::to_string(nodes) +
                  "); start ddprun with srun --ntasks-per-node=1");
    }
  }
  const std::string job_id = reader.Text("SLURM_JOB_ID", "the job id");
  reader.AddInteger("nnodes", nodes, nodes_variable);
  reader.AddInteger("node_rank", rank, "SLURM_NODEID");
  reader.Add("master_addr", first_host, list_variable);
  reader.Add("rdzv_id", job_id, "SLURM_JOB_ID");
  if (reader.Get("MASTER_PORT")) {
    reader.AddInteger("master_port", reader.Integer("MASTER_PORT", 1, 65535, kPort), "MASTER_PORT");
  }
  // --gpus-per-node=N (or --gres=gpu:N): one worker per GPU, as --nproc_per_node=gpu would.
  if (const auto gpus = reader.Get("SLURM_GPUS_ON_NODE")) {
    const long long count = reader.CheckedInteger("SLURM_GPUS_ON_NODE", *gpus, 0, kMaxInt,
                                                  "the GPUs on this node, an integer >= 0");
    if (count > 0) reader.AddInteger("nproc_per_node", count, "SLURM_GPUS_ON_NODE");
  }
}

std::vector<std::string> NonEmptyLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    const auto first = line.find_first_not_of(" \t\r");
    if (first != std::string::npos) {
      lines.push_back(line.substr(first, line.find_last_not_of(" \t\r") - first + 1));
    }
    start = end + 1;
  }
  return lines;
}

// SkyPilot: node IPs one per line, head node first.
void SkyPilot(PresetReader& reader) {
  const auto ips_text = reader.Get("SKYPILOT_NODE_IPS");
  const std::string ips_expected = "the nodes' IP addresses, one per line, head node first";
  if (!ips_text) reader.Fail("SKYPILOT_NODE_IPS is not set; expected " + ips_expected);
  const auto ips = NonEmptyLines(*ips_text);
  if (ips.empty()) reader.Fail("SKYPILOT_NODE_IPS is empty; expected " + ips_expected);
  const std::string nodes_variable =
      reader.Get("SKYPILOT_NUM_NODES") ? "SKYPILOT_NUM_NODES" : "SKYPILOT_NODE_IPS";
  const long long nodes = reader.Get("SKYPILOT_NUM_NODES")
                              ? reader.Integer("SKYPILOT_NUM_NODES", 1, kMaxInt, kNodes)
                              : static_cast<long long>(ips.size());
  const long long rank = reader.Integer("SKYPILOT_NODE_RANK", 0, kMaxInt, kRank);
  reader.CheckRank(rank, "SKYPILOT_NODE_RANK", nodes, nodes_variable);
  reader.AddInteger("nnodes", nodes, nodes_variable);
  reader.AddInteger("node_rank", rank, "SKYPILOT_NODE_RANK");
  reader.Add("master_addr", ips.front(), "SKYPILOT_NODE_IPS");
  if (const auto gpus = reader.Get("SKYPILOT_NUM_GPUS_PER_NODE")) {
    const long long count = reader.CheckedInteger("SKYPILOT_NUM_GPUS_PER_NODE", *gpus, 0, kMaxInt,
                                                  "the GPUs per node, an integer >= 0");
    if (count > 0) reader.AddInteger("nproc_per_node", count, "SKYPILOT_NUM_GPUS_PER_NODE");
  }
}

using PresetFunction = void (*)(PresetReader&);

const std::map<std::string, PresetFunction>& Presets() {
  static const std::map<std::string, PresetFunction> presets{
      {"aiplatform", AiPlatform}, {"azureml", AzureMl}, {"skypilot", SkyPilot}, {"slurm", Slurm}};
  return presets;
}

}  // namespace

std::vector<std::string> EnvPresetNames() {
  std::vector<std::string> names;
  for (const auto& [name, function] : Presets()) names.push_back(name);
  return names;
}

std::vector<EnvPresetSetting> ResolveEnvPreset(const std::string& preset,
                                               const std::string& given_as, const EnvLookup& env) {
  const auto found = Presets().find(preset);
  if (found == Presets().end()) {
    std::string known;
    for (const auto& name : EnvPresetNames()) known += (known.empty() ? "" : ", ") + name;
    throw UsageError(given_as + "=" + preset + ": unknown preset; known: " + known);
  }
  PresetReader reader(given_as, preset, env);
  found->second(reader);
  return reader.Settings();
}

std::vector<std::string> ExpandSlurmHostlist(const std::string& hostlist) {
  std::vector<std::string> hosts;
  for (const Entry& entry : ParseHostlist(hostlist)) ExpandEntry(entry, hosts);
  return hosts;
}

std::string FirstSlurmHost(const std::string& hostlist) {
  const std::vector<Entry> entries = ParseHostlist(hostlist);
  std::string host;
  for (const Part& part : entries.front()) {
    host += part.ranges.empty() ? part.text
                                : Format(part.ranges.front().low, part.ranges.front().width);
  }
  return host;
}

RawValues ApplyEnvPreset(const RawValues& raw, const EnvLookup& env,
                         elastic::LaunchConfig& config) {
  RawValues merged = raw;
  const Given* preset = raw.Find("env_preset");
  if (preset == nullptr || preset->text.empty()) return merged;
  config.env_preset = preset->text;
  for (EnvPresetSetting setting : ResolveEnvPreset(preset->text, preset->name, env)) {
    if (const Given* given = raw.Find(setting.option)) {
      setting.overridden_by = given->name;
    } else {
      merged.values[setting.option] = {setting.value,
                                       preset->name + "=" + preset->text + ": " + setting.variable};
    }
    config.env_preset_settings.push_back(setting);
  }
  return merged;
}

}  // namespace ddprun::cli
