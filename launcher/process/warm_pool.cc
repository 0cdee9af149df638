#include "launcher/process/warm_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "common/errors.h"
#include "common/exit_status.h"
#include "common/logging.h"
#include "launcher/process/pidfd.h"
#include "launcher/process/warm_pool_source.h"

namespace ddprun::launcher::process {
namespace {

constexpr std::size_t kMaxMessage = 64 * 1024;  // the pool's messages are small
constexpr int kMaxFds = 4;  // the worker's stdin, stdout, stderr, and the session keeper's pipe
constexpr int kSendBuffer = 2 << 20;  // a fork request carries the environment (capped by
                                      // net.core.wmem_max)

// The pool's arguments: its end of the socket, sys.path[0] and the modules to import.
std::string PoolArguments(const WarmPoolOptions& options) {
  return nlohmann::json{{"fd", 3},
                        {"path0", options.path0},
                        {"preload", options.preload},
                        {"cgroup", options.job_cgroup_dir}}
      .dump();
}

std::string EndText(int wait_status) {
  const ExitStatus status = ExitStatus::FromWaitStatus(wait_status);
  if (!status.Signaled()) return "exited with code " + std::to_string(status.code);
  return "was killed by " + SignalName(status.code).value_or(std::to_string(status.code));
}

std::string Joined(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

// Sends one datagram with `fds` (at most kMaxFds) attached.
bool SendWithFds(int socket_fd, const std::string& text, const std::vector<int>& fds) {
  iovec data{const_cast<char*>(text.data()), text.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  const std::size_t fd_bytes = sizeof(int) * fds.size();
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = CMSG_SPACE(fd_bytes);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(fd_bytes);
  std::memcpy(CMSG_DATA(header), fds.data(), fd_bytes);
  ssize_t sent;
  while ((sent = ::sendmsg(socket_fd, &message, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  return sent == static_cast<ssize_t>(text.size());
}

// One datagram if one is waiting: its text, "" at end of file, nullopt when none is there.
std::optional<std::string> ReceiveNow(int socket_fd) {
  std::string buffer(kMaxMessage, '\0');
  ssize_t size;
  while ((size = ::recv(socket_fd, buffer.data(), buffer.size(), MSG_DONTWAIT)) < 0 &&
         errno == EINTR) {
  }
  if (size < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    return std::string();  // a broken socket reads as the end
  }
  buffer.resize(static_cast<std::size_t>(size));
  return buffer;
}

}  // namespace

WarmPool::WarmPool(asio::io_context& io, WarmPoolOptions options, ExitHandler on_exit,
                   GoneHandler on_gone)
    : io_(io),
      options_(std::move(options)),
      on_exit_(std::move(on_exit)),
      on_gone_(std::move(on_gone)) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    Fail(ErrnoMessage("socketpair", errno));
    return;
  }
  const int devnull = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  SpawnRequest request;
  request.argv = {options_.python, "-u", "-c", kWarmPoolSource, PoolArguments(options_)};
  request.env = options_.env;
  request.stdout_fd = devnull;
  request.session_keeper_fd = options_.session_keeper_fd;
  request.job_cgroup_fd = options_.job_cgroup_fd;
  request.inherited_fd = fds[1];
  const SpawnResult spawned = SpawnWorker(request);
  ::close(fds[1]);
  if (devnull >= 0) ::close(devnull);
  socket_fd_ = fds[0];
  ::setsockopt(socket_fd_, SOL_SOCKET, SO_SNDBUF, &kSendBuffer, sizeof kSendBuffer);
  socket_watch_ = std::make_unique<asio::posix::stream_descriptor>(io_, socket_fd_);
  if (spawned.pid < 0) {
    Fail(spawned.error);
    return;
  }
  pid_ = spawned.pid;
  WatchSocket();
  WatchPool();
}

WarmPool::~WarmPool() {
  *alive_ = false;
  socket_watch_.reset();  // end of file: the pool exits
  pool_watch_.reset();
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void WarmPool::WatchSocket() {
  socket_watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                            [this, alive = alive_](const boost::system::error_code& error) {
                              if (!*alive || error || failed_) return;
                              if (Drain()) WatchSocket();
                            });
}

void WarmPool::WatchPool() {
  const int pidfd = PidfdOpen(pid_);
  if (pidfd < 0) return;  // the socket's end of file still tells
  pool_watch_ = std::make_unique<asio::posix::stream_descriptor>(io_, pidfd);
  pool_watch_->async_wait(asio::posix::stream_descriptor::wait_read,
                          [this, alive = alive_](const boost::system::error_code& error) {
                            if (!*alive || error) return;
                            int status = 0;
                            if (::waitpid(pid_, &status, WNOHANG) != pid_) return;
                            pid_ = -1;
                            Drain();  // what it said before it went
                            Fail("the warm pool " + EndText(status));
                          });
}

bool WarmPool::Drain() {
  while (!failed_) {
    const auto datagram = ReceiveNow(socket_fd_);
    if (!datagram) return true;
    if (datagram->empty()) {  // the pool is ending: its pidfd says how (WatchPool)
      if (!pool_watch_) Fail("the warm pool closed its socket");
      return false;
    }
    Dispatch(*datagram);
  }
  return false;
}

std::optional<std::string> WarmPool::Dispatch(const std::string& datagram) {
  const auto message = nlohmann::json::parse(datagram, nullptr, false);
  if (!message.is_object()) {
    Fail("the warm pool sent a malformed message");
    return std::nullopt;
  }
  if (message.contains("forked") || message.contains("fork_failed")) return datagram;
  if (message.contains("exit")) {
    const pid_t pid = message.value("exit", -1);
    const int status = message.value("status", 0);
    asio::post(io_, [this, alive = alive_, pid, status] {
      if (*alive) on_exit_(pid, status);
    });
  } else if (message.contains("ready")) {
    if (!message.value("ready", false)) {
      Fail(message.value("reason", std::string("the warm pool is not ready")),
           options_.quiet_without_torch && message.value("no_torch", false));
      return std::nullopt;
    }
    ready_ = true;
    preload_s_ = message.value("preload_s", 0.0);
    spdlog::info("warm pool ready: {} imported in {:.2f} s (pid {}); restarts fork from it",
                 Joined(options_.preload), *preload_s_, pid_);
  }
  return std::nullopt;
}

void WarmPool::Fail(const std::string& why, bool quiet) {
  if (failed_) return;
  failed_ = true;
  failure_ = why;
  spdlog::log(quiet ? spdlog::level::info : spdlog::level::warn,
              "warm restart off for the rest of this job: {}; workers are exec'd", why);
  asio::post(io_, [this, alive = alive_] {
    if (*alive && on_gone_) on_gone_();
  });
}

SpawnResult WarmPool::Fork(const elastic::WarmEntry& entry,
                           const std::map<std::string, std::string>& env,
                           const std::vector<int>& cpus, int stdout_fd, int stderr_fd) {
  if (!Ready()) return {-1, 126, "the warm pool is not ready"};
  const int id = ++next_id_;
  const nlohmann::json request{{"fork",
                                {{"id", id},
                                 {"argv", entry.argv},
                                 {"env", env},
                                 {"mode", entry.module ? "module" : "path"},
                                 {"target", entry.target},
                                 {"cpus", cpus}}}};
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  std::vector<int> fds{devnull, stdout_fd >= 0 ? stdout_fd : STDOUT_FILENO,
                       stderr_fd >= 0 ? stderr_fd : STDERR_FILENO};
  if (options_.session_keeper_fd >= 0) fds.push_back(options_.session_keeper_fd);
  const bool sent = devnull >= 0 && SendWithFds(socket_fd_, request.dump(), fds);
  const int send_error = errno;
  if (devnull >= 0) ::close(devnull);
  if (!sent) {
    Fail(ErrnoMessage("cannot send a fork request to the warm pool", send_error));
    return {-1, 126, failure_};
  }
  const auto deadline = std::chrono::steady_clock::now() + options_.reply_timeout;
  while (!failed_) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd readable{socket_fd_, POLLIN, 0};
    const int polled = ::poll(&readable, 1, static_cast<int>(std::max<long long>(0, left.count())));
    if (polled < 0 && errno == EINTR) continue;
    if (polled == 0) {
      Fail("the warm pool did not answer a fork request within " +
           std::to_string(options_.reply_timeout.count() / 1000) + " s");
      break;
    }
    const auto datagram = ReceiveNow(socket_fd_);
    if (!datagram) continue;
    if (datagram->empty()) {
      Fail("the warm pool closed its socket");
      break;
    }
    const auto reply = Dispatch(*datagram);
    if (!reply) continue;
    const auto answer = nlohmann::json::parse(*reply, nullptr, false);
    if (answer.value("id", -1) != id) continue;  // an answer to an abandoned request
    if (answer.contains("forked")) return {answer.value("forked", -1), 0, ""};
    Fail("the warm pool could not fork: " + answer.value("fork_failed", std::string("?")));
  }
  return {-1, 126, failure_};
}

}  // namespace ddprun::launcher::process
