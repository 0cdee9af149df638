// Integers read from text (options, environment variables, values in the store): one grammar,
// and one wording when the text is not one.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace ddprun {

// A decimal integer: an optional sign ('+' or '-') then digits, and nothing else (no blanks, no
// base prefix, no trailing text). None for any other text, or a value outside long long.
// Callers that take more (Python's int() strips blanks) or less (plain digits) say so first.
std::optional<long long> ParseInt(std::string_view text);

// The refusal of `text` as an integer, the one wording: "'four' is not an integer". A caller
// names what was read in front: "WORLD_SIZE=" + NotAnInteger("four").
std::string NotAnInteger(std::string_view text);

}  // namespace ddprun
