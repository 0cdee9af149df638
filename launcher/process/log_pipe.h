// Reads one worker stream from a pipe on the event loop and hands it on: raw bytes to a
// callback (for the log file) and complete lines to another (for the console).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/asio.h"

namespace ddprun::launcher::process {

class LogPipe {
 public:
  using ChunkHandler = std::function<void(std::string_view chunk)>;
  using LineHandler = std::function<void(std::string_view line)>;  // without the '\n'

  // Takes ownership of `read_fd` (made non-blocking). A null `on_line` passes chunks only.
  // Also reads a pseudo-terminal's master (EIO once the last slave closed ends it) and a FIFO
  // held open read-write (never ends by itself).
  LogPipe(asio::io_context& io, int read_fd, ChunkHandler on_chunk, LineHandler on_line);
  ~LogPipe();
  LogPipe(const LogPipe&) = delete;
  LogPipe& operator=(const LogPipe&) = delete;

  void Start();
  // Reads everything buffered in the pipe now (the worker has exited, so all it wrote is
  // there; a grandchild still holding the pipe open is not waited for), emits a partial last
  // line, and closes the pipe.
  void Finish();

 private:
  void ArmRead();
  // Reads until the pipe would block; returns false at end of file or on error.
  bool ReadAvailable();
  void EmitLines(bool flush_partial);

  static constexpr std::size_t kMaxLine = 64 * 1024;  // longer lines are split
  asio::posix::stream_descriptor pipe_;
  ChunkHandler on_chunk_;
  LineHandler on_line_;
  std::string pending_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ddprun::launcher::process
