// The CLI11 --help reader and the bash/zsh/fish writers (their behaviour in real shells is
// tests/integration/test_docs_drift.py's).
#include "completion/completion.h"

#include <catch2/catch.hpp>

#include "completion/cli11_help.h"

namespace {

using namespace ddprun::completion;

constexpr const char* kTopHelp = R"(tool: a test program
Usage: ./tool [OPTIONS] SUBCOMMAND

Options:
  -h,--help                   Print this help message and exit

Subcommands:
  serve                       run a server
  get                         print a key's value
)";

constexpr const char* kServeHelp = R"(run a server
Usage: ./tool serve [OPTIONS]

Options:
  -h,--help                   Print this help message and exit
  --port INT:INT in [0 - 65535]=29500
                              port (0 = ephemeral)
  --max-key-bytes UINT=1024
  --backend TEXT:{auto,cpu,nccl}=auto
                              which backend
  --log FILE:FILE             a file
  --legacy                    speak the old protocol
)";

constexpr const char* kGetHelp = R"(print a key's value
Usage: ./tool get [OPTIONS] args

Positionals:
  args KEY REQUIRED           KEY

Options:
  -h,--help                   Print this help message and exit
  -t,--timeout FLOAT=30       seconds to wait
)";

Command ParseTool() {
  return ParseCli11Help("tool", kTopHelp, [](const std::string& sub) {
    return std::string(sub == "serve" ? kServeHelp : kGetHelp);
  });
}

const Option& Find(const Command& command, const std::string& key) {
  for (const Option& option : command.options) {
    if (option.key == key) return option;
  }
  FAIL("no option " << key);
  return command.options.front();
}

Command Launcher() {
  Command command;
  command.name = "launch-it";
  command.positionals = Positionals::kScript;
  command.abbreviations = true;
  command.options.push_back({"nproc_per_node",
                             {"--nproc_per_node", "--nproc-per-node"},
                             "N",
                             ValueKind::kChoice,
                             {"auto", "cpu"},
                             "workers [per] node: it's"});
  command.options.push_back({"module", {"-m", "--module"}, "", ValueKind::kNone, {}, "a module"});
  command.options.push_back(
      {"log_dir", {"--log_dir", "--log-dir"}, "DIR", ValueKind::kDirectory, {}, "logs"});
  return command;
}

}  // namespace

TEST_CASE("CLI11 help: options, values, choices, wrapped help", "[completion]") {
  const Command command = ParseTool();
  CHECK(command.name == "tool");
  CHECK(command.help == "tool: a test program");
  REQUIRE(command.options.size() == 1);
  CHECK(command.options[0].names == std::vector<std::string>{"-h", "--help"});
  CHECK_FALSE(command.options[0].TakesValue());
  REQUIRE(command.subcommands.size() == 2);
  const Command& serve = command.subcommands[0];
  CHECK(serve.name == "serve");
  CHECK(serve.help == "run a server");
  CHECK(Find(serve, "port").metavar == "INT");
  CHECK(Find(serve, "port").help == "port (0 = ephemeral)");
  CHECK(Find(serve, "port").value == ValueKind::kNone);
  CHECK(Find(serve, "max-key-bytes").TakesValue());
  CHECK(Find(serve, "max-key-bytes").help.empty());
  CHECK(Find(serve, "backend").value == ValueKind::kChoice);
  CHECK(Find(serve, "backend").choices == std::vector<std::string>{"auto", "cpu", "nccl"});
  CHECK(Find(serve, "backend").help == "which backend");
  CHECK(Find(serve, "log").value == ValueKind::kFile);
  CHECK_FALSE(Find(serve, "legacy").TakesValue());
  const Command& get = command.subcommands[1];
  CHECK(Find(get, "timeout").names == std::vector<std::string>{"-t", "--timeout"});
  CHECK(get.options.size() == 2);              // the positional is not an option
  CHECK(AllOptionNames(command).size() == 9);  // -h and --help once
}

TEST_CASE("shells: names, parsing", "[completion]") {
  CHECK(ParseShell("bash") == Shell::kBash);
  CHECK(ParseShell("zsh") == Shell::kZsh);
  CHECK(ParseShell("fish") == Shell::kFish);
  CHECK_FALSE(ParseShell("tcsh"));
  CHECK(ShellNames() == std::vector<std::string>{"bash", "zsh", "fish"});
}

TEST_CASE("bash script: every spelling, values, prefixes", "[completion]") {
  const std::string script = WriteScript(Shell::kBash, Launcher(), "gen");
  CHECK_THAT(script, Catch::Contains("complete -F _launch_it launch-it"));
  CHECK_THAT(script,
             Catch::Contains("' --nproc_per_node'|' --nproc-per-node') echo 'nproc_per_node'"));
  CHECK_THAT(script, Catch::Contains("' -m'|' --module') echo -"));
  CHECK_THAT(script, Catch::Contains("__launch_it_words 'auto cpu'"));
  CHECK_THAT(script, Catch::Contains("' log_dir') __launch_it_dirs"));
  CHECK_THAT(script, Catch::Contains("__launch_it_prefix"));
}

TEST_CASE("zsh script: specs with exclusions and escapes", "[completion]") {
  const std::string script = WriteScript(Shell::kZsh, Launcher(), "gen");
  CHECK_THAT(script, Catch::StartsWith("#compdef launch-it\n"));
  CHECK_THAT(
      script,
      Catch::Contains("'(--nproc_per_node --nproc-per-node)'{--nproc_per_node=,--nproc-per-node=}"
                      "'[workers \\[per\\] node: it'\\''s]:N:(auto cpu)'"));
  CHECK_THAT(script, Catch::Contains("'(-m --module)'{-m,--module}'[a module]'"));
  CHECK_THAT(script, Catch::Contains(":DIR:_files -/'"));
  CHECK_THAT(script, Catch::Contains("-A '-*'"));
  CHECK_THAT(script, Catch::Contains("compdef _launch_it launch-it"));
}

TEST_CASE("fish script: one line per option, stops at the script", "[completion]") {
  const std::string script = WriteScript(Shell::kFish, Launcher(), "gen");
  CHECK_THAT(script,
             Catch::Contains(
                 "complete -c launch-it -n 'not __fish_launch_it_script_seen' -l nproc_per_node "
                 "-l nproc-per-node -x -a 'auto cpu' -d 'workers [per] node: it\\'s'"));
  CHECK_THAT(script, Catch::Contains("-s m -l module -d 'a module'"));
  CHECK_THAT(script, Catch::Contains("-x -a '(__fish_complete_directories)'"));
  const std::string tool = WriteScript(Shell::kFish, ParseTool(), "gen");
  CHECK_THAT(tool, Catch::Contains("complete -c tool -n __fish_use_subcommand -a 'serve'"));
  CHECK_THAT(tool, Catch::Contains("complete -c tool -n '__fish_seen_subcommand_from serve' -l "
                                   "backend -x -a 'auto cpu nccl'"));
}
