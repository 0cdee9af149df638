// Runs blocking store work off the event loop: `work` runs elsewhere (a thread), then `then`
// runs back on the agent's event loop with the exception `work` threw (or null). Jobs run one
// at a time in submission order. InlineRunner runs both at once, for tests and single-node runs.
#pragma once
#include <exception>
#include <functional>

namespace ddprun::elastic {

class BlockingRunner {
 public:
  using Work = std::function<void()>;
  using Then = std::function<void(std::exception_ptr)>;
  virtual ~BlockingRunner() = default;
  virtual void Run(Work work, Then then) = 0;
};

class InlineRunner : public BlockingRunner {
 public:
  void Run(Work work, Then then) override {
    std::exception_ptr error;
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
    then(error);
  }
};

}  // namespace ddprun::elastic
