// ddprun-store: a standalone c10d-compatible store server (`serve`) and a debugging client
// (`get`, `set`, `add`, ...) for any c10d TCP store, PyTorch's included, and `rdzv`, a
// read-only view of a running c10d dynamic rendezvous (tools/rdzv_view.h). Bad command lines
// print one line on stderr and exit 2; store errors (timeout, connection) exit 1.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "cli/cli.h"
#include "cli/rdzv_token.h"
#include "common/asio.h"
#include "common/errors.h"
#include "common/host_port.h"
#include "common/integer.h"
#include "common/logging.h"
#include "common/open_files.h"
#include "common/version.h"
#include "store/tcp_store_client.h"
#include "store/tcp_store_server.h"
#include "tools/rdzv_view.h"

namespace ddprun::tools {
namespace {

using store::Bytes;
using store::Store;

struct ClientFlags {
  std::string host = "127.0.0.1";
  int port = kDefaultMasterPort;
  double timeout_s = 30;
  double connect_timeout_s = 10;
  bool legacy = false;
  bool raw = false;
  std::string token_file;
};

struct ServeFlags {
  store::ServerOptions options{"::", kDefaultMasterPort, {}, 1, nullptr};
  std::string token_file;
};

// The job's token: --token-file, else $DDPRUN_RDZV_TOKEN_FILE / $DDPRUN_RDZV_TOKEN; none: the
// store is not authenticated.
std::shared_ptr<const store::AuthKey> Token(const std::string& token_file) {
  if (!token_file.empty()) return cli::TokenFromFile(token_file, "--token-file").key;
  const auto token = cli::ReadRendezvousToken({}, "", cli::ProcessEnv());
  return token ? token->key : nullptr;
}

constexpr const char* kTokenHelp =
    "file holding the job's rendezvous token (default $DDPRUN_RDZV_TOKEN_FILE, else "
    "$DDPRUN_RDZV_TOKEN; none: no authentication)";

constexpr auto kLastWins = CLI::MultiOptionPolicy::TakeLast;  // a later --timeout overrides

// --timeout, --connect-timeout, --legacy: how to talk to the store, for every client command.
void AddConnectionFlags(CLI::App& command, ClientFlags& flags) {
  command.add_option("--timeout", flags.timeout_s, "seconds to wait for keys and replies")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->multi_option_policy(kLastWins);
  command.add_option("--connect-timeout", flags.connect_timeout_s, "seconds to retry connecting")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->multi_option_policy(kLastWins);
  command.add_flag("--legacy", flags.legacy, "speak PyTorch 1.13's protocol (no handshake)");
  command.add_option("--token-file", flags.token_file, kTokenHelp)->multi_option_policy(kLastWins);
}

void AddClientFlags(CLI::App& command, ClientFlags& flags) {
  command.add_option("--host", flags.host, "store host")
      ->capture_default_str()
      ->multi_option_policy(kLastWins);
  command.add_option("--port", flags.port, "store port")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535))
      ->multi_option_policy(kLastWins);
  AddConnectionFlags(command, flags);
  command.add_flag("--raw", flags.raw, "do not add TCPStore's '/' prefix to keys");
}

