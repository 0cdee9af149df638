// Helpers of the real-process tests: a shell worker, a bounded event loop run, a temp dir.
#pragma once
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "common/asio.h"
#include "elastic/process_context.h"

namespace ddprun::launcher::process::testing {

inline elastic::WorkerLaunch Shell(int local_rank, const std::string& script) {
  elastic::WorkerLaunch launch;
  launch.local_rank = local_rank;
  launch.argv = {"/bin/sh", "-c", script};
  launch.env = {{"PATH", "/usr/bin:/bin"}};
  return launch;
}

// Runs the loop until `done` or a 20 s deadline (so a broken test fails instead of hanging).
inline void RunUntil(asio::io_context& io, const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  io.restart();
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(50));
  }
  REQUIRE(done());
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/ddprun_test_XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() {
    std::error_code ignored;  // a test that failed may leave it half made
    std::filesystem::remove_all(path, ignored);
  }
  std::string path;
};

}  // namespace ddprun::launcher::process::testing
