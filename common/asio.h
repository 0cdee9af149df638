// Project-wide Asio include: Boost 1.74's asio/awaitable.hpp misses <utility> under C++20,
// so every Asio user includes this header instead of <boost/asio.hpp>.
#pragma once
// <utility> first (see above), where include sorting would not put it.
// clang-format off
#include <utility>
#include <boost/asio.hpp>
// clang-format on

namespace ddprun {
namespace asio = boost::asio;

// Concurrency hint for an io_context that one thread runs (every one in this project): handlers
// posted from that thread then go to a thread-private queue instead of waking the reactor,
// which saves an epoll_ctl per completed operation. Posting from other threads stays safe.
inline constexpr int kOneThread = 1;
}  // namespace ddprun
