// The etcd v3 client over TLS (store/etcd/etcd_client.h, --rdzv_conf protocol=https) against real
// etcd members with HTTPS client URLs and certificates the test makes with the openssl command:
// calls and watches, client certificates, verification of the CA and of the member's name or
// IP, the wrong protocol either way, a silent member, and unusable TLS files.
#include <stdlib.h>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "common/asio.h"
#include "common/errors.h"
#include "etcd_server.h"
#include "store/etcd/etcd_client.h"

namespace ddprun::store::etcd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::EtcdCluster;
using testing::EtcdServer;

// The one-line message of the EtcdUnavailable that `call` throws, or "no error".
template <typename Call>
std::string Unavailable(Call call) {
  try {
    call();
  } catch (const EtcdUnavailable& error) {
    const std::string text = error.what();
    CHECK(text.find('\n') == std::string::npos);
    return text;
  }
  return "no error";
}

std::string RangeFails(const EtcdClientOptions& options) {
  return Unavailable([&] { EtcdClient(options).Call("/v3/kv/range", RangeBody("k")); });
}

std::string WatchFails(const EtcdClientOptions& options) {
  return Unavailable([&] { EtcdWatch(options, WatchCreateBody("k", "", 0)); });
}

// The UsageError's message from constructing a client with `tls`, or "no error".
std::string Unusable(const EtcdTls& tls) {
  try {
    EtcdClient client({{{"127.0.0.1", 1}}, 1s, tls});
  } catch (const UsageError& error) {
    return error.what();
  }
  return "no error";
}

// A temporary directory, removed with it.
struct TempDir {
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "ddprun_tls_XXXXXX").string();
    path = ::mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

// Serves `replies` connections of one request each with etcd's JSON, then closes each: a member
// that closes kept-alive connections. Returns how many requests it read.
int ServeOnePerConnection(asio::ip::tcp::acceptor& acceptor, int replies) {
  namespace http = boost::beast::http;
  int served = 0;
  for (int i = 0; i < replies; ++i) {
    asio::ip::tcp::socket socket = acceptor.accept();
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::read(socket, buffer, request);
    http::response<http::string_body> response{http::status::ok, 11};
    response.body() = R"({"header":{"revision":"7"}})";
    response.prepare_payload();
    http::write(socket, response);
    ++served;
  }
  return served;
}

}  // namespace

TEST_CASE("etcd over TLS: calls, a watch woken by a put, deadlines and Interrupt", "[etcd][tls]") {
  EtcdCluster server(1, {.tls = true});
  const EtcdClientOptions options = server.Options();
  EtcdClient client(options);
  CHECK(ParsePut(client.Call("/v3/kv/put", PutBody("ddprun/k", "v1"))).header.revision > 0);
  const auto range = ParseRange(client.Call("/v3/kv/range", RangeBody("ddprun/k")));
  REQUIRE(range.kvs.size() == 1);
  CHECK(range.kvs[0].value == "v1");

  EtcdWatch watch(client, WatchCreateBody("ddprun/w", "", 0));  // the client's TLS context
  const auto created = watch.Next(Clock::now() + 5s);
  REQUIRE(created);
  CHECK(created->created);
  const auto quiet_start = Clock::now();
  CHECK_FALSE(watch.Next(Clock::now() + 200ms));
  CHECK(Clock::now() - quiet_start < 2s);
  ParsePut(client.Call("/v3/kv/put", PutBody("ddprun/w", "over tls")));
  std::optional<WatchMessage> message;
  for (int i = 0; i < 10 && !(message && !message->events.empty()); ++i) {
    message = watch.Next(Clock::now() + 5s);
  }
  REQUIRE(message);
  REQUIRE(message->events.size() == 1);
  CHECK(message->events[0].kv.value == "over tls");

  auto blocked =
      std::async(std::launch::async, [&watch] { return watch.Next(Clock::now() + 60s); });
  REQUIRE(blocked.wait_for(100ms) == std::future_status::timeout);
  watch.Interrupt();
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THROWS_AS(blocked.get(), EtcdUnavailable);
}

