// A blocking client of etcd's v3 JSON gateway (etcd_v3.h) over HTTP/1.1 with Boost.Beast:
// unary calls (POST /v3/kv/range, ...) and watch streams, for the etcd rendezvous backend
// (issue 14). Every member of the cluster is listed; a call goes to the member that answered
// last and fails over to the next on a connection error, a timeout or a 5xx reply, so losing a
// member costs one timeout at most. Each request on one member is bounded by `timeout`, stretched
// up to twice that while the link is slow (link_pace.h: the slowest recent answers, times 3). A
// reply that is not etcd's fails over too, and when no member answers the error names every
// member with its problem in one line. Calls are serialized (safe to share between threads);
// Interrupt() aborts a blocked call from another thread. With `tls` set every connection is
// HTTPS: the member's certificate must chain to `cacert` and name the endpoint's host (its IP
// address for an IP literal); a TLS problem (verification, a plain-HTTP member, a refused or
// missing client certificate) is one member's problem, named with the rdzv_conf key to fix.
#pragma once
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cancellable_pause.h"
#include "common/host_port.h"
#include "store/etcd/etcd_v3.h"
#include "store/etcd/link_pace.h"
#include "store/store.h"

namespace ddprun::store::etcd {

// protocol=https: the members' certificates are checked against `cacert` (empty: the system's
// CA store); `cert`+`key` (both or neither) is this client's certificate for members that ask
// for one (etcd --client-cert-auth). Paths of PEM files.
struct EtcdTls {
  std::string cacert{};
  std::string cert{};
  std::string key{};
  bool operator==(const EtcdTls&) const = default;
};

struct EtcdClientOptions {
  std::vector<HostPort> endpoints;           // every member, host:port of its client URL
  std::chrono::milliseconds timeout{5'000};  // one request on one member (see LinkPace)
  std::optional<EtcdTls> tls{};              // none: plain http
  // When no member answered (a leader election after the leader's loss, a member restarting),
  // the members are tried again, kPatiencePause apart, for this long before EtcdUnavailable
  // (0: once).
  std::chrono::milliseconds patience{};
  bool operator==(const EtcdClientOptions&) const = default;
};

inline constexpr std::chrono::milliseconds kPatiencePause{100};

// The OpenSSL context built from EtcdTls (etcd_client.cc), shared by a client's connections.
class EtcdTlsContext;

// No member answered: "etcd: no member answered: 127.0.0.1:2379: connection refused; ...".
class EtcdUnavailable : public StoreConnectionError {
 public:
  using StoreConnectionError::StoreConnectionError;
};

// One member did not answer this request (connection refused or reset, a timeout, a 5xx reply, a
// reply that is not etcd's JSON): the client tries the next member with the same body.
// TimedOut(): no answer within the timeout (a frozen or cut-off member), not a closed connection.
class EtcdMemberError : public std::runtime_error {
 public:
  explicit EtcdMemberError(const std::string& what, bool timed_out = false)
      : std::runtime_error(what), timed_out_(timed_out) {}
  bool TimedOut() const { return timed_out_; }

 private:
  bool timed_out_;
};

// The seam below the member failover: one request to one member (`member` indexes
// EtcdClientOptions::endpoints), its connect, write and read each within `timeout`. Returns the
// member's JSON reply (an etcd error reply too), or throws EtcdMemberError; a request that throws
// may still have been applied by etcd (its reply was lost), and the client sends the same body
// to the next member. Post is called by one thread at a time; Interrupt, from any thread, ends a
// running Post and every later one (EtcdMemberError). The real one is HTTP over a kept-alive
// connection (etcd_client.cc); tests wrap it to lose replies.
class EtcdRoundTrip {
 public:
  virtual ~EtcdRoundTrip() = default;
  virtual nlohmann::json Post(std::size_t member, const std::string& path, const std::string& body,
                              std::chrono::milliseconds timeout) = 0;
  virtual void Interrupt() = 0;
};

// Given the real round trip, returns the one the client uses (a test's fault injector).
using EtcdRoundTripWrap =
    std::function<std::unique_ptr<EtcdRoundTrip>(std::unique_ptr<EtcdRoundTrip> real)>;

class EtcdClient {
 public:
  // Throws UsageError naming the rdzv_conf key and the file when a TLS file cannot be read, is
  // not PEM, or the key is not the certificate's (cert and key: both or neither). `wrap`: see
  // EtcdRoundTripWrap (none: the real round trip).
  explicit EtcdClient(EtcdClientOptions options, const EtcdRoundTripWrap& wrap = {});
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `body` to `path` ("/v3/kv/range"); returns the reply's JSON (an error reply too: the
  // etcd_v3 parsers throw EtcdError for it). Throws EtcdUnavailable.
  nlohmann::json Call(const std::string& path, const nlohmann::json& body);
  void Interrupt();
  // The member that answered last.
  HostPort Current() const;

 private:
  friend class EtcdWatch;  // opens its streams with options_ and tls_
  // Every member once, from the one that answered last.
  nlohmann::json CallMembers(const std::string& path, const std::string& body);
  // Waits `duration`; false at once when interrupted.
  bool PauseUnlessInterrupted(std::chrono::milliseconds duration);

  EtcdClientOptions options_;
  LinkPace pace_{options_.timeout};      // the timeout of each request, under mutex_
  std::shared_ptr<EtcdTlsContext> tls_;  // null: plain http
  std::unique_ptr<EtcdRoundTrip> round_trip_;
  mutable std::mutex mutex_;
  std::size_t current_ = 0;
  std::atomic<bool> interrupted_{false};
  CancellablePause patience_pause_;  // Interrupt() ends a patience pause
};

// One watch stream (POST /v3/watch) on the first member that accepts it. Next() returns the
// stream's next message, or nullopt when `deadline` passed first (the stream stays open).
// Throws EtcdUnavailable when the member is lost (open a new watch from the last revision), and
// UsageError as EtcdClient's constructor does for unusable TLS files.
class EtcdWatch {
 public:
  EtcdWatch(const EtcdClientOptions& options, const nlohmann::json& create_body);
  // On `client`'s members, with its TLS context (the PEM files are not read again).
  EtcdWatch(const EtcdClient& client, const nlohmann::json& create_body);
  ~EtcdWatch();
  EtcdWatch(const EtcdWatch&) = delete;
  EtcdWatch& operator=(const EtcdWatch&) = delete;

  std::optional<WatchMessage> Next(std::chrono::steady_clock::time_point deadline);
  // Ends a blocked Next() from another thread (it throws EtcdUnavailable).
  void Interrupt();

 private:
  EtcdWatch(const EtcdClientOptions& options, const std::shared_ptr<EtcdTlsContext>& tls,
            const nlohmann::json& create_body);

  class Stream;
  std::unique_ptr<Stream> stream_;
};

}  // namespace ddprun::store::etcd
