#include "worker/pulse.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "common/env_names.h"

namespace ddprun::worker {

bool Pulse() noexcept {
  const char* path = std::getenv(env::kPulseFile);
  if (path == nullptr || *path == '\0') return false;
  // O_NONBLOCK: a FIFO without a reader fails with ENXIO at once instead of blocking the open.
  const int fd = ::open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t written = -1;
  do {
    written = ::write(fd, "\n", 1);
  } while (written < 0 && errno == EINTR);
  ::close(fd);
  return written == 1;
}

}  // namespace ddprun::worker
