#include "launcher/thread_runner.h"

namespace ddprun::launcher {

ThreadRunner::ThreadRunner(asio::io_context& io) : io_(io), thread_([this] { Loop(); }) {}

ThreadRunner::~ThreadRunner() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ThreadRunner::Run(Work work, Then then) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back({std::move(work), std::move(then), asio::make_work_guard(io_)});
  }
  wake_.notify_all();
}

void ThreadRunner::Loop() {
  for (;;) {
    std::unique_lock lock(mutex_);
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      job.work();
    } catch (...) {
      error = std::current_exception();
    }
    asio::post(io_, [then = std::move(job.then), error] { then(error); });
    job.guard.reset();
  }
}

}  // namespace ddprun::launcher
