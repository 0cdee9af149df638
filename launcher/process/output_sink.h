// Destinations for worker output: whole-line writes to the launcher's console (one write(2)
// per line, so lines of different workers never interleave) and append-only log files.
#pragma once
#include <string>
#include <string_view>

namespace ddprun::launcher::process {

// Writes all of `data` to `fd`, retrying on EINTR and short writes; errors are ignored
// (a closed console must not stop the launcher).
void WriteAll(int fd, std::string_view data);

// An owned file descriptor opened for writing (created, truncated, close-on-exec).
class OutputFile {
 public:
  OutputFile() = default;
  // Throws SystemError naming the path.
  explicit OutputFile(const std::string& path);
  ~OutputFile();
  OutputFile(OutputFile&& other) noexcept;
  OutputFile& operator=(OutputFile&& other) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  int Fd() const { return fd_; }
  bool IsOpen() const { return fd_ >= 0; }
  void Write(std::string_view data) const {
    if (fd_ >= 0) WriteAll(fd_, data);
  }

 private:
  int fd_ = -1;
};

}  // namespace ddprun::launcher::process
