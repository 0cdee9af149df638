// Byte-vector shorthands for the store tests: B("text") and Hex("00 ce f7 85 3c").
#pragma once
#include <cstdint>
#include <string>

#include "store/store.h"

namespace ddprun::store::testing {

inline Bytes B(const std::string& text) { return Store::ToBytes(text); }

// Hex digit pairs, blanks ignored.
inline Bytes Hex(std::string text) {
  std::erase(text, ' ');
  Bytes out;
  for (std::size_t i = 0; i + 1 < text.size(); i += 2) {
    out.push_back(static_cast<std::uint8_t>(std::stoi(text.substr(i, 2), nullptr, 16)));
  }
  return out;
}

}  // namespace ddprun::store::testing
