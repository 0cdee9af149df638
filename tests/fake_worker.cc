// fake_worker: a tiny scriptable worker for process-level tests of ddprun.
//
// Actions run in command-line order:
//   --print TEXT               print TEXT and a newline on stdout
//   --print-err TEXT           print TEXT and a newline on stderr
//   --print-env                print the whole environment as one JSON object line on stdout
//   --env-json PATH            write the environment as JSON to PATH; if TORCHELASTIC_RESTART_COUNT
//                              is set, ".<restart count>" is appended to PATH
//   --env-json-dir DIR         write the environment as JSON to DIR/env_<pid>.json
//   --exit N                   exit with code N
//   --signal NAME|N            raise a signal at itself (SIGKILL, KILL, 9, ...)
//   --ignore-sigterm           ignore SIGTERM from now on
//   --on-sigterm-write PATH    on SIGTERM: write "SIGTERM" to PATH, then exit 143
//   --on-sigterm-sleep SECONDS on SIGTERM: sleep SECONDS (after any --on-sigterm-write), then
//                              exit 143: a worker slow to stop
//   --sleep SECONDS            sleep (fractions allowed)
//   --spawn-grandchild PIDFILE fork a child (same process group) that sleeps 300 s; write its pid
//   --pid-file PATH            write own pid to PATH
//   --ready-file PATH          create PATH (signals "started"; written atomically)
//   --write-error-file MSG     write torchrun's error JSON with MSG to $TORCHELASTIC_ERROR_FILE
//   --lines N [--line-length L] print N lines of L bytes (default 100) each, one write per line;
//                              --line-length may also come before --lines
//   --wait-for-file PATH       wait (up to 120 s, else exit 4) until PATH exists
//   --wait-for-attempt-file PATH  the same for PATH with ".<restart count>" appended as --env-json
//                              does (another rank's --env-json file of this attempt)
//   --write PATH TEXT          write TEXT to PATH
//   --dump-args PATH REST...   write REST (every remaining argument, verbatim) as a JSON array to
//                              PATH and exit 0; REST is data, never parsed
//   --if-local-rank R          the NEXT action runs only when LOCAL_RANK == R
// Unknown arguments exit 2 with a message. Files are written atomically (tmp + rename), so a test
// that sees the file sees its whole content.
#include <fcntl.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

const char* g_sigterm_path = nullptr;
double g_sigterm_sleep = 0;  // seconds

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "fake_worker: %s\n", message.c_str());
  std::exit(2);
}

void WriteFileAtomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) Die("cannot write " + tmp);
    out << content;
    if (!out.flush()) Die("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) Die("cannot rename " + tmp + " to " + path);
}

// One write(2) call when possible, so that lines from several workers sharing a pipe do not mix.
void WriteAll(int fd, const std::string& data) {
  std::fflush(nullptr);
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::exit(3);
    }
    done += static_cast<size_t>(n);
  }
}

nlohmann::json EnvironmentJson() {
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq == nullptr) continue;
    env[std::string(*e, static_cast<size_t>(eq - *e))] = std::string(eq + 1);
  }
  return env;
}

