// Typed errors. UsageError carries a one-line message for a bad command line or
// environment (exit code 2); the others are recoverable conditions control flow branches on.
#pragma once
#include <stdexcept>
#include <string>

namespace ddprun {

// Bad input from the user: flags, PET_* variables, files. main prints it and exits 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A failure of the environment (a system call, a network peer) the launcher cannot recover
// from; main prints it and exits 1.
class SystemError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Builds "<call>: <strerror(errno)>"-style messages for failed system calls.
std::string ErrnoMessage(const std::string& what, int err);

}  // namespace ddprun
