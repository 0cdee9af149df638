#include "elastic/arg_template.h"

#include <cctype>

namespace ddprun::elastic {
namespace {

bool IsIdentStart(char c) { return c == '_' || std::isalpha(static_cast<unsigned char>(c)); }
bool IsIdentChar(char c) { return c == '_' || std::isalnum(static_cast<unsigned char>(c)); }

// Length of the identifier starting at `pos` (0 when there is none).
std::size_t IdentLength(const std::string& text, std::size_t pos) {
  if (pos >= text.size() || !IsIdentStart(text[pos])) return 0;
  std::size_t end = pos + 1;
  while (end < text.size() && IsIdentChar(text[end])) ++end;
  return end - pos;
}

}  // namespace

std::string SafeSubstitute(const std::string& text,
                           const std::map<std::string, std::string>& values) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    if (text[pos] != '$') {
      out += text[pos++];
      continue;
    }
    if (pos + 1 < text.size() && text[pos + 1] == '$') {
      out += '$';
      pos += 2;
      continue;
    }
    const bool braced = pos + 1 < text.size() && text[pos + 1] == '{';
    const std::size_t name_pos = pos + (braced ? 2 : 1);
    const std::size_t length = IdentLength(text, name_pos);
    const std::size_t end = name_pos + length + (braced ? 1 : 0);
    const bool well_formed =
        length > 0 && (!braced || (end <= text.size() && text[end - 1] == '}'));
    const auto found = well_formed ? values.find(text.substr(name_pos, length)) : values.end();
    if (found == values.end()) {
      out += '$';
      ++pos;
      continue;
    }
    out += found->second;
    pos = end;
  }
  return out;
}

}  // namespace ddprun::elastic
