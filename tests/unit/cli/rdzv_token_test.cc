// The rendezvous token's sources (cli/rdzv_token.h): --rdzv_conf token_file, then
// $DDPRUN_RDZV_TOKEN_FILE, then $DDPRUN_RDZV_TOKEN; never the command line itself; files
// others can read and short tokens refused with the fix; the token kept out of the workers'
// environment.
#include "cli/rdzv_token.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/errors.h"
#include "elastic/worker_env.h"
#include "store/store_auth.h"

namespace ddprun::launcher {
namespace {

namespace fs = std::filesystem;
using Conf = std::map<std::string, std::string>;

struct TokenDir {
  TokenDir() {
    std::string pattern = (fs::temp_directory_path() / "ddprun_token_test_XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TokenDir() { fs::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string file = path + "/" + name;
    std::ofstream(file) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }
  std::string path;
};

cli::EnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional(it->second);
  };
}

std::optional<cli::RendezvousToken> Read(const Conf& conf,
                                         std::map<std::string, std::string> env = {}) {
  return cli::ReadRendezvousToken(conf, "--rdzv_conf", Env(std::move(env)));
}

// Two keys hold the same secret when they prove alike.
bool SameSecret(const store::AuthKey& a, const std::string& secret) {
  const store::Nonce n{};
  return a.Prove("r", n, n) == store::AuthKey(secret).Prove("r", n, n);
}

}  // namespace

TEST_CASE("no token: the rendezvous is not authenticated", "[cli][auth]") {
  CHECK_FALSE(Read({}));
  CHECK_FALSE(Read({}, {{"DDPRUN_RDZV_TOKEN", ""}}));
}

TEST_CASE("the token comes from a file, the file variable, or the variable", "[cli][auth]") {
  TokenDir dir;
  const std::string file = dir.Write("job.token", "secret-from-the-file-0123\n");
  const std::string other = dir.Write("other.token", "secret-from-the-variable-file");

  const auto from_conf =
      Read({{"token_file", file}}, {{"DDPRUN_RDZV_TOKEN_FILE", other}, {"DDPRUN_RDZV_TOKEN", "x"}});
  REQUIRE(from_conf);
  CHECK(from_conf->source == "file " + file);
  CHECK(SameSecret(*from_conf->key, "secret-from-the-file-0123"));  // newline dropped

  const auto from_file_var =
      Read({}, {{"DDPRUN_RDZV_TOKEN_FILE", other}, {"DDPRUN_RDZV_TOKEN", "x"}});
  REQUIRE(from_file_var);
  CHECK(from_file_var->source == "file " + other);

  const auto from_var = Read({}, {{"DDPRUN_RDZV_TOKEN", "secret-in-the-environment"}});
  REQUIRE(from_var);
  CHECK(from_var->source == "$DDPRUN_RDZV_TOKEN");
  CHECK(SameSecret(*from_var->key, "secret-in-the-environment"));
}

TEST_CASE("a token is refused on the command line, short, or in a file others read",
          "[cli][auth]") {
  TokenDir dir;
  CHECK_THROWS_WITH(Read({{"token", "secret-on-the-command-line"}}),
                    Catch::Contains("visible to every user") && Catch::Contains("token_file"));
  CHECK_THROWS_WITH(Read({}, {{"DDPRUN_RDZV_TOKEN", "short"}}),
                    Catch::Contains("5 bytes") && Catch::Contains("at least 16"));
  const std::string open = dir.Write("open.token", "secret-from-the-file-0123", 0644);
  CHECK_THROWS_WITH(Read({{"token_file", open}}), Catch::Contains("chmod o-rw " + open));
  CHECK_THROWS_WITH(
      Read({{"token_file", dir.path + "/missing"}}),
      Catch::Contains("token_file=" + dir.path + "/missing") && Catch::Contains("No such file"));
  CHECK_THROWS_AS(Read({{"token_file", dir.path}}), UsageError);  // a directory
  const std::string group = dir.Write("group.token", "secret-from-the-file-0123", 0640);
  CHECK(Read({{"token_file", group}}));  // a group may share it
}

TEST_CASE("the token is not passed on to the workers", "[cli][auth]") {
  elastic::WorkerGroupEnv group;
  const elastic::Environment base{{"DDPRUN_RDZV_TOKEN", "secret-in-the-environment"},
                                  {"DDPRUN_RDZV_TOKEN_FILE", "/etc/job.token"},
                                  {"HOME", "/root"}};
  const auto env = elastic::BuildWorkerEnv(base, group, 0, "/tmp/error.json");
  CHECK(env.count("DDPRUN_RDZV_TOKEN") == 0);
  CHECK(env.at("HOME") == "/root");
}

}  // namespace ddprun::launcher