std::string Getenv(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

int ParseSignal(const std::string& text) {
  static const std::map<std::string, int> kSignals = {
      {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"ILL", SIGILL},
      {"ABRT", SIGABRT}, {"FPE", SIGFPE},   {"KILL", SIGKILL}, {"SEGV", SIGSEGV},
      {"PIPE", SIGPIPE}, {"ALRM", SIGALRM}, {"TERM", SIGTERM}, {"USR1", SIGUSR1},
      {"USR2", SIGUSR2}, {"BUS", SIGBUS},   {"TRAP", SIGTRAP}};
  std::string name = text;
  if (name.rfind("SIG", 0) == 0) name = name.substr(3);
  const auto it = kSignals.find(name);
  if (it != kSignals.end()) return it->second;
  try {
    size_t used = 0;
    const int n = std::stoi(text, &used);
    if (used == text.size() && n > 0 && n < 65) return n;
  } catch (const std::exception&) {
  }
  Die("unknown signal " + text);
}

double ParseNumber(const std::string& text, const std::string& flag) {
  try {
    size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  Die("bad number for " + flag + ": " + text);
}

extern "C" void OnSigterm(int) {
  if (g_sigterm_path != nullptr) {
    // Only async-signal-safe calls here.
    const int fd = open(g_sigterm_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      const char kText[] = "SIGTERM";
      [[maybe_unused]] ssize_t n = write(fd, kText, sizeof(kText) - 1);
      close(fd);
    }
  }
  // nanosleep is async-signal-safe; after another signal it goes on with what was left.
  timespec left{static_cast<time_t>(g_sigterm_sleep),
                static_cast<long>((g_sigterm_sleep - static_cast<time_t>(g_sigterm_sleep)) * 1e9)};
  while (nanosleep(&left, &left) == -1 && errno == EINTR) {
  }
  _exit(143);
}

void TrapSigterm() {
  struct sigaction action {};
  action.sa_handler = OnSigterm;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

void SleepSeconds(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

void WaitForFile(const std::string& path) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (access(path.c_str(), F_OK) != 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fprintf(stderr, "fake_worker: timed out waiting for %s\n", path.c_str());
      std::exit(4);
    }
    SleepSeconds(0.005);
  }
}

void SpawnGrandchild(const std::string& pid_file) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) Die("fork failed");
  if (pid == 0) {
    // Stays in the worker's process group; no PDEATHSIG, so only a group kill reaches it.
    for (int i = 0; i < 300; ++i) sleep(1);
    _exit(0);
  }
  WriteFileAtomically(pid_file, std::to_string(pid));
}

void WriteErrorFile(const std::string& message) {
  const std::string path = Getenv("TORCHELASTIC_ERROR_FILE");
  if (path.empty()) Die("TORCHELASTIC_ERROR_FILE is not set");
  nlohmann::json error = {
      {"message",
       {{"message", message},
        {"extraInfo",
         {{"py_callstack",
           "Traceback (most recent call last):\n  File \"fake_worker\", line 1\n" + message + "\n"},
          {"timestamp", std::to_string(std::time(nullptr))}}}}}};
  WriteFileAtomically(path, error.dump());
}

void PrintLines(long count, long length, int local_rank) {
  // Each line: "r<local_rank> <index> " then filler up to `length` bytes; one write per line so
  // that a tearing launcher, not the worker, is to blame for interleaving.
  for (long i = 0; i < count; ++i) {
    std::string line = "r" + std::to_string(local_rank) + " " + std::to_string(i) + " ";
    const char fill = static_cast<char>('a' + (i % 26));
    if (static_cast<long>(line.size()) < length) line.append(length - line.size(), fill);
    line.push_back('\n');
    WriteAll(1, line);
  }
}

