#include "launcher/agent_loop.h"

#include <iostream>

#include "common/hostname.h"
#include "launcher/launch_setup.h"

namespace ddprun::launcher {
namespace {

using elastic::AgentResult;

// Forwards every handled signal to the agent until the agent is done.
void WatchSignals(asio::signal_set& signals, elastic::Agent& agent) {
  signals.async_wait([&signals, &agent](const boost::system::error_code& error, int signal) {
    if (error) return;
    agent.HandleSignal(signal);
    WatchSignals(signals, agent);
  });
}

void ReportFailure(const AgentResult& result, const elastic::LaunchConfig& config) {
  if (!result.failures.empty()) {
    const std::string host = result.root_cause_host.empty() ? Fqdn() : result.root_cause_host;
    std::cerr << "\n"
              << elastic::FormatFailureSummary(EntrypointName(config), host, result.failures)
              << std::endl;
  }
  if (!result.note.empty()) std::cerr << "ddprun: " << result.note << std::endl;
}

sigset_t HandledSignals(const elastic::LaunchConfig& config) {
  sigset_t set;
  sigemptyset(&set);
  for (const auto& name : config.signals_to_handle) {
    if (const auto number = SignalNumber(name)) sigaddset(&set, *number);
  }
  return set;
}

}  // namespace

HeldSignals::HeldSignals() {
  sigemptyset(&held_);
  for (const int signal : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&held_, signal);
  sigprocmask(SIG_BLOCK, &held_, nullptr);
}

void HeldSignals::Hold(const elastic::LaunchConfig& config) {
  const sigset_t wanted = HandledSignals(config);
  sigprocmask(SIG_BLOCK, &wanted, nullptr);
  sigset_t released;
  sigemptyset(&released);
  for (int signal = 1; signal < NSIG; ++signal) {
    if (sigismember(&held_, signal) == 1 && sigismember(&wanted, signal) != 1) {
      sigaddset(&released, signal);
    }
  }
  held_ = wanted;
  sigprocmask(SIG_UNBLOCK, &released, nullptr);
}

std::optional<int> HeldSignals::TakePending() {
  const timespec now{0, 0};
  const int signal = sigtimedwait(&held_, nullptr, &now);
  if (signal <= 0) return std::nullopt;
  return signal;
}

AgentResult RunAgentLoop(asio::io_context& io, const elastic::LaunchConfig& config,
                         elastic::Agent& agent) {
  asio::signal_set signals(io);
  for (const auto& name : config.signals_to_handle) {
    if (const auto number = SignalNumber(name)) signals.add(*number);
  }
  const sigset_t handled = HandledSignals(config);
  sigprocmask(SIG_UNBLOCK, &handled, nullptr);  // pending ones now reach `signals`
  AgentResult result;
  bool done = false;
  agent.Run([&](const AgentResult& outcome) {
    result = outcome;
    done = true;
    // From here on a signal waits in the kernel for HeldSignals::TakePending, instead of
    // finding asio's handler gone (the default action: death by the signal).
    sigprocmask(SIG_BLOCK, &handled, nullptr);
    signals.cancel();
    io.stop();
  });
  if (!done) {
    WatchSignals(signals, agent);
    io.run();
  }
  return result;
}

AgentResult StoppedBySignal(int signal) {
  AgentResult result;
  result.state = AgentResult::State::kStopped;
  result.signal = signal;
  return result;
}

void ReportResult(const AgentResult& result, const elastic::LaunchConfig& config) {
  switch (result.state) {
    case AgentResult::State::kSucceeded:
      return;
    case AgentResult::State::kFailed:
      ReportFailure(result, config);
      return;
    case AgentResult::State::kStopped:
      std::cerr << "ddprun: received " << SignalName(result.signal).value_or("a signal")
                << "; workers stopped" << std::endl;
      return;
    case AgentResult::State::kError:
      std::cerr << "ddprun: error: " << result.error << std::endl;
      return;
  }
}

}  // namespace ddprun::launcher
