// How a waiting multi-node join shows itself on stderr: on a terminal one line updated in place
// ("waiting for nodes: 1/2 joined, 12 s of 600 s"), otherwise one line when the wait starts.
#pragma once
#include <functional>

#include "rendezvous/static_rendezvous.h"

namespace ddprun::launcher::backend {

std::function<void(const rendezvous::JoinProgress&)> MakeJoinProgressPrinter(bool terminal);

}  // namespace ddprun::launcher::backend
