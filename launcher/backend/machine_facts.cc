#include "launcher/backend/machine_facts.h"

namespace ddprun::launcher::backend {

const std::vector<std::string>& MachineFacts::Resolved(const std::string& name) const {
  static const std::vector<std::string> kNone;
  const auto found = resolved.find(name);
  return found == resolved.end() ? kNone : found->second;
}

bool IsIpv4LoopbackAddress(const std::string& numeric) { return numeric.starts_with("127."); }

bool IsLoopbackAddress(const std::string& numeric) {
  return IsIpv4LoopbackAddress(numeric) || numeric == "::1";
}

}  // namespace ddprun::launcher::backend