TEST_CASE("etcd over TLS: a member asking for client certificates", "[etcd][tls]") {
  EtcdCluster server(1, {.tls = true, .client_cert_auth = true});
  const std::string at = server.Endpoint().ToString();
  SECTION("this client's certificate is accepted") {
    EtcdClient client(server.Options());
    ParsePut(client.Call("/v3/kv/put", PutBody("a", "b")));
    EtcdWatch watch(server.Options(), WatchCreateBody("a", "", 0));
    CHECK(watch.Next(Clock::now() + 5s));
  }
  SECTION("none configured: refused, naming cert and key") {
    EtcdClientOptions options = server.Options();
    options.tls->cert = options.tls->key = "";
    for (const std::string& text : {RangeFails(options), WatchFails(options)}) {
      CHECK_THAT(text, Catch::Contains(at + ": the member asks for a client certificate"));
      CHECK_THAT(text, Catch::Contains("set --rdzv_conf cert=... and key=..."));
    }
  }
  SECTION("a certificate another CA signed: refused, naming cert and key") {
    testing::MakeCa(server.Dir(), "other");
    testing::MakeCert(server.Dir(), "stranger", "other", "");
    EtcdClientOptions options = server.Options();
    options.tls->cert = server.Dir() + "/stranger.pem";
    options.tls->key = server.Dir() + "/stranger.key";
    const std::string text = RangeFails(options);  // its alert, or a reset that lost it
    CHECK_THAT(text, Catch::Contains(at + ": the member ") &&
                         Catch::Contains(" this client's certificate (") &&
                         Catch::Contains("): check --rdzv_conf cert and key"));
  }
}

TEST_CASE("etcd over TLS: a certificate from another CA or for another name is refused",
          "[etcd][tls]") {
  EtcdCluster server(1, {.tls = true});
  const std::string at = server.Endpoint().ToString();
  SECTION("another CA") {
    testing::MakeCa(server.Dir(), "other");
    EtcdClientOptions options = server.Options();
    options.tls->cacert = server.Dir() + "/other.pem";
    for (const std::string& text : {RangeFails(options), WatchFails(options)}) {
      CHECK_THAT(text, Catch::Contains(at + ": TLS handshake failed (certificate verify failed: "));
      CHECK_THAT(text, Catch::Contains("check --rdzv_conf cacert"));
    }
  }
  SECTION("the system's CA store does not know the test CA") {
    EtcdClientOptions options = server.Options();
    options.tls->cacert = "";
    CHECK_THAT(RangeFails(options), Catch::Contains("certificate verify failed"));
  }
  SECTION("a name the certificate (IP:127.0.0.1) does not give") {
    EtcdClientOptions options = server.Options();
    options.endpoints = {{"localhost", server.Endpoint().port}};
    CHECK_THAT(RangeFails(options),
               Catch::Contains("localhost:" + std::to_string(*server.Endpoint().port) +
                               ": TLS handshake failed (certificate verify "
                               "failed: hostname mismatch)"));
  }
}

TEST_CASE("etcd over TLS: an IP address the certificate (DNS:localhost) does not give",
          "[etcd][tls]") {
  EtcdCluster server(1, {.tls = true, .server_name = "localhost"});
  EtcdClientOptions options = server.Options();
  ParseRange(EtcdClient(options).Call("/v3/kv/range", RangeBody("k")));  // by its name: fine
  options.endpoints = {server.Endpoint()};
  CHECK_THAT(RangeFails(options),
             Catch::Contains(server.Endpoint().ToString() +
                             ": TLS handshake failed (certificate verify failed: IP address "
                             "mismatch): check --rdzv_conf cacert"));
}

TEST_CASE("etcd: the wrong protocol for a member names the fix within the timeout", "[etcd][tls]") {
  constexpr auto kTimeout = 2s;
  SECTION("https to a plain member") {
    EtcdServer plain;
    TempDir dir;
    testing::MakeCa(dir.path, "ca");
    const EtcdClientOptions options{{plain.Endpoint()}, kTimeout, EtcdTls{dir.path + "/ca.pem"}};
    for (auto fails : {&RangeFails, &WatchFails}) {
      const auto start = Clock::now();
      const std::string text = fails(options);
      CHECK(Clock::now() - start < kTimeout);  // the member's answer, not the timeout
      CHECK_THAT(text, Catch::Contains(plain.Endpoint().ToString() + ": TLS handshake failed ("));
      CHECK_THAT(text,
                 Catch::Contains("it seems to speak plain HTTP: use --rdzv_conf protocol=http"));
    }
  }
  SECTION("http to a TLS member") {
    EtcdCluster secure(1, {.tls = true});
    const EtcdClientOptions options{{secure.Endpoint()}, kTimeout};
    for (auto fails : {&RangeFails, &WatchFails}) {
      const auto start = Clock::now();
      const std::string text = fails(options);
      CHECK(Clock::now() - start < kTimeout);
      CHECK_THAT(text, Catch::Contains(secure.Endpoint().ToString() + ": "));
      CHECK_THAT(text,
                 Catch::Contains("if it speaks TLS, use --rdzv_conf protocol=https and cacert="));
    }
  }
  SECTION("http to a Go TLS server that answers 400 (etcd closes instead)") {
    asio::io_context io;
    asio::ip::tcp::acceptor go(io, {asio::ip::make_address("127.0.0.1"), 0});
    const HostPort at{"127.0.0.1", go.local_endpoint().port()};
    std::thread serving([&go] {
      asio::ip::tcp::socket socket = go.accept();
      char request[512];
      socket.read_some(asio::buffer(request));
      asio::write(socket, asio::buffer(std::string(
                              "HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to "
                              "an HTTPS server.\n")));
    });
    const std::string text = RangeFails({{at}, kTimeout});
    serving.join();
    CHECK(text == "etcd: no member answered /v3/kv/range: " + at.ToString() +
                      ": it speaks TLS (HTTP 400: Client sent an HTTP request to an HTTPS "
                      "server): use --rdzv_conf protocol=https and cacert=...");
  }
}

