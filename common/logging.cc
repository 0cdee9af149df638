#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

#include <cstdlib>
#include <string>

namespace ddprun {
namespace {

spdlog::level::level_enum LevelFromEnv() {
  const char* raw = std::getenv("LOGLEVEL");
  const std::string level = raw ? raw : "WARNING";
  if (level == "DEBUG") return spdlog::level::debug;
  if (level == "INFO") return spdlog::level::info;
  if (level == "ERROR") return spdlog::level::err;
  if (level == "CRITICAL") return spdlog::level::critical;
  return spdlog::level::warn;
}

}  // namespace

void InitLogging() {
  auto logger = spdlog::stderr_logger_st("ddprun");
  spdlog::drop("ddprun");
  logger->set_pattern("[ddprun] %L%m%d %H:%M:%S.%e %P] %v");
  logger->set_level(LevelFromEnv());
  spdlog::set_default_logger(logger);
}

}  // namespace ddprun
