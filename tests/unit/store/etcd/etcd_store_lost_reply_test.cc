// ADD on etcd under a lost reply (issue 26), against a real 2-member etcd: the first try of an
// ADD's transaction commits on etcd, but its reply is lost (the round trip throws what a reset
// connection gives), so the client sends the same transaction to the other member. The counter
// must move once, and ADD must return the counter as its own commit left it, even when another
// ADD commits between the lost reply and the retry (the rendezvous takes `Add(k, 1) == 1` as
// "first", so two ADDs must never return the same value).
#include <catch2/catch.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "etcd_server.h"
#include "store/etcd/etcd_store.h"

namespace ddprun::store::etcd {
namespace {

using namespace std::chrono_literals;
using testing::EtcdCluster;

// Which reply to lose, and what happened. Armed, the next transaction that puts (an ADD's;
// reads only range) is applied by etcd, `between` runs, and its reply is lost.
struct ReplyLoss {
  bool armed = false;
  std::function<void()> between = [] {};
  int lost = 0;
  std::vector<std::size_t> members;  // every member asked while armed or just after, in order
};

// Forwards to the real round trip, and loses the reply ReplyLoss names.
class LosingRoundTrip : public EtcdRoundTrip {
 public:
  LosingRoundTrip(std::unique_ptr<EtcdRoundTrip> real, std::shared_ptr<ReplyLoss> loss)
      : real_(std::move(real)), loss_(std::move(loss)) {}

  nlohmann::json Post(std::size_t member, const std::string& path, const std::string& body,
                      std::chrono::milliseconds timeout) override {
    loss_->members.push_back(member);
    nlohmann::json reply = real_->Post(member, path, body, timeout);
    if (!loss_->armed || path != "/v3/kv/txn" || body.find("requestPut") == std::string::npos) {
      return reply;
    }
    loss_->armed = false;
    ++loss_->lost;
    loss_->between();
    throw EtcdMemberError("Connection reset by peer");
  }
  void Interrupt() override { real_->Interrupt(); }

 private:
  std::unique_ptr<EtcdRoundTrip> real_;
  std::shared_ptr<ReplyLoss> loss_;
};

EtcdRoundTripWrap LoseRepliesOf(std::shared_ptr<ReplyLoss> loss) {
  return [loss](std::unique_ptr<EtcdRoundTrip> real) -> std::unique_ptr<EtcdRoundTrip> {
    return std::make_unique<LosingRoundTrip>(std::move(real), loss);
  };
}

// Arms `loss` for the next ADD; afterwards, the members it asked.
void Arm(
    ReplyLoss& loss, std::function<void()> between = [] {}) {
  loss.armed = true;
  loss.between = std::move(between);
  loss.members.clear();
}

}  // namespace

TEST_CASE("etcd store: an ADD whose reply is lost is retried on the other member and counted once",
          "[etcd][store]") {
  EtcdCluster cluster(2);
  auto loss = std::make_shared<ReplyLoss>();
  EtcdStore store({{cluster.Endpoints(), 5s}, "/job/"}, LoseRepliesOf(loss));
  EtcdStore other({{{cluster.Endpoint(1)}, 5s}, "/job/"});

  // The first ADD creates the counter: the retry finds it created by its own first try.
  Arm(*loss);
  CHECK(store.Add("n", 3) == 3);
  CHECK(loss->lost == 1);
  CHECK(loss->members == std::vector<std::size_t>{0, 1});
  CHECK(other.Add("n", 0) == 3);

  // Another node's ADD commits between the lost reply and the retry: each ADD returns the
  // counter as its own commit left it, and the counter moved by both, once each.
  std::int64_t others = 0;
  Arm(*loss, [&] { others = other.Add("n", 10); });
  CHECK(store.Add("n", 5) == 8);
  CHECK(others == 18);
  CHECK(loss->members == std::vector<std::size_t>{1, 0});  // member 1 answered last
  CHECK(other.Add("n", 0) == 18);

  // Later ADDs, from both, count as usual.
  CHECK(store.Add("n", 1) == 19);
  CHECK(other.Add("n", -4) == 15);
  CHECK(store.Add("n", 0) == 15);

  // ADD 0 on a missing counter creates it; the retry of that creation reads 0.
  Arm(*loss);
  CHECK(store.Add("zero", 0) == 0);
  CHECK(loss->lost == 3);
  CHECK(other.GetString("zero") == "0");
  CHECK(other.Add("zero", 2) == 2);
}

}  // namespace ddprun::store::etcd
