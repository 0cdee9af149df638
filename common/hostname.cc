#include "common/hostname.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

namespace ddprun {

std::string Hostname() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0) return "localhost";
  return name.data();
}

std::string Fqdn() {
  const std::string host = Hostname();
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr) return host;
  const void* address = nullptr;
  socklen_t length = 0;
  if (found->ai_family == AF_INET) {
    address = &reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
    length = sizeof(in_addr);
  } else if (found->ai_family == AF_INET6) {
    address = &reinterpret_cast<sockaddr_in6*>(found->ai_addr)->sin6_addr;
    length = sizeof(in6_addr);
  }
  const int family = found->ai_family;
  hostent entry{};
  hostent* result = nullptr;
  std::vector<char> buffer(16384);
  int error = 0;
  const bool resolved = address != nullptr &&
                        ::gethostbyaddr_r(address, length, family, &entry, buffer.data(),
                                          buffer.size(), &result, &error) == 0 &&
                        result != nullptr;
  ::freeaddrinfo(found);
  if (!resolved) return host;
  std::vector<std::string> names{result->h_name};
  for (char** alias = result->h_aliases; alias && *alias; ++alias) names.emplace_back(*alias);
  for (const auto& name : names) {
    if (name.find('.') != std::string::npos) return name;
  }
  return names.front();
}

}  // namespace ddprun