// Runs the actions; with `dry` only parses them, so that a bad argument fails before any effect.
void Run(const std::vector<std::string>& args, bool dry) {
  const std::string local_rank_text = Getenv("LOCAL_RANK");
  const int local_rank = local_rank_text.empty() ? -1 : std::atoi(local_rank_text.c_str());
  long line_length = 100;
  bool skip_next = false;

  size_t i = 0;
  auto value = [&](const std::string& flag) -> std::string {
    if (i + 1 >= args.size()) Die("missing value for " + flag);
    return args[++i];
  };
  for (; i < args.size(); ++i) {
    const std::string flag = args[i];
    const bool skip = skip_next || dry;
    skip_next = false;
    if (flag == "--if-local-rank") {
      const int wanted = static_cast<int>(ParseNumber(value(flag), flag));
      skip_next = skip || wanted != local_rank;
      continue;
    }
    if (flag == "--line-length") {
      line_length = static_cast<long>(ParseNumber(value(flag), flag));
      continue;
    }
    if (flag == "--dump-args") {
      const std::string path = value(flag);
      if (!skip) {
        const std::vector<std::string> rest(args.begin() + static_cast<long>(i) + 1, args.end());
        WriteFileAtomically(path, nlohmann::json(rest).dump());
        std::fflush(nullptr);
        std::exit(0);
      }
      return;  // the rest is data
    }
    if (flag == "--print") {
      const std::string text = value(flag);
      if (!skip) WriteAll(1, text + "\n");
    } else if (flag == "--print-err") {
      const std::string text = value(flag);
      if (!skip) WriteAll(2, text + "\n");
    } else if (flag == "--print-env") {
      if (!skip) WriteAll(1, EnvironmentJson().dump() + "\n");
    } else if (flag == "--env-json") {
      std::string path = value(flag);
      const std::string restart = Getenv("TORCHELASTIC_RESTART_COUNT");
      if (!restart.empty()) path += "." + restart;
      if (!skip) WriteFileAtomically(path, EnvironmentJson().dump());
    } else if (flag == "--env-json-dir") {
      const std::string path = value(flag) + "/env_" + std::to_string(::getpid()) + ".json";
      if (!skip) WriteFileAtomically(path, EnvironmentJson().dump());
    } else if (flag == "--wait-for-file") {
      const std::string path = value(flag);
      if (!skip) WaitForFile(path);
    } else if (flag == "--wait-for-attempt-file") {
      std::string path = value(flag);
      const std::string restart = Getenv("TORCHELASTIC_RESTART_COUNT");
      if (!restart.empty()) path += "." + restart;
      if (!skip) WaitForFile(path);
    } else if (flag == "--write") {
      const std::string path = value(flag);
      const std::string text = value(flag);
      if (!skip) WriteFileAtomically(path, text);
    } else if (flag == "--exit") {
      const int code = static_cast<int>(ParseNumber(value(flag), flag));
      if (!skip) {
        std::fflush(nullptr);
        std::exit(code);
      }
    } else if (flag == "--signal") {
      const int sig = ParseSignal(value(flag));
      if (!skip) {
        std::fflush(nullptr);
        signal(sig, SIG_DFL);
        raise(sig);
        std::this_thread::sleep_for(std::chrono::seconds(5));  // should not get here
        Die("signal did not kill me");
      }
    } else if (flag == "--ignore-sigterm") {
      if (!skip) signal(SIGTERM, SIG_IGN);
    } else if (flag == "--on-sigterm-write") {
      const std::string path = value(flag);
      if (!skip) {
        g_sigterm_path = strdup(path.c_str());
        TrapSigterm();
      }
    } else if (flag == "--on-sigterm-sleep") {
      const double seconds = ParseNumber(value(flag), flag);
      if (!skip) {
        g_sigterm_sleep = seconds;
        TrapSigterm();
      }
    } else if (flag == "--sleep") {
      const double seconds = ParseNumber(value(flag), flag);
      if (!skip) SleepSeconds(seconds);
    } else if (flag == "--spawn-grandchild") {
      const std::string path = value(flag);
      if (!skip) SpawnGrandchild(path);
    } else if (flag == "--pid-file") {
      const std::string path = value(flag);
      if (!skip) WriteFileAtomically(path, std::to_string(getpid()));
    } else if (flag == "--ready-file") {
      const std::string path = value(flag);
      if (!skip) WriteFileAtomically(path, std::to_string(getpid()));
    } else if (flag == "--write-error-file") {
      const std::string message = value(flag);
      if (!skip) WriteErrorFile(message);
    } else if (flag == "--lines") {
      const long count = static_cast<long>(ParseNumber(value(flag), flag));
      if (i + 1 < args.size() && args[i + 1] == "--line-length") {
        ++i;
        line_length = static_cast<long>(ParseNumber(value("--line-length"), "--line-length"));
      }
      if (!skip) PrintLines(count, line_length, local_rank);
    } else {
      Die("unknown argument: " + flag);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  Run(args, /*dry=*/true);
  Run(args, /*dry=*/false);
  return 0;
}
