// ddprun-completion-gen SHELL PROGRAM OUTPUT [RUNNER]: writes the SHELL completion script of
// PROGRAM, a CLI11 program (ddprun-store, ddprun-allreduce-*), read from its --help and its
// subcommands' --help, to OUTPUT. RUNNER, when given, is a shell command prefix that runs PROGRAM
// (a cross build's emulator: "qemu-aarch64-static -L /usr/aarch64-linux-gnu"). A build-time tool
// (completion/CMakeLists.txt); not installed. ddprun's own scripts come from `ddprun
// --print-completion SHELL`. Exit 1 with one line on any failure.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>

#include "completion/cli11_help.h"

namespace {

std::string ShellQuoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// The standard output of `argv0 args... --help`; throws when it fails.
std::string RunHelp(const std::string& runner, const std::string& program,
                    const std::string& subcommand) {
  std::string command = runner.empty() ? ShellQuoted(program) : runner + " " + ShellQuoted(program);
  if (!subcommand.empty()) command += " " + ShellQuoted(subcommand);
  command += " --help";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + command);
  std::string output;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0;)
    output.append(buffer, n);
  if (pclose(pipe) != 0) throw std::runtime_error(command + " failed");
  return output;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ddprun::completion;
  try {
    if (argc != 4 && argc != 5) {
      throw std::runtime_error("usage: ddprun-completion-gen SHELL PROGRAM OUTPUT [RUNNER]");
    }
    const auto shell = ParseShell(argv[1]);
    if (!shell) throw std::runtime_error(std::string("unknown shell ") + argv[1]);
    const std::string program = argv[2];
    const std::string runner = argc == 5 ? argv[4] : "";
    const std::string name = std::filesystem::path(program).filename();
    const Command command =
        ParseCli11Help(name, RunHelp(runner, program, ""),
                       [&](const std::string& sub) { return RunHelp(runner, program, sub); });
    if (command.options.empty()) throw std::runtime_error("no option found in " + name + " --help");
    const std::string script = WriteScript(*shell, command, name + " --help (ddprun's build)");
    std::ofstream out(argv[3], std::ios::trunc);
    if (!(out << script) || !out.flush())
      throw std::runtime_error(std::string("cannot write ") + argv[3]);
    return 0;
  } catch (const std::exception& error) {
    std::cerr << "ddprun-completion-gen: " << error.what() << "\n";
    return 1;
  }
}
