// What the bundled programs' command lines share: --version (with the git revision), and type
// names that list a closed set of values, "TEXT:{auto,cpu,nccl}" as CLI::IsMember prints them,
// so that --help and the shell completion read from it (completion/cli11_help.h) offer them.
// The values themselves are still checked by ParseBackend / ParseDataType (aliases included).
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "common/version.h"
#include "worker/data_type.h"

namespace ddprun::worker {

inline void AddVersionFlag(CLI::App& app, const char* program) {
  app.set_version_flag("--version", VersionLine(program), "print the version and exit");
}

inline std::string ChoicesTypeName(const std::vector<std::string>& values) {
  std::string joined;
  for (const std::string& value : values) joined += (joined.empty() ? "" : ",") + value;
  return "TEXT:{" + joined + "}";
}

inline std::string BackendTypeName() { return ChoicesTypeName({"auto", "cpu", "nccl"}); }

inline std::string DataTypeTypeName() {
  std::vector<std::string> names;
  for (DataType type : AllDataTypes()) names.push_back(DataTypeName(type));
  return ChoicesTypeName(names);
}

}  // namespace ddprun::worker
