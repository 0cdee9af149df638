// The etcd client's timeout that fits the link (store/etcd/link_pace.h): LinkPace's arithmetic,
// and the client against a fake member whose answers take as long as the test says, as etcd's
// linearizable requests do over slow links (chaos seed `e` 5).
#include "store/etcd/link_pace.h"

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <deque>
#include <memory>
#include <thread>

#include "common/asio.h"
#include "store/etcd/etcd_client.h"

namespace ddprun::store::etcd {
namespace {

using namespace std::chrono_literals;
namespace http = boost::beast::http;

// A member on 127.0.0.1 that answers the n-th request (over any connection) after the n-th of
// `delays`, with etcd's JSON; stopped and joined with it.
class PacedMember {
 public:
  explicit PacedMember(std::deque<std::chrono::milliseconds> delays)
      : delays_(std::move(delays)), acceptor_(io_, {asio::ip::make_address("127.0.0.1"), 0}) {
    Accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~PacedMember() {
    io_.stop();
    thread_.join();
  }
  HostPort Endpoint() const { return {"127.0.0.1", acceptor_.local_endpoint().port()}; }

 private:
  struct Session {
    explicit Session(asio::io_context& io) : socket(io), timer(io) {}
    asio::ip::tcp::socket socket;
    asio::steady_timer timer;
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::string_body> response;
  };

  void Accept() {
    auto session = std::make_shared<Session>(io_);
    acceptor_.async_accept(session->socket, [this, session](boost::system::error_code error) {
      if (error) return;
      Read(session);
      Accept();
    });
  }

  void Read(std::shared_ptr<Session> session) {
    session->request = {};
    http::async_read(session->socket, session->buffer, session->request,
                     [this, session](boost::system::error_code error, std::size_t) {
                       if (error || delays_.empty()) return;
                       session->timer.expires_after(delays_.front());
                       delays_.pop_front();
                       session->timer.async_wait([this, session](auto) { Answer(session); });
                     });
  }

  void Answer(std::shared_ptr<Session> session) {
    session->response = {http::status::ok, 11};
    session->response.body() = R"({"header":{"revision":"7"}})";
    session->response.prepare_payload();
    http::async_write(session->socket, session->response,
                      [this, session](boost::system::error_code error, std::size_t) {
                        if (!error) Read(session);
                      });
  }

  std::deque<std::chrono::milliseconds> delays_;  // the io thread's only
  asio::io_context io_;
  asio::ip::tcp::acceptor acceptor_;
  std::thread thread_;
};

void Range(EtcdClient& client) { client.Call("/v3/kv/range", RangeBody("a")); }

}  // namespace

TEST_CASE(
    "etcd link pace: the configured timeout on a fast link, three times the slowest "
    "recent answer on a slow one, at most twice the configured",
    "[etcd]") {
  LinkPace pace(1500ms);
  CHECK(pace.Timeout() == 1500ms);
  pace.Answered(20ms);
  CHECK(pace.Timeout() == 1500ms);
  pace.Answered(700ms);
  CHECK(pace.Timeout() == 2100ms);
  pace.Answered(300ms);  // the slowest of the window counts, not the last
  CHECK(pace.Timeout() == 2100ms);
  pace.Answered(1400ms);
  CHECK(pace.Timeout() == 3000ms);
  for (std::size_t i = 1; i < LinkPace::kWindow; ++i) pace.Answered(10ms);
  CHECK(pace.Timeout() == 3000ms);  // the 1.4 s answer is still one of the last kWindow
  pace.Answered(10ms);
  CHECK(pace.Timeout() == 1500ms);  // a fast link again: a frozen member costs 1.5 s again
}

TEST_CASE("etcd client: a member slower than the timeout is waited for once the link is slow",
          "[etcd]") {
  SECTION("after slow answers it is") {
    PacedMember member({300ms, 300ms, 700ms});
    EtcdClient client({{member.Endpoint()}, 500ms});
    Range(client);
    Range(client);
    CHECK_NOTHROW(Range(client));  // 0.7 s: within 3 x 0.3 s, capped at 2 x 0.5 s
  }
  SECTION("on a link that was fast it is not: a frozen member costs the configured timeout") {
    PacedMember member({10ms, 700ms});
    EtcdClient client({{member.Endpoint()}, 500ms});
    Range(client);
    const auto start = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(Range(client), Catch::Contains("no answer within 0.50 s"));
    CHECK(std::chrono::steady_clock::now() - start < 700ms);
  }
  SECTION("after a member timed out the next one gets longer: a link that just turned slow") {
    PacedMember first({10ms, 2000ms});
    PacedMember second({700ms});
    EtcdClient client({{first.Endpoint(), second.Endpoint()}, 500ms});
    Range(client);                 // a fast link so far: the timeout is the configured 0.5 s
    CHECK_NOTHROW(Range(client));  // the first member: 0.5 s, then the second: 1 s, answers 0.7 s
  }
}

TEST_CASE("etcd link pace: a timeout counts as an answer at least that slow", "[etcd]") {
  LinkPace pace(1500ms);
  pace.TimedOut(1500ms);
  CHECK(pace.Timeout() == 3000ms);
  for (std::size_t i = 1; i < LinkPace::kWindow; ++i) pace.Answered(10ms);
  CHECK(pace.Timeout() == 3000ms);  // still in the window
  pace.Answered(10ms);
  CHECK(pace.Timeout() == 1500ms);
}

}  // namespace ddprun::store::etcd
