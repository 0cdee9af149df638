#include "worker/gloo_communicator.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <cstring>
#include <vector>

#include "worker/gloo_store.h"

namespace ddprun::worker {
namespace {

class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(std::size_t bytes) : data_(bytes) {}
  void* Data() override { return data_.data(); }
  std::size_t Bytes() const override { return data_.size(); }
  void Upload(const void* host, std::size_t bytes) override {
    if (bytes != 0) std::memcpy(data_.data(), host, bytes);
  }
  void Download(void* host, std::size_t bytes) const override {
    if (bytes != 0) std::memcpy(host, data_.data(), bytes);
  }

 private:
  std::vector<std::byte> data_;
};

std::shared_ptr<gloo::transport::Device> CreateDevice(const GlooConfig& config) {
  gloo::transport::tcp::attr attr;
  if (!config.interface.empty()) {
    attr.iface = config.interface;
  } else {
    attr.hostname = config.address;
  }
  return gloo::transport::tcp::CreateDevice(attr);
}

template <typename T>
gloo::AllreduceOptions::Func SumOf() {
  return static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>);
}

// gloo reports every failure, timeouts included, as gloo::IoException.
[[noreturn]] void Rethrow(const std::string& what, const gloo::Exception& error) {
  std::string message = what + ": " + error.what();
  if (message.find("imed out") != std::string::npos) throw CollectiveTimeout(message);
  throw std::runtime_error(message);
}

}  // namespace

GlooCommunicator::GlooCommunicator(const GlooConfig& config, std::shared_ptr<store::Store> store)
    : config_(config) {
  auto device = CreateDevice(config);
  auto context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.size);
  context->setTimeout(config.timeout);
  GlooStore gloo_store(std::move(store));
  try {
    context->connectFullMesh(gloo_store, device);
  } catch (const store::StoreTimeout& error) {
    throw CollectiveTimeout(std::string("gloo connectFullMesh: ") + error.what());
  } catch (const gloo::Exception& error) {
    Rethrow("gloo connectFullMesh", error);
  }
  context_ = std::move(context);
}

GlooCommunicator::~GlooCommunicator() = default;

std::unique_ptr<Buffer> GlooCommunicator::Allocate(std::size_t bytes) {
  return std::make_unique<HostBuffer>(bytes);
}

void GlooCommunicator::Allreduce(Buffer& buffer, std::size_t count, DataType type) {
  if (count == 0 || config_.size == 1) return;
  gloo::AllreduceOptions options(context_);
  VisitDataType(type, [&](auto zero) {
    using T = decltype(zero);
    options.setOutput(static_cast<T*>(buffer.Data()), count);
    options.setReduceFunction(SumOf<T>());
  });
  options.setTag(next_tag_++);
  options.setTimeout(config_.timeout);
  try {
    gloo::allreduce(options);
  } catch (const gloo::Exception& error) {
    Rethrow("gloo allreduce", error);
  }
}

void GlooCommunicator::Barrier() {
  if (config_.size == 1) return;
  gloo::BarrierOptions options(context_);
  options.setTag(next_tag_++);
  options.setTimeout(config_.timeout);
  try {
    gloo::barrier(options);
  } catch (const gloo::Exception& error) {
    Rethrow("gloo barrier", error);
  }
}

}  // namespace ddprun::worker