std::chrono::milliseconds Millis(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

store::TcpStoreClient Connect(const ClientFlags& flags) {
  store::ClientOptions options;
  options.host = flags.host;
  options.port = flags.port;
  options.timeout = Millis(flags.timeout_s);
  options.connect_timeout = Millis(flags.connect_timeout_s);
  options.generation = flags.legacy ? store::Generation::kLegacy : store::Generation::kValidated;
  options.key_prefix = flags.raw ? "" : "/";
  options.auth = Token(flags.token_file);
  if (options.auth && flags.legacy) {
    throw UsageError("--legacy with a token: PyTorch 1.13's protocol has no authentication");
  }
  return store::TcpStoreClient(options);
}

void PrintBytes(const Bytes& value) {
  std::fwrite(value.data(), 1, value.size(), stdout);
  std::fputc('\n', stdout);
}

int Serve(const ServeFlags& flags) {
  const OpenFileLimit files = RaiseOpenFileLimit();
  const auto connections = flags.options.limits.max_connections;
  if (const auto shortfall = ConnectionShortfall("--max-connections=" + std::to_string(connections),
                                                 connections, files, "lower --max-connections")) {
    std::cerr << "ddprun-store: warning: " << *shortfall << std::endl;
  }
  asio::io_context io(kOneThread);
  store::ServerOptions options = flags.options;
  options.auth = Token(flags.token_file);
  store::TcpStoreServer server(io, options);
  std::cout << "listening on " << HostPort{server.Host(), server.Port()}.ToString()
            << (options.auth ? " (clients must authenticate)" : "") << std::endl;
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([&](const boost::system::error_code&, int) {
    server.Stop();
    io.stop();
  });
  io.run();
  return 0;
}

std::int64_t IntegerArgument(const std::string& text, const std::string& what) {
  if (const auto value = ParseInt(text)) return *value;
  throw UsageError(what + "=" + NotAnInteger(text));
}

constexpr std::uint32_t kPingNonce = 0x64647072;  // "ddpr"

// The client subcommands; each returns the process exit code.
struct ClientCommands {
  ClientFlags flags;
  std::vector<std::string> args;

  int Run(const std::string& name) {
    auto store = Connect(flags);
    if (name == "get") return PrintBytes(store.Get(args.at(0))), 0;
    if (name == "set") return store.Set(args.at(0), Store::ToBytes(args.at(1))), 0;
    if (name == "add") return Print(store.Add(args.at(0), IntegerArgument(args.at(1), "DELTA")));
    if (name == "wait") return store.Wait(args, store.Timeout()), 0;
    if (name == "check") return Print(store.Check(args));
    if (name == "delete") return Print(store.DeleteKey(args.at(0)));
    if (name == "num-keys") return Print(store.NumKeys());
    if (name == "append") return store.Append(args.at(0), Store::ToBytes(args.at(1))), 0;
    if (name == "compare-set") {
      return PrintBytes(store.CompareSet(args.at(0), Store::ToBytes(args.at(1)),
                                         Store::ToBytes(args.at(2)))),
             0;
    }
    if (name == "multi-get") {
      for (const auto& value : store.MultiGet(args)) PrintBytes(value);
      return 0;
    }
    if (name == "ping") return Print(static_cast<std::int64_t>(store.Ping(kPingNonce)));
    if (name == "queue-push") return store.QueuePush(args.at(0), Store::ToBytes(args.at(1))), 0;
    if (name == "queue-len") return Print(store.QueueLen(args.at(0)));
    if (name == "queue-pop") return QueuePop(store);
    return MultiSet(store);
  }

  int QueuePop(store::TcpStoreClient& store) {
    const auto item = store.QueuePop(args.at(0));
    if (!item) {
      std::cerr << "ddprun-store: queue '" << args.at(0) << "' is empty\n";
      return 1;
    }
    PrintBytes(*item);
    return 0;
  }

  int MultiSet(Store& store) {
    if (args.size() % 2 != 0) throw UsageError("multi-set takes KEY VALUE pairs");
    std::vector<std::string> keys;
    std::vector<Bytes> values;
    for (std::size_t i = 0; i < args.size(); i += 2) {
      keys.push_back(args[i]);
      values.push_back(Store::ToBytes(args[i + 1]));
    }
    store.MultiSet(keys, values);
    return 0;
  }

  static int Print(bool value) { return std::cout << (value ? "true" : "false") << "\n", 0; }
  static int Print(std::int64_t value) { return std::cout << value << "\n", 0; }
};

// `rdzv`: connects like the other client commands (keys with TCPStore's "/" prefix, as the
// agents write them), reads the view, prints it.
struct RdzvCommand {
  ClientFlags flags;
  std::string endpoint;
  std::string run_id;
  bool json = false;

  void AddTo(CLI::App& app) {
    auto* command = app.add_subcommand(
        "rdzv", "print a running c10d rendezvous (rounds, members, heartbeats); reads only");
    command
        ->add_option("--endpoint,--rdzv_endpoint,--rdzv-endpoint", endpoint,
                     "the rendezvous store, HOST[:PORT] (default port " +
                         std::to_string(kDefaultRendezvousPort) + ")")
        ->required()
        ->multi_option_policy(kLastWins);
    command->add_option("--rdzv_id,--rdzv-id", run_id, "the job's --rdzv_id")
        ->required()
        ->multi_option_policy(kLastWins);
    command->add_flag("--json", json, "print one JSON object instead of tables");
    AddConnectionFlags(*command, flags);
  }

  int Run() {
    const HostPort parsed = ParseHostPort(endpoint, "--endpoint");
    if (parsed.host.empty()) throw UsageError("--endpoint=" + endpoint + ": missing host");
    if (run_id.empty()) throw UsageError("--rdzv_id must not be empty");
    flags.host = parsed.host;
    flags.port = parsed.port.value_or(kDefaultRendezvousPort);
    const std::string shown = HostPort{flags.host, flags.port}.ToString();
    auto store = Connect(flags);
    const auto view = tools::ReadRdzvView(store, run_id, shown);
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::system_clock::now().time_since_epoch());
    std::cout << (json ? tools::FormatRdzvJson(view, now.count())
                       : tools::FormatRdzvTable(view, now.count()))
              << std::flush;
    return 0;
  }
};

