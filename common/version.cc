#include "common/version.h"

// Regenerated at every build by cmake/GitRevision.cmake, rewritten only when it changes, so
// that a new commit recompiles this file alone.
#include "ddprun_git_revision.h"

namespace ddprun {

const char* Version() { return DDPRUN_VERSION; }

const char* GitRevision() { return DDPRUN_GIT_REVISION; }

std::string VersionLine(const std::string& program) {
  return program + " " + Version() + " (git " + GitRevision() + ")";
}

}  // namespace ddprun
