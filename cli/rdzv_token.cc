#include "cli/rdzv_token.h"

#include <sys/stat.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "common/env_names.h"
#include "common/errors.h"
#include "store/store_auth.h"

namespace ddprun::cli {
namespace {

constexpr const char* kMakeOne =
    "make one with: head -c 32 /dev/urandom | base64 > FILE; chmod 600 FILE";

std::string Trimmed(std::string text) {
  const auto end = text.find_last_not_of(" \t\r\n");
  text.erase(end == std::string::npos ? 0 : end + 1);
  return text;
}

RendezvousToken Checked(std::string secret, std::string source) {
  if (secret.size() < store::kMinTokenBytes) {
    throw UsageError("the rendezvous token from " + source + " has " +
                     std::to_string(secret.size()) + " bytes: use at least " +
                     std::to_string(store::kMinTokenBytes) + "; " + kMakeOne);
  }
  return {std::make_shared<const store::AuthKey>(std::move(secret)), std::move(source)};
}

std::string ReadTokenFile(const std::string& path, const std::string& name) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    throw UsageError(name + "=" + path + ": " + ErrnoMessage("cannot read the token file", errno));
  }
  if (!S_ISREG(info.st_mode)) throw UsageError(name + "=" + path + ": not a regular file");
  if ((info.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    throw UsageError(name + "=" + path +
                     ": the token file is readable or writable by every user of this machine: "
                     "chmod o-rw " +
                     path);
  }
  std::ifstream file(path, std::ios::binary);
  std::ostringstream contents;
  if (!file || !(contents << file.rdbuf())) {
    throw UsageError(name + "=" + path + ": cannot read the token file");
  }
  return Trimmed(contents.str());
}

}  // namespace

RendezvousToken TokenFromFile(const std::string& path, const std::string& name) {
  return Checked(ReadTokenFile(path, name), "file " + path);
}

std::optional<RendezvousToken> ReadRendezvousToken(
    const std::map<std::string, std::string>& rdzv_conf, const std::string& conf_name,
    const EnvLookup& env) {
  if (rdzv_conf.count("token") != 0) {
    throw UsageError(conf_name +
                     " token=...: a token on the command line is visible to every "
                     "user of the machine; put it in a file (token_file=PATH) or in "
                     "$DDPRUN_RDZV_TOKEN");
  }
  if (const auto it = rdzv_conf.find("token_file"); it != rdzv_conf.end()) {
    return TokenFromFile(it->second, conf_name + " token_file");
  }
  if (const auto path = env(env::kRdzvTokenFile); path && !path->empty()) {
    return TokenFromFile(*path, env::kRdzvTokenFile);
  }
  if (const auto token = env(env::kRdzvToken); token && !token->empty()) {
    return Checked(Trimmed(*token), std::string("$") + env::kRdzvToken);
  }
  return std::nullopt;
}

}  // namespace ddprun::cli
