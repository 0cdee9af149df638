#include "elastic/stack_report.h"

#include <algorithm>
#include <array>
#include <charconv>

namespace ddprun::elastic {
namespace {

constexpr std::string_view kCallFirst = "(most recent call first):";

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// A thread block's first line: "Thread 0x… (most recent call first):", "Current thread 0x… …",
// or "Stack (most recent call first):" (a dump of the current thread alone).
std::optional<ThreadStack> ParseHeader(std::string_view line) {
  if (!EndsWith(line, kCallFirst)) return std::nullopt;
  ThreadStack thread;
  if (line == "Stack " + std::string(kCallFirst)) {
    thread.current = true;
    return thread;
  }
  std::string_view rest;
  if (StartsWith(line, "Current thread ")) {
    thread.current = true;
    rest = line.substr(15);
  } else if (StartsWith(line, "Thread ")) {
    rest = line.substr(7);
  } else {
    return std::nullopt;
  }
  thread.thread = std::string(rest.substr(0, rest.find(' ')));
  return thread;
}

// `  File "<file>", line <N> in <function>` (faulthandler writes ??? for what it lacks).
std::optional<StackFrame> ParseFrame(std::string_view line) {
  constexpr std::string_view kFile = "  File ";
  if (!StartsWith(line, kFile)) return std::nullopt;
  line.remove_prefix(kFile.size());
  const bool quoted = StartsWith(line, "\"");
  const auto line_at = line.rfind(quoted ? "\", line " : ", line ");
  if (line_at == std::string_view::npos) return std::nullopt;
  StackFrame frame;
  frame.file = std::string(quoted ? line.substr(1, line_at - 1) : line.substr(0, line_at));
  line.remove_prefix(line_at + (quoted ? 8 : 7));
  const auto in_at = line.find(" in ");
  if (in_at == std::string_view::npos) return std::nullopt;
  const auto number = line.substr(0, in_at);
  std::from_chars(number.data(), number.data() + number.size(), frame.line);  // ???: 0
  frame.function = std::string(line.substr(in_at + 4));
  return frame;
}

bool HasThread(const std::vector<ThreadStack>& dump, const std::string& id) {
  return std::any_of(dump.begin(), dump.end(),
                     [&](const ThreadStack& thread) { return thread.thread == id; });
}

// Frames of the machinery between a call in the script and the function it called: decorators
// (torch 2 wraps its collectives in c10d_logger's `wrapper`) and nn.Module's call path.
bool IsCallMachinery(const StackFrame& frame) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "wrapper", "_wrapper", "wrapped",          "_wrapped",           "inner",
      "_inner",  "_fn",      "decorate_context", "_wrapped_call_impl", "_call_impl"};
  return std::find(kNames.begin(), kNames.end(), frame.function) != kNames.end();
}

std::string BaseName(const std::string& file) {
  const auto slash = file.rfind('/');
  return slash == std::string::npos ? file : file.substr(slash + 1);
}

std::string At(const StackFrame& frame) {
  return BaseName(frame.file) + ":" + std::to_string(frame.line);
}

// Where a rank with a stack is, without the source line: "in f at file:N" or "at file:N in f".
std::string PlaceText(const RankPlace& place) {
  if (place.call) return "in " + place.call->function + " at " + At(place.user.value());
  if (place.user) return "at " + At(*place.user) + " in " + place.user->function;
  return "in " + place.innermost->function + " at " + At(*place.innermost);
}

std::string RankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(ranks[i]);
  }
  return out;
}

struct Group {
  std::string place;
  const RankPlace* first = nullptr;  // its lowest rank
  std::vector<int> ranks;
};

struct Grouping {
  std::vector<Group> groups;         // ranks with a stack, by lowest rank
  std::optional<std::size_t> stuck;  // the odd group, with two or more groups
  std::vector<int> without_stack;
};

bool InTorchDistributed(const Group& group) {
  return group.first->innermost->file.find("/torch/distributed/") != std::string::npos;
}

Grouping GroupPlaces(const std::vector<RankPlace>& places) {
  std::vector<const RankPlace*> sorted;
  for (const auto& place : places) sorted.push_back(&place);
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const RankPlace* a, const RankPlace* b) { return a->rank < b->rank; });
  Grouping out;
  for (const auto* place : sorted) {
    if (!place->innermost) {
      out.without_stack.push_back(place->rank);
      continue;
    }
    const auto text = PlaceText(*place);
    auto found = std::find_if(out.groups.begin(), out.groups.end(),
                              [&](const Group& group) { return group.place == text; });
    if (found == out.groups.end()) found = out.groups.insert(out.groups.end(), {text, place, {}});
    found->ranks.push_back(place->rank);
  }
  if (out.groups.size() < 2) return out;
  // Smallest; then not inside torch.distributed; then the lowest rank (the groups' order).
  const auto odd =
      std::min_element(out.groups.begin(), out.groups.end(), [](const Group& a, const Group& b) {
        if (a.ranks.size() != b.ranks.size()) return a.ranks.size() < b.ranks.size();
        return !InTorchDistributed(a) && InTorchDistributed(b);
      });
  out.stuck = static_cast<std::size_t>(odd - out.groups.begin());
  return out;
}

