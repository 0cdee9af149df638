// Catch2 runner for every unit test; the launcher's own log is silenced so that test output
// shows only Catch2's report.
#define CATCH_CONFIG_RUNNER
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::off);
  return Catch::Session().run(argc, argv);
}
