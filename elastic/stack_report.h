// Reads the Python stacks workers write when asked for them (faulthandler's dump after SIGABRT,
// PYTHONFAULTHANDLER set) and says where each rank is stuck, picking out the odd one:
//   "rank 1 stuck at train.py:42 in step (time.sleep(60)); ranks 0, 2, 3 waiting in all_reduce
//    at train.py:50"
// Pure: the text comes from the worker's stderr, source lines through a callback.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ddprun::elastic {

struct StackFrame {
  std::string file;      // as printed: "/usr/lib/python3/dist-packages/torch/distributed/..."
  int line = 0;
  std::string function;  // "all_reduce", "<module>"
};

struct ThreadStack {
  std::string thread;          // "0x00007f..." as printed
  bool current = false;        // faulthandler's "Current thread"
  std::vector<StackFrame> frames;  // innermost first, as faulthandler prints them
};

// The threads of the last faulthandler dump in `text` ("Thread 0x… (most recent call first):"
// / "Current thread 0x… …" blocks, each followed by `  File "…", line N in f` lines). Other
// lines before, between and after are ignored; "  <no Python frame>" gives an empty thread.
// Empty when `text` holds no dump.
std::vector<ThreadStack> ParseFaulthandlerDump(std::string_view text);

// The thread that runs the script: the one whose outermost frame is "<module>" (else the
// current thread, else the first). nullptr when `threads` is empty.
const ThreadStack* MainThread(const std::vector<ThreadStack>& threads);

// Where one rank is: its main thread's innermost frame, and the innermost frame of the
// script's own code (not under site-packages, dist-packages or the Python library).
struct RankPlace {
  int rank = 0;
  std::optional<StackFrame> innermost;  // nullopt: no stack (not Python, exited, D state)
  std::optional<StackFrame> user;       // nullopt when every frame is library code
};

RankPlace PlaceOf(int rank, const std::vector<ThreadStack>& threads);

// Reads line `line` of `file`, trimmed; nullopt when unreadable.
using SourceLines = std::function<std::optional<std::string>(const std::string& file, int line)>;

// One line for the failure summary. Ranks are grouped by (innermost function, user file:line).
// With two or more groups the smallest group (ties: the one whose innermost frame is not in
// torch.distributed; then the lowest rank) is "stuck at …", the others "waiting in <function>
// at …". One group: "ranks 0, 1 in <function> at …". Ranks without a stack: "rank 4: no
// Python stack". The user frame's source line, when `source` gives one, follows in parentheses.
// File names are shown as their base name. Empty when `places` is empty.
std::string DescribePlaces(const std::vector<RankPlace>& places, const SourceLines& source = {});

// The rank picked out as the odd one (the "stuck at" group when it has exactly one rank).
std::optional<int> OddRank(const std::vector<RankPlace>& places);

}  // namespace ddprun::elastic
