// The job's rendezvous token (docs/reliability.md, "Authenticated rendezvous"): a shared secret
// every node of the job holds, read from a file (--rdzv_conf token_file=PATH, else
// $DDPRUN_RDZV_TOKEN_FILE) or from $DDPRUN_RDZV_TOKEN, never from the command line itself,
// where every user of the machine could read it (ps). A file readable by other users, a token
// shorter than 16 bytes, or `--rdzv_conf token=...` is refused with a UsageError saying what
// to do instead.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "cli/cli.h"
#include "elastic/launch_config.h"

namespace ddprun::cli {

struct RendezvousToken {
  std::shared_ptr<const store::AuthKey> key;
  std::string source;  // "file /path" or "$DDPRUN_RDZV_TOKEN", for messages and --dry_run
};

// nullopt: no token (the rendezvous is not authenticated, as today).
std::optional<RendezvousToken> ReadRendezvousToken(
    const std::map<std::string, std::string>& rdzv_conf, const std::string& conf_name,
    const EnvLookup& env);

// The token in the file at `path` (its trailing newline and blanks dropped), checked as above;
// `name` is how the path was given, for messages ("--token-file").
RendezvousToken TokenFromFile(const std::string& path, const std::string& name);

}  // namespace ddprun::cli
