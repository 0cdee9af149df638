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
  std::string file;  // as printed: "/usr/lib/python3/dist-packages/torch/distributed/..."
  int line = 0;
  std::string function;  // "all_reduce", "<module>"
};

struct ThreadStack {
  std::string thread;              // "0x00007f..." as printed
  bool current = false;            // faulthandler's "Current thread"
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

// Where one rank is: its main thread's innermost frame, the innermost frame of the script's own
// code (not under site-packages, dist-packages or the Python library, /lib/python3*), and the
// library function that code called: the frame just inside the user frame, decorator frames
// skipped (torch 2's c10d_logger `wrapper` around its collectives), so that it names the API
// the script called ("all_reduce", not "wrapper" or an internal helper).
struct RankPlace {
  int rank = 0;
  std::optional<StackFrame> innermost;  // nullopt: no stack (not Python, exited, D state)
  std::optional<StackFrame> user;       // nullopt when every frame is library code
  std::optional<StackFrame> call;  // nullopt: the innermost frame is the user's, or no frame is
};

// Whether `file` is library code: under site-packages, dist-packages, the Python library
// (/lib/python3...) or frozen ("<frozen ...>").
bool IsLibraryFile(const std::string& file);

RankPlace PlaceOf(int rank, const std::vector<ThreadStack>& threads);

// Reads line `line` of `file`, trimmed; nullopt when unreadable.
using SourceLines = std::function<std::optional<std::string>(const std::string& file, int line)>;

// One line for the failure summary. Ranks are grouped by where they are: the called library
// function (`call`, else the innermost frame's function) and the user frame's file:line (else
// the innermost frame's). A place reads "in <function> at <file>:<line>", or, when the
// innermost frame is the user's own, "at <file>:<line> in <function>". With two or more groups
// the smallest group (ties: the one whose innermost frame is not in torch.distributed; then the
// lowest rank) is "stuck …", the others "waiting …", in order of their lowest rank:
//   "rank 1 stuck at train.py:12 in step (time.sleep(600)); rank 0 waiting in all_reduce at
//    train.py:13 (dist.all_reduce(tensor))"
// One group: "ranks 0, 1 in all_reduce at …". Ranks without a stack come last: "rank 4: no
// Python stack". The user frame's source line, when `source` gives one, follows in parentheses.
// File names are shown as their base name. Empty when `places` is empty.
std::string DescribePlaces(const std::vector<RankPlace>& places, const SourceLines& source = {});

// The rank picked out as the odd one (the "stuck at" group when it has exactly one rank).
std::optional<int> OddRank(const std::vector<RankPlace>& places);

}  // namespace ddprun::elastic