struct Spec {
  const char* name;
  const char* help;
  const char* args;
  int count;  // -1: one or more
};

constexpr Spec kClientSpecs[] = {
    {"get", "print a key's value (waits for it up to --timeout)", "KEY", 1},
    {"set", "set a key", "KEY VALUE", 2},
    {"add", "add DELTA to a counter key and print the sum", "KEY DELTA", 2},
    {"wait", "wait until every key exists (up to --timeout)", "KEY", -1},
    {"check", "print true when every key exists", "KEY", -1},
    {"delete", "delete a key; print true when it existed", "KEY", 1},
    {"num-keys", "print the number of keys", "", 0},
    {"append", "append VALUE to a key", "KEY VALUE", 2},
    {"compare-set", "set DESIRED if the value is EXPECTED; print the value now stored",
     "KEY EXPECTED DESIRED", 3},
    {"multi-get", "print the values of the keys, one per line", "KEY", -1},
    {"multi-set", "set KEY VALUE pairs in one request", "KEY VALUE", -1},
    {"ping", "send PING (2.x protocol) and print the echoed nonce", "", 0},
    {"queue-push", "append ITEM to a queue (PyTorch 2.7+ stores)", "QUEUE ITEM", 2},
    {"queue-pop", "print and remove a queue's first item; exit 1 when empty", "QUEUE", 1},
    {"queue-len", "print a queue's length", "QUEUE", 1},
};

int Main(int argc, char** argv) {
  CLI::App app{"ddprun-store: a c10d-compatible TCP store server and client"};
  app.require_subcommand(1);
  app.set_version_flag("--version", VersionLine("ddprun-store"), "print the version and exit");
  ServeFlags serve_flags;
  auto* serve = app.add_subcommand("serve", "run a standalone store server until SIGINT/SIGTERM");
  serve->add_option("--host", serve_flags.options.host, "bind address ('::' = all, dual stack)")
      ->capture_default_str();
  serve->add_option("--port", serve_flags.options.port, "port (0 = ephemeral)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve->add_option("--max-key-bytes", serve_flags.options.limits.max_key_bytes)
      ->capture_default_str();
  serve->add_option("--max-value-bytes", serve_flags.options.limits.max_value_bytes)
      ->capture_default_str();
  serve->add_option("--max-connections", serve_flags.options.limits.max_connections)
      ->capture_default_str();
  serve
      ->add_option("--threads", serve_flags.options.io_threads,
                   "threads serving connections (more help only with cores to spare)")
      ->capture_default_str()
      ->check(CLI::Range(1, 256));
  serve->add_option("--token-file", serve_flags.token_file,
                    std::string(kTokenHelp) + "; set: every client must authenticate");
  ClientCommands client;
  for (const auto& spec : kClientSpecs) {
    auto* command = app.add_subcommand(spec.name, spec.help);
    AddClientFlags(*command, client.flags);
    if (spec.count != 0) {
      command->add_option("args", client.args, spec.args)
          ->required()
          ->type_name(spec.args)
          ->expected(spec.count < 0 ? -1 : spec.count);
    }
  }
  RdzvCommand rdzv;
  rdzv.AddTo(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    std::cerr << "ddprun-store: " << error.what() << "\n";
    return 2;
  }
  if (serve->parsed()) return Serve(serve_flags);
  if (app.got_subcommand("rdzv")) return rdzv.Run();
  return client.Run(app.get_subcommands().front()->get_name());
}

}  // namespace
}  // namespace ddprun::tools

int main(int argc, char** argv) {
  ddprun::InitLogging();
  try {
    return ddprun::tools::Main(argc, argv);
  } catch (const ddprun::UsageError& error) {
    std::cerr << "ddprun-store: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "ddprun-store: " << error.what() << "\n";
    return 1;
  }
}
