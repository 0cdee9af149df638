// Test helpers for the TCP store: a server running on its own io thread, and a raw socket
// connection that speaks bytes, with a receive deadline so no test can hang.
#pragma once
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/asio.h"
#include "store/store_server_thread.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"

namespace ddprun::store::testing {

// ServerOptions with `io_threads` connection threads (tests run both 1 and several).
inline ServerOptions Threads(int io_threads, ServerOptions options = {}) {
  options.io_threads = io_threads;
  return options;
}

// The store server thread (store/store_server_thread.h) with what the store tests ask of it.
class ServerThread : public StoreServerThread {
 public:
  explicit ServerThread(ServerOptions options = {}) : StoreServerThread(options) {}

  std::size_t WaiterRegistrations() {
    return WithKeys([](KeySpace& keys) { return keys.WaiterRegistrations(); });
  }
  // Waits (bounded by `within`, a failed REQUIRE past it) until the server holds `count` wait
  // registrations.
  void AwaitWaiters(std::size_t count,
                    std::chrono::steady_clock::duration within = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + within;
    while (WaiterRegistrations() != count) {
      REQUIRE(std::chrono::steady_clock::now() < deadline);
      std::this_thread::yield();
    }
  }

  ClientOptions Client(Generation generation = Generation::kValidated) const {
    ClientOptions options;
    options.port = Port();
    options.timeout = std::chrono::seconds(10);
    options.connect_timeout = std::chrono::seconds(10);
    options.generation = generation;
    return options;
  }
};

// A blocking loopback socket with a 10 s receive timeout.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error("socket failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect failed");
    }
    timeval timeout{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  void Send(const Bytes& bytes) {
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size())) {
      throw std::runtime_error("send failed");
    }
  }
  // Reads exactly n bytes; throws on EOF, error or timeout.
  Bytes Read(std::size_t n) {
    Bytes out(n);
    std::size_t got = 0;
    while (got < n) {
      const ssize_t r = ::recv(fd_, out.data() + got, n - got, 0);
      if (r <= 0) throw std::runtime_error("recv ended early");
      got += static_cast<std::size_t>(r);
    }
    return out;
  }
  // True when the server closed the connection (EOF or reset) within the receive timeout.
  bool Closed() {
    std::uint8_t byte = 0;
    const ssize_t r = ::recv(fd_, &byte, 1, 0);
    return r == 0 || (r < 0 && errno == ECONNRESET);
  }
  int Fd() const { return fd_; }

 private:
  int fd_ = -1;
};

inline Bytes Concat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const auto& part : parts) out.insert(out.end(), part.begin(), part.end());
  return out;
}

inline Bytes Hello() {
  return Concat(
      {EncodeRequest(Generation::kValidated, {Command::kValidate, {}, {}, 0, kValidationMagic})});
}

}  // namespace ddprun::store::testing