std::string WithSource(const Group& group, const SourceLines& source) {
  const auto& user = group.first->user;
  if (!source || !user) return group.place;
  const auto text = source(user->file, user->line);
  if (!text || text->empty()) return group.place;
  return group.place + " (" + *text + ")";
}

}  // namespace

std::vector<ThreadStack> ParseFaulthandlerDump(std::string_view text) {
  std::vector<std::vector<ThreadStack>> dumps;
  bool fresh = true;      // the next thread block starts a new dump
  bool in_block = false;  // frame lines belong to dumps.back().back()
  while (!text.empty()) {
    const auto end = std::min(text.find('\n'), text.size());
    auto line = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (EndsWith(line, "\r")) line.remove_suffix(1);
    if (auto header = ParseHeader(line)) {
      // A thread seen again, or a dump of the current thread alone: a later dump.
      if (fresh || header->thread.empty() || HasThread(dumps.back(), header->thread)) {
        dumps.emplace_back();
      }
      dumps.back().push_back(std::move(*header));
      fresh = false;
      in_block = true;
      continue;
    }
    if (in_block) {
      if (auto frame = ParseFrame(line)) {
        dumps.back().back().frames.push_back(std::move(*frame));
        continue;
      }
      if (line == "  <no Python frame>" || line == "  ...") continue;
    }
    in_block = false;
    if (StartsWith(line, "Fatal Python error") || StartsWith(line, "Timeout (")) fresh = true;
  }
  if (dumps.empty()) return {};
  return std::move(dumps.back());
}

const ThreadStack* MainThread(const std::vector<ThreadStack>& threads) {
  if (threads.empty()) return nullptr;
  for (const auto& thread : threads) {
    if (!thread.frames.empty() && thread.frames.back().function == "<module>") return &thread;
  }
  for (const auto& thread : threads) {
    if (thread.current) return &thread;
  }
  return &threads.front();
}

bool IsLibraryFile(const std::string& file) {
  return file.find("/site-packages/") != std::string::npos ||
         file.find("/dist-packages/") != std::string::npos ||
         file.find("/lib/python3") != std::string::npos || StartsWith(file, "<frozen ");
}

RankPlace PlaceOf(int rank, const std::vector<ThreadStack>& threads) {
  RankPlace place;
  place.rank = rank;
  const auto* main = MainThread(threads);
  if (!main || main->frames.empty()) return place;
  const auto& frames = main->frames;
  place.innermost = frames.front();
  const auto user = std::find_if(frames.begin(), frames.end(), [](const StackFrame& frame) {
    return !IsLibraryFile(frame.file);
  });
  if (user == frames.end() || user == frames.begin()) {
    if (user != frames.end()) place.user = *user;
    return place;
  }
  place.user = *user;
  // What the user's code called, through decorators: the outermost library frame inside the
  // user frame that is not call machinery (all machinery: the one just inside the user frame).
  auto called = std::prev(user);
  for (auto frame = std::prev(user);; --frame) {
    if (!IsCallMachinery(*frame)) {
      called = frame;
      break;
    }
    if (frame == frames.begin()) break;
  }
  place.call = *called;
  return place;
}

std::string DescribePlaces(const std::vector<RankPlace>& places, const SourceLines& source) {
  const auto grouping = GroupPlaces(places);
  std::vector<std::string> parts;
  if (grouping.stuck) {
    const auto& stuck = grouping.groups[*grouping.stuck];
    parts.push_back(RankList(stuck.ranks) + " stuck " + WithSource(stuck, source));
  }
  for (std::size_t i = 0; i < grouping.groups.size(); ++i) {
    if (grouping.stuck == i) continue;
    const auto& group = grouping.groups[i];
    parts.push_back(RankList(group.ranks) + (grouping.stuck ? " waiting " : " ") +
                    WithSource(group, source));
  }
  if (!grouping.without_stack.empty()) {
    parts.push_back(RankList(grouping.without_stack) + ": no Python stack");
  }
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : "; ") + part;
  return out;
}

std::optional<int> OddRank(const std::vector<RankPlace>& places) {
  const auto grouping = GroupPlaces(places);
  if (!grouping.stuck) return std::nullopt;
  const auto& stuck = grouping.groups[*grouping.stuck];
  if (stuck.ranks.size() != 1) return std::nullopt;
  return stuck.ranks.front();
}

}  // namespace ddprun::elastic