TEST_CASE("etcd over TLS: a silent member times the handshake out, Interrupt ends it",
          "[etcd][tls]") {
  TempDir dir;
  testing::MakeCa(dir.path, "ca");
  const EtcdTls tls{dir.path + "/ca.pem"};
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});  // never accepts
  const HostPort at{"127.0.0.1", silent.local_endpoint().port()};
  EtcdClient client({{at}, 1s, tls});
  auto start = Clock::now();
  CHECK_THAT(Unavailable([&] { client.Call("/v3/kv/range", RangeBody("k")); }),
             Catch::Contains(at.ToString() + ": no answer within 1.00 s"));
  CHECK(Clock::now() - start < 1s + 900ms);

  EtcdClient patient({{at}, 60s, tls});
  start = Clock::now();
  auto blocked = std::async(std::launch::async, [&patient] {
    return Unavailable([&] { patient.Call("/v3/kv/range", RangeBody("k")); });
  });
  REQUIRE(blocked.wait_for(200ms) == std::future_status::timeout);
  patient.Interrupt();
  REQUIRE(blocked.wait_for(5s) == std::future_status::ready);
  CHECK_THAT(blocked.get(), Catch::Contains("interrupted"));
}

TEST_CASE("etcd over TLS: unusable TLS files are a UsageError naming the rdzv_conf key",
          "[etcd][tls]") {
  TempDir dir;
  testing::MakeCa(dir.path, "ca");
  testing::MakeCert(dir.path, "client", "ca", "");
  const std::string ca = dir.path + "/ca.pem";
  const std::string cert = dir.path + "/client.pem";
  const std::string key = dir.path + "/client.key";
  CHECK(Unusable({ca, cert, key}) == "no error");
  CHECK(Unusable({dir.path + "/absent.pem"}) ==
        "--rdzv_conf cacert=" + dir.path +
            "/absent.pem: cannot read it (No such file or directory)");
  CHECK_THAT(Unusable({key}),
             Catch::StartsWith("--rdzv_conf cacert=" + key + ": no PEM CA certificate in it ("));
  CHECK(Unusable({ca, cert, ""}) == "--rdzv_conf cert=" + cert + " without --rdzv_conf key=...");
  CHECK(Unusable({ca, "", key}) == "--rdzv_conf key=" + key + " without --rdzv_conf cert=...");
  CHECK_THAT(Unusable({ca, key, key}),
             Catch::StartsWith("--rdzv_conf cert=" + key + ": no PEM certificate in it ("));
  CHECK_THAT(Unusable({ca, cert, cert}),
             Catch::StartsWith("--rdzv_conf key=" + cert + ": no PEM private key in it ("));
  CHECK(Unusable({ca, cert, dir.path + "/ca.key"}) ==
        "--rdzv_conf key=" + dir.path + "/ca.key: not the private key of cert=" + cert);
  CHECK_THROWS_AS(EtcdWatch({{{"127.0.0.1", 1}}, 1s, EtcdTls{dir.path + "/absent.pem"}},
                            WatchCreateBody("k", "", 0)),
                  UsageError);
}

TEST_CASE("etcd client: a kept-alive connection the member closed is retried once, a fresh one not",
          "[etcd]") {
  asio::io_context io;
  asio::ip::tcp::acceptor member(io, {asio::ip::make_address("127.0.0.1"), 0});
  const HostPort at{"127.0.0.1", member.local_endpoint().port()};
  auto serving =
      std::async(std::launch::async, [&member] { return ServeOnePerConnection(member, 2); });
  EtcdClient client({{at}, 2s});
  CHECK(ParseRange(client.Call("/v3/kv/range", RangeBody("k"))).header.revision == 7);
  CHECK(ParseRange(client.Call("/v3/kv/range", RangeBody("k"))).header.revision == 7);  // retried
  CHECK(serving.get() == 2);
}

}  // namespace ddprun::store::etcd
