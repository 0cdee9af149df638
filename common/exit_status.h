// How a process ended, and the shell-style exit code derived from it
// (exit N -> N, killed by signal N -> 128+N).
#pragma once
#include <optional>
#include <string>

namespace ddprun {

struct ExitStatus {
  enum class Kind { kExited, kSignaled };
  Kind kind = Kind::kExited;
  int code = 0;  // exit code, or signal number when kind == kSignaled

  static ExitStatus Exited(int code) { return {Kind::kExited, code}; }
  static ExitStatus Signaled(int signal) { return {Kind::kSignaled, signal}; }
  // Decodes a waitpid() status word.
  static ExitStatus FromWaitStatus(int wait_status);

  bool Success() const { return kind == Kind::kExited && code == 0; }
  bool Signaled() const { return kind == Kind::kSignaled; }
  // Shell convention: the exit code, or 128 + signal.
  int ShellCode() const { return Signaled() ? 128 + code : code; }
  // torchrun's convention: the exit code, or minus the signal number.
  int TorchrunCode() const { return Signaled() ? -code : code; }
};

// "SIGTERM" for 15; std::nullopt for numbers that are no signal.
std::optional<std::string> SignalName(int signal);
// 15 for "SIGTERM" or "TERM" (case-sensitive, as torchrun); std::nullopt if unknown.
std::optional<int> SignalNumber(const std::string& name);

}  // namespace ddprun
