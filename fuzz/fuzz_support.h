// What the fuzz targets share: Require (a broken invariant aborts, so libFuzzer reports the
// input as a crash) and the text formats of the targets that read a command line and an
// environment: "<argv words>\n@env\nNAME=VALUE\n...". Words are split at blanks, '...' and
// "..." group (no escapes; '' is an empty word); a value's \n and \\ are a newline and a
// backslash. Header only; no project includes.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddprun::fuzz {

// A real bug: the input reaches a state the code promises never to reach.
inline void Require(bool ok, const char* what, const std::string& detail = "") {
  if (ok) return;
  std::fprintf(stderr, "fuzz: invariant broken: %s%s%s\n", what, detail.empty() ? "" : ": ",
               detail.c_str());
  std::abort();
}

inline std::string AsText(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

struct CommandInput {
  std::string command;                     // the text before the "@env" line
  std::map<std::string, std::string> env;  // the NAME=VALUE lines after it
};

inline std::string Unescape(const std::string& value) {
  std::string out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    if (value[i] == '\\' && i + 1 < value.size() && (value[i + 1] == 'n' || value[i + 1] == '\\')) {
      out += value[i + 1] == 'n' ? '\n' : '\\';
      ++i;
    } else {
      out += value[i];
    }
  }
  return out;
}

inline CommandInput ParseCommandInput(const std::string& text) {
  CommandInput input;
  std::size_t marker = text.starts_with("@env\n") ? 0 : text.find("\n@env\n");
  if (marker == std::string::npos) {
    input.command = text;
    return input;
  }
  input.command = text.substr(0, marker);
  std::size_t start = text.find('\n', marker + 1) + 1;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    const std::string line = text.substr(start, end - start);
    const std::size_t equals = line.find('=');
    if (equals != std::string::npos)
      input.env[line.substr(0, equals)] = Unescape(line.substr(equals + 1));
    start = end + 1;
  }
  return input;
}

inline std::vector<std::string> SplitWords(const std::string& text) {
  std::vector<std::string> words;
  std::optional<std::string> word;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (word) words.push_back(*word);
      word.reset();
    } else if (c == '\'' || c == '"') {
      const std::size_t close = std::min(text.find(c, i + 1), text.size());
      word = word.value_or("") + text.substr(i + 1, close - i - 1);
      i = close;
    } else {
      word = word.value_or("") + c;
    }
  }
  if (word) words.push_back(*word);
  return words;
}

}  // namespace ddprun::fuzz
