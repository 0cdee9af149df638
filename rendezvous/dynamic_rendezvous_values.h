// Helpers shared by dynamic_rendezvous*.cc: reading ints from the JSON values the round
// protocol keeps in the store, and durations as "1.5 s".
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

namespace ddprun::rendezvous::values {

using Json = nlohmann::json;

// An int-valued field of a value read from the store: a JSON integer within int's range
// (get<int>() would convert a float or a larger number instead, undefined for a float).
// Throws std::invalid_argument naming the field.
inline int IntValue(const Json& value, const std::string& what) {
  const bool fits = value.is_number_unsigned()
                        ? std::in_range<int>(value.get<std::uint64_t>())
                        : value.is_number_integer() && std::in_range<int>(value.get<std::int64_t>());
  if (!fits) throw std::invalid_argument(what + " is not an int");
  return value.get<int>();
}

inline int IntField(const Json& json, const char* name) {
  return IntValue(json.at(name), std::string("\"") + name + "\"");
}

inline int IntAt(const Json& array, std::size_t index) {
  return IntValue(array.at(index), "entry " + std::to_string(index));
}

inline std::string Seconds(std::chrono::milliseconds duration) {
  const double seconds = static_cast<double>(duration.count()) / 1000.0;
  std::string text = std::to_string(seconds);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text + " s";
}

}  // namespace ddprun::rendezvous::values
