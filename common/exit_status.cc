#include "common/exit_status.h"

#include <sys/wait.h>

#include <array>
#include <csignal>
#include <utility>

namespace ddprun {
namespace {

constexpr std::array<std::pair<int, const char*>, 31> kSignals{{
    {SIGHUP, "SIGHUP"},   {SIGINT, "SIGINT"},       {SIGQUIT, "SIGQUIT"}, {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"}, {SIGABRT, "SIGABRT"},     {SIGBUS, "SIGBUS"},   {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"}, {SIGUSR1, "SIGUSR1"},     {SIGSEGV, "SIGSEGV"}, {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"}, {SIGALRM, "SIGALRM"},     {SIGTERM, "SIGTERM"}, {SIGSTKFLT, "SIGSTKFLT"},
    {SIGCHLD, "SIGCHLD"}, {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},
    {SIGTTIN, "SIGTTIN"}, {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},
    {SIGXFSZ, "SIGXFSZ"}, {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"},
    {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},
}};

}  // namespace

ExitStatus ExitStatus::FromWaitStatus(int wait_status) {
  if (WIFSIGNALED(wait_status)) return Signaled(WTERMSIG(wait_status));
  return Exited(WEXITSTATUS(wait_status));
}

std::optional<std::string> SignalName(int signal) {
  for (const auto& [number, name] : kSignals) {
    if (number == signal) return name;
  }
  return std::nullopt;
}

std::optional<int> SignalNumber(const std::string& name) {
  for (const auto& [number, known] : kSignals) {
    if (name == known || name == known + 3) return number;
  }
  return std::nullopt;
}

}  // namespace ddprun
