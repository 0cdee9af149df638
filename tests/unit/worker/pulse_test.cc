// Built into ddprun_worker_tests only (the shared unit-test glob sees this file too).
#ifdef DDPRUN_WORKER_TESTS
#include "worker/pulse.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace ddprun::worker {
namespace {

// A FIFO in a fresh temporary directory, removed with it; $DDPRUN_PULSE_FILE restored after.
class PulseFifo {
 public:
  PulseFifo() {
    std::string pattern = (std::filesystem::temp_directory_path() / "pulse_test_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    path_ = dir_ + "/pulse";
    REQUIRE(::mkfifo(path_.c_str(), 0600) == 0);
    if (const char* old = std::getenv("DDPRUN_PULSE_FILE")) saved_ = old;
  }
  ~PulseFifo() {
    if (reader_ >= 0) ::close(reader_);
    if (saved_.empty()) {
      ::unsetenv("DDPRUN_PULSE_FILE");
    } else {
      ::setenv("DDPRUN_PULSE_FILE", saved_.c_str(), 1);
    }
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  PulseFifo(const PulseFifo&) = delete;
  PulseFifo& operator=(const PulseFifo&) = delete;

  void OpenReader() {
    reader_ = ::open(path_.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    REQUIRE(reader_ >= 0);
  }
  // What the reader can read now ("" when nothing).
  std::string Drain() {
    char buffer[16];
    const ssize_t got = ::read(reader_, buffer, sizeof buffer);
    return got > 0 ? std::string(buffer, static_cast<std::size_t>(got)) : "";
  }
  const std::string& Path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
  std::string saved_;
  int reader_ = -1;
};

}  // namespace

TEST_CASE("Pulse writes one newline to the FIFO in DDPRUN_PULSE_FILE", "[worker][pulse]") {
  PulseFifo fifo;
  fifo.OpenReader();
  ::setenv("DDPRUN_PULSE_FILE", fifo.Path().c_str(), 1);
  CHECK(Pulse());
  CHECK(fifo.Drain() == "\n");
  CHECK(Pulse());
  CHECK(Pulse());
  CHECK(fifo.Drain() == "\n\n");
}

TEST_CASE("Pulse without DDPRUN_PULSE_FILE delivers nothing", "[worker][pulse]") {
  PulseFifo fifo;
  ::unsetenv("DDPRUN_PULSE_FILE");
  CHECK_FALSE(Pulse());
  ::setenv("DDPRUN_PULSE_FILE", "", 1);
  CHECK_FALSE(Pulse());
}

TEST_CASE("Pulse to a FIFO nobody reads returns false without blocking", "[worker][pulse]") {
  PulseFifo fifo;
  ::setenv("DDPRUN_PULSE_FILE", fifo.Path().c_str(), 1);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(Pulse());
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  ::setenv("DDPRUN_PULSE_FILE", (fifo.Path() + ".missing").c_str(), 1);
  CHECK_FALSE(Pulse());
}

}  // namespace ddprun::worker
#endif  // DDPRUN_WORKER_TESTS
