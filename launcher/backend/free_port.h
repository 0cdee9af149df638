// A TCP port free on this machine now, as torchrun picks MASTER_PORT for workers that serve
// their own store: bind port 0 on `host` ("" = every interface), read it, close. Another
// program may take it before the workers bind it; the window is the workers' start-up.
#pragma once
#include <string>

namespace ddprun::launcher::backend {

// Throws SystemError when no socket can be bound.
int PickFreePort(const std::string& host);

}  // namespace ddprun::launcher::backend
