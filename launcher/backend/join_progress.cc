#include "launcher/backend/join_progress.h"

#include <iostream>
#include <memory>

#include "common/duration.h"

namespace ddprun::launcher::backend {
namespace {

struct PrinterState {
  bool started = false;
  long long shown_second = -1;
};

std::string Line(const rendezvous::JoinProgress& p) {
  return "ddprun: waiting for nodes: " + std::to_string(p.joined) + "/" + std::to_string(p.total) +
         " joined, " + DurationText(std::chrono::floor<std::chrono::seconds>(p.elapsed)) + " of " +
         DurationText(p.timeout);
}

void PrintTerminal(PrinterState& state, const rendezvous::JoinProgress& p) {
  const long long second = p.elapsed.count() / 1000;
  if (p.done) {
    if (state.started) std::cerr << "\r" << Line(p) << "\033[K" << std::endl;
    state = {};
    return;
  }
  if (state.started && second == state.shown_second) return;
  state.started = true;
  state.shown_second = second;
  std::cerr << "\r" << Line(p) << "\033[K" << std::flush;
}

void PrintOnce(PrinterState& state, const rendezvous::JoinProgress& p) {
  if (p.done) {
    state = {};
    return;
  }
  if (state.started) return;
  state.started = true;
  std::cerr << "ddprun: waiting for " << p.total << " nodes to join (join_timeout "
            << DurationText(p.timeout) << ")" << std::endl;
}

}  // namespace

std::function<void(const rendezvous::JoinProgress&)> MakeJoinProgressPrinter(bool terminal) {
  auto state = std::make_shared<PrinterState>();
  if (terminal) return [state](const rendezvous::JoinProgress& p) { PrintTerminal(*state, p); };
  return [state](const rendezvous::JoinProgress& p) { PrintOnce(*state, p); };
}

}  // namespace ddprun::launcher::backend
