// Value validators with torchrun's rules and one-line messages naming the accepted values.
#include <algorithm>
#include <array>
#include <boost/algorithm/string.hpp>
#include <cctype>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <set>

#include "cli/cli_internal.h"
#include "common/errors.h"
#include "common/exit_status.h"
#include "common/integer.h"

namespace ddprun::cli {
namespace {

constexpr const char* kNnodesAccepted = "use N or MIN:MAX with 0 < MIN <= MAX";
constexpr const char* kStreamsAccepted =
    "use 0, 1 (stdout), 2 (stderr), 3 (both) or a per-rank map like 0:1,1:3 "
    "(regex ^(\\d:[0123],)*(\\d:[0123])$)";

[[noreturn]] void Fail(const std::string& name, const std::string& text, const std::string& why) {
  throw UsageError(name + "=" + text + ": " + why);
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;  // Python's str.split(separator): empty items kept
  boost::algorithm::split(parts, text, [separator](char c) { return c == separator; });
  return parts;
}

std::string Strip(const std::string& text) {
  return boost::algorithm::trim_copy_if(text, boost::algorithm::is_any_of(" \t"));
}

// Python int(): ParseInt's optional sign and decimal digits, within surrounding blanks.
std::optional<long long> ParseInteger(const std::string& text) { return ParseInt(Strip(text)); }

bool IsStreamPair(const std::string& item) {
  return item.size() == 3 && std::isdigit(static_cast<unsigned char>(item[0])) && item[1] == ':' &&
         item[2] >= '0' && item[2] <= '3';
}

}  // namespace

std::pair<int, int> ParseNnodes(const std::string& text, const std::string& name) {
  const std::vector<std::string> parts = Split(text, ':');
  if (parts.size() > 2)
    Fail(name, text, std::string("not in \"MIN:MAX\" format; ") + kNnodesAccepted);
  std::vector<long long> values;
  for (const std::string& part : parts) {
    const auto value = ParseInteger(part);
    if (!value) Fail(name, text, NotAnInteger(part) + "; " + kNnodesAccepted);
    values.push_back(*value);
  }
  const long long min = values.front();
  const long long max = values.back();
  if (max > INT_MAX) Fail(name, text, "too many nodes; " + std::string(kNnodesAccepted));
  if (min <= 0 || min > max) {
    Fail(name, text,
         "min_nodes must be > 0 and <= max_nodes, got min_nodes=" + std::to_string(min) +
             ", max_nodes=" + std::to_string(max) + "; " + kNnodesAccepted);
  }
  return {static_cast<int>(min), static_cast<int>(max)};
}

int ParseIntInRange(const std::string& text, const std::string& name, long long min, long long max,
                    const std::string& accepted) {
  const auto value = ParseInteger(text);
  if (!value || *value < min || *value > max) Fail(name, text, "must be " + accepted);
  return static_cast<int>(*value);
}

double ParsePositiveSeconds(const std::string& text, const std::string& name) {
  const std::string stripped = Strip(text);
  char* end = nullptr;
  const double value = stripped.empty() ? 0.0 : std::strtod(stripped.c_str(), &end);
  const bool parsed = !stripped.empty() && end == stripped.c_str() + stripped.size();
  if (!parsed || !std::isfinite(value) || value <= 0)
    Fail(name, text, "must be a number of seconds > 0");
  return value;
}

std::chrono::milliseconds ParseSecondsOrOff(const std::string& text, const std::string& name,
                                            const std::string& what_off) {
  const std::string stripped = Strip(text);
  char* end = nullptr;
  const double value = stripped.empty() ? -1.0 : std::strtod(stripped.c_str(), &end);
  const bool parsed = !stripped.empty() && end == stripped.c_str() + stripped.size();
  if (!parsed || !std::isfinite(value) || value < 0 || value > 1e9) {
    Fail(name, text,
         "must be a number of seconds between 0 and 1e9, e.g. 300 or 0.5 (0 turns " + what_off +
             " off)");
  }
  // Rounded to the millisecond; a positive value never becomes 0 ("off").
  const auto millis = static_cast<std::int64_t>(std::llround(value * 1000));
  return std::chrono::milliseconds(value > 0 ? std::max<std::int64_t>(1, millis) : 0);
}

elastic::StreamSelection ParseStreamSelection(const std::string& text, const std::string& name) {
  elastic::StreamSelection selection;
  if (text.size() == 1 && text[0] >= '0' && text[0] <= '3') {
    selection.all = text[0] - '0';
    return selection;
  }
  for (const std::string& item : Split(text, ',')) {
    if (!IsStreamPair(item)) Fail(name, text, kStreamsAccepted);
    selection.per_rank[item[0] - '0'] = item[2] - '0';
  }
  return selection;
}

std::vector<int> ParseLocalRanksFilter(const std::string& text, const std::string& name) {
  if (text.empty()) return {};  // torchrun: an empty filter means every rank
  std::set<int> ranks;
  for (const std::string& item : Split(text, ',')) {
    const auto rank = ParseInteger(item);
    if (!rank || *rank < INT_MIN || *rank > INT_MAX) {
      Fail(name, text,
           "must be a comma-separated list of integers e.g. --local_ranks_filter=0,1,2");
    }
    ranks.insert(static_cast<int>(*rank));
  }
  return {ranks.begin(), ranks.end()};
}

std::map<std::string, std::string> ParseRdzvConf(const std::string& text, const std::string& name) {
  std::map<std::string, std::string> conf;
  if (Strip(text).empty()) return conf;
  for (const std::string& item : Split(Strip(text), ',')) {
    const auto equals = item.find('=');
    const std::string key = Strip(item.substr(0, equals));
    if (key.empty()) Fail(name, text, "must be in format <key1>=<value1>,...,<keyN>=<valueN>");
    const std::string value = equals == std::string::npos ? "" : Strip(item.substr(equals + 1));
    if (value.empty())
      Fail(name, text, "the rendezvous option '" + key + "' must have a value specified");
    conf[key] = value;
  }
  return conf;
}

std::vector<std::string> ParseSignals(const std::string& text, const std::string& name) {
  std::vector<std::string> signals;
  for (const std::string& item : Split(text, ',')) {
    const std::string stripped = Strip(item);
    const auto number = SignalNumber(stripped);
    if (!number)
      Fail(name, text, "unknown signal '" + stripped + "'; use names such as SIGTERM,SIGUSR1");
    if (*number == SIGKILL || *number == SIGSTOP) {
      Fail(name, text, stripped + " cannot be handled; use names such as SIGTERM,SIGUSR1");
    }
    signals.push_back(*SignalName(*number));
  }
  return signals;
}

namespace {
bool IsPythonModuleName(const std::string& name) {
  bool at_start = true;
  for (const char c : name) {
    const bool letter = std::isalpha(static_cast<unsigned char>(c)) || c == '_';
    if (c == '.' && !at_start) {
      at_start = true;
    } else if (letter || (!at_start && std::isdigit(static_cast<unsigned char>(c)))) {
      at_start = false;
    } else {
      return false;
    }
  }
  return !at_start;
}
}  // namespace

std::vector<std::string> ParseModuleList(const std::string& text, const std::string& name) {
  std::vector<std::string> modules;
  for (const std::string& item : Split(text, ',')) {
    const std::string module = Strip(item);
    if (module.empty() && Strip(text).empty()) break;  // empty: none, like unset
    if (!IsPythonModuleName(module)) {
      Fail(name, text,
           "'" + module +
               "' is not a Python module name; give dotted names separated by commas, "
               "e.g. numpy,transformers");
    }
    modules.push_back(module);
  }
  return modules;
}

std::vector<std::string> ParseFilters(const std::string& text) {
  std::vector<std::string> filters{""};
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      filters.back() += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      filters.back() += ',';
      ++i;
    } else {
      filters.emplace_back();
    }
  }
  std::erase(filters, "");  // an empty filter would match every line
  return filters;
}

void RequireChoice(const std::string& text, const std::string& name,
                   const std::vector<std::string>& choices) {
  if (std::find(choices.begin(), choices.end(), text) != choices.end()) return;
  std::string accepted;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    accepted += (i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + choices[i];
  }
  Fail(name, text, "invalid choice; use " + accepted);
}

bool ParseEnvFlag(const std::string& text, const std::string& name) {
  if (text == "1") return true;
  if (text == "0") return false;
  Fail(name, text, "must be 1 (on) or 0 (off)");
}

std::string RandomUuid4() {
  std::random_device device;
  std::uniform_int_distribution<int> byte_distribution(0, 255);
  std::array<unsigned char, 16> bytes{};
  for (unsigned char& byte : bytes) byte = static_cast<unsigned char>(byte_distribution(device));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;  // version 4
  bytes[8] = (bytes[8] & 0x3f) | 0x80;  // RFC 4122 variant
  static constexpr char kHex[] = "0123456789abcdef";
  std::string uuid;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) uuid += '-';
    uuid += kHex[bytes[i] >> 4];
    uuid += kHex[bytes[i] & 0x0f];
  }
  return uuid;
}

}  // namespace ddprun::cli
