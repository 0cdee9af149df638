// Helpers shared by dynamic_rendezvous*.cc: reading ints from the JSON and text values the round
// protocol keeps in the store.
#pragma once
#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "common/integer.h"

namespace ddprun::rendezvous::values {

using Json = nlohmann::json;

// An int-valued field of a value read from the store: a JSON integer within T's range
// (get<T>() would convert a float or a larger number instead, undefined for a float).
// Throws std::invalid_argument naming the field.
template <typename T = int>
T IntValue(const Json& value, const std::string& what) {
  const bool fits = value.is_number_unsigned()
                        ? std::in_range<T>(value.get<std::uint64_t>())
                        : value.is_number_integer() && std::in_range<T>(value.get<std::int64_t>());
  if (!fits) throw std::invalid_argument(what + " is not an int");
  return value.get<T>();
}

inline int IntField(const Json& json, const char* name) {
  return IntValue(json.at(name), std::string("\"") + name + "\"");
}

// An integer kept as text (a beat's time, a counter): throws std::invalid_argument otherwise.
inline std::int64_t IntText(const std::string& text) {
  const auto value = ParseInt(text);
  if (!value) throw std::invalid_argument(NotAnInteger(text));
  return *value;
}

inline int IntAt(const Json& array, std::size_t index) {
  return IntValue(array.at(index), "entry " + std::to_string(index));
}

}  // namespace ddprun::rendezvous::values
