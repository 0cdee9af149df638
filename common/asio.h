// Project-wide Asio include: Boost 1.74's asio/awaitable.hpp misses <utility> under C++20,
// so every Asio user includes this header instead of <boost/asio.hpp>.
#pragma once
#include <utility>
#include <boost/asio.hpp>

namespace ddprun {
namespace asio = boost::asio;
}  // namespace ddprun
