// This machine's names, computed as Python's socket module does, so that summaries and
// MASTER_ADDR read as torchrun's.
#pragma once
#include <string>

namespace ddprun {

std::string Hostname();  // gethostname()
// socket.getfqdn(): the first name containing a dot among the canonical name and aliases of
// the host's first address, else the canonical name, else the hostname.
std::string Fqdn();

}  // namespace ddprun
