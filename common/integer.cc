#include "common/integer.h"

#include <cctype>
#include <charconv>

namespace ddprun {

std::optional<long long> ParseInt(std::string_view text) {
  if (text.size() > 1 && text.front() == '+' && std::isdigit(static_cast<unsigned char>(text[1]))) {
    text.remove_prefix(1);  // from_chars takes '-' only
  }
  long long value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc() || stop != end) return std::nullopt;
  return value;
}

std::string NotAnInteger(std::string_view text) {
  return "'" + std::string(text) + "' is not an integer";
}

}  // namespace ddprun
