// Bounds of the TCP store server: per-request sizes (the libuv backend's by default), and the
// totals that keep one server from growing without bound. Exceeding a per-request or
// per-connection bound closes only that connection.
#pragma once
#include <chrono>
#include <cstddef>

#include "store/store_protocol.h"

namespace ddprun::store {

struct ServerLimits {
  std::size_t max_key_bytes = 8192;
  std::size_t max_value_bytes = 8u << 20;
  std::size_t max_keys_per_request = 131072;
  std::size_t max_request_bytes = 64u << 20;  // one whole request, e.g. a MULTI_SET
  std::size_t max_connections = 16384;        // more are accepted and closed at once
  std::size_t max_waiters = 1u << 20;         // (waiter, key) registrations of all connections
  std::size_t max_output_bytes = 64u << 20;   // unread replies queued for one connection
  std::size_t max_keys = 1u << 22;            // keys plus queued items in the key space
  std::size_t max_stored_bytes = std::size_t{4} << 30;  // key and value bytes in the key space
  // With a token: how long a new connection has to authenticate before it is closed.
  std::chrono::milliseconds auth_timeout{10'000};

  ProtocolLimits Protocol() const {
    return {max_key_bytes, max_value_bytes, max_keys_per_request, max_request_bytes};
  }
};

}  // namespace ddprun::store
