#include "common/errors.h"

#include <cstring>

namespace ddprun {

std::string ErrnoMessage(const std::string& what, int err) {
  return what + ": " + std::strerror(err);
}

}  // namespace ddprun
