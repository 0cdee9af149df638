#include "launcher/process/log_pipe.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>

namespace ddprun::launcher::process {

LogPipe::LogPipe(asio::io_context& io, int read_fd, ChunkHandler on_chunk, LineHandler on_line)
    : pipe_(io, read_fd), on_chunk_(std::move(on_chunk)), on_line_(std::move(on_line)) {
  ::fcntl(read_fd, F_SETFL, ::fcntl(read_fd, F_GETFL) | O_NONBLOCK);
}

LogPipe::~LogPipe() { *alive_ = false; }

void LogPipe::Start() { ArmRead(); }

void LogPipe::ArmRead() {
  if (!pipe_.is_open()) return;
  pipe_.async_wait(asio::posix::stream_descriptor::wait_read,
                   [this, alive = alive_](const boost::system::error_code& error) {
                     if (error || !*alive || !pipe_.is_open()) return;
                     if (ReadAvailable()) {
                       ArmRead();
                     } else {
                       Finish();
                     }
                   });
}

bool LogPipe::ReadAvailable() {
  std::array<char, 16384> buffer;
  while (true) {
    const ssize_t count = ::read(pipe_.native_handle(), buffer.data(), buffer.size());
    if (count < 0 && errno == EINTR) continue;
    if (count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    if (count <= 0) return false;
    const std::string_view chunk(buffer.data(), static_cast<std::size_t>(count));
    if (on_chunk_) on_chunk_(chunk);
    if (!on_line_) continue;  // a raw relay: no lines to cut
    pending_.append(chunk);
    EmitLines(false);
  }
}

void LogPipe::EmitLines(bool flush_partial) {
  std::size_t start = 0;
  for (std::size_t newline; (newline = pending_.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    if (on_line_) on_line_(std::string_view(pending_).substr(start, newline - start));
  }
  pending_.erase(0, start);
  while (pending_.size() >= kMaxLine) {
    if (on_line_) on_line_(std::string_view(pending_).substr(0, kMaxLine));
    pending_.erase(0, kMaxLine);
  }
  if (flush_partial && !pending_.empty()) {
    if (on_line_) on_line_(pending_);
    pending_.clear();
  }
}

void LogPipe::Finish() {
  if (!pipe_.is_open()) return;
  ReadAvailable();
  EmitLines(true);
  boost::system::error_code ignored;
  pipe_.close(ignored);
}

}  // namespace ddprun::launcher::process
