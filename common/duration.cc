#include "common/duration.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace ddprun {
namespace {

// "12.340" from 12340 (thousandths): the whole part, then `decimals` of the three decimals.
std::string Digits(std::uint64_t thousandths, int decimals) {
  std::string text = std::to_string(thousandths / 1000);
  if (decimals == 0) return text;
  std::string fraction = std::to_string(1000 + thousandths % 1000).substr(1);  // "340"
  return text + "." + fraction.substr(0, static_cast<std::size_t>(decimals));
}

// |count| without overflowing at the most negative value.
std::uint64_t Magnitude(std::int64_t count) {
  return count < 0 ? 0 - static_cast<std::uint64_t>(count) : static_cast<std::uint64_t>(count);
}

std::string Signed(std::int64_t count, std::string digits) {
  return (count < 0 ? "-" : "") + digits + " s";
}

}  // namespace

std::string DurationText(std::chrono::milliseconds duration) {
  std::string digits = Digits(Magnitude(duration.count()), 3);
  digits.erase(digits.find_last_not_of('0') + 1);
  if (digits.back() == '.') digits.pop_back();
  return Signed(duration.count(), digits);
}

std::string DurationText(std::chrono::milliseconds duration, int decimals) {
  decimals = std::clamp(decimals, 0, 3);
  std::uint64_t step = 1;
  for (int place = decimals; place < 3; ++place) step *= 10;
  const std::uint64_t magnitude = Magnitude(duration.count());
  const std::uint64_t rounded = (magnitude / step + (magnitude % step * 2 >= step ? 1 : 0)) * step;
  return Signed(duration.count(), Digits(rounded, decimals));
}

}  // namespace ddprun
