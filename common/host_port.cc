#include "common/host_port.h"

#include <algorithm>

#include "common/errors.h"
#include "common/integer.h"

namespace ddprun {
namespace {

int ParsePort(const std::string& digits, const std::string& text, const std::string& what) {
  const bool numeric =
      digits.size() <= 5 && std::all_of(digits.begin(), digits.end(), ::isdigit);  // no sign
  const auto port = numeric ? ParseInt(digits) : std::nullopt;
  if (!port || *port > 65535) {
    throw UsageError(what + "=" + text + ": the port must be an integer between 0 and 65535");
  }
  return static_cast<int>(*port);
}

}  // namespace

std::string HostPort::ToString() const {
  const std::string shown = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return port ? shown + ":" + std::to_string(*port) : shown;
}

HostPort ParseHostPort(const std::string& text, const std::string& what) {
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) throw UsageError(what + "=" + text + ": missing ']'");
    HostPort result{text.substr(1, close - 1), std::nullopt};
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') throw UsageError(what + "=" + text + ": expected ':' after ']'");
      result.port = ParsePort(text.substr(close + 2), text, what);
    }
    return result;
  }
  const auto colon = text.find(':');
  if (colon == std::string::npos) return {text, std::nullopt};
  if (text.find(':', colon + 1) != std::string::npos) return {text, std::nullopt};  // bare IPv6
  return {text.substr(0, colon), ParsePort(text.substr(colon + 1), text, what)};
}

std::vector<HostPort> ParseHostPortList(const std::string& text, const std::string& what) {
  std::vector<HostPort> endpoints;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = text.find(',', start);
    std::string entry = text.substr(start, comma == std::string::npos ? comma : comma - start);
    entry.erase(0, entry.find_first_not_of(' '));
    entry.erase(entry.find_last_not_of(' ') + 1);
    if (entry.empty()) {
      throw UsageError(what + "=" + text +
                       ": an empty endpoint in the list; write HOST[:PORT][,HOST[:PORT]...]");
    }
    endpoints.push_back(ParseHostPort(entry, what));
    if (comma == std::string::npos) return endpoints;
    start = comma + 1;
  }
}

}  // namespace ddprun
