// What every ddprun program reports with --version: the project version and the git revision
// of the tree it was built from, e.g. "ddprun 0.1.0 (git bebf934c1a2b)". The revision is
// "<12 hex digits>-dirty" when tracked files had local changes, "unknown" outside a git checkout
// (or DDPRUN_GIT_REVISION given to CMake, for builds from a source archive).
#pragma once
#include <string>

namespace ddprun {

const char* Version();      // "0.1.0"
const char* GitRevision();  // "bebf934c1a2b", "bebf934c1a2b-dirty" or "unknown"
// "<program> <version> (git <revision>)"
std::string VersionLine(const std::string& program);

}  // namespace ddprun
