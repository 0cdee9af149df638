// The NCCL backend, compiled into libddprun_worker_nccl.so only (see nccl_plugin.h). The
// communicator is non-blocking so that every wait — init and each collective — is bounded by
// the timeout: past it the communicator is aborted and a timeout is reported.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>

#include "worker/nccl_plugin.h"

namespace ddprun::worker {
namespace {

using Clock = std::chrono::steady_clock;

void CheckCuda(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

void CheckNccl(ncclResult_t status, const char* what) {
  if (status != ncclSuccess && status != ncclInProgress) {
    throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(status));
  }
}

ncclDataType_t NcclType(DataType type) {
  switch (type) {
    case DataType::kFloat:
      return ncclFloat32;
    case DataType::kDouble:
      return ncclFloat64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kInt64:
      break;
  }
  return ncclInt64;
}

class CudaBuffer : public Buffer {
 public:
  explicit CudaBuffer(std::size_t bytes) : bytes_(bytes) {
    CheckCuda(cudaMalloc(&data_, bytes == 0 ? 1 : bytes), "cudaMalloc");
    CheckCuda(cudaMemset(data_, 0, bytes), "cudaMemset");  // like the CPU buffers: zeros
  }
  ~CudaBuffer() override { cudaFree(data_); }
  void* Data() override { return data_; }
  std::size_t Bytes() const override { return bytes_; }
  void Upload(const void* host, std::size_t bytes) override {
    CheckCuda(cudaMemcpy(data_, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void Download(void* host, std::size_t bytes) const override {
    CheckCuda(cudaMemcpy(host, data_, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

class NcclCommunicator : public Communicator {
 public:
  explicit NcclCommunicator(const NcclPluginArgs& args)
      : rank_(args.rank), size_(args.size), timeout_(args.timeout) {
    CheckCuda(cudaSetDevice(args.device), "cudaSetDevice(LOCAL_RANK)");
    CheckCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
    ncclUniqueId id = ExchangeId(*args.store);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    CheckNccl(ncclCommInitRankConfig(&comm_, size_, id, rank_, &config), "ncclCommInitRank");
    WaitComm(Clock::now() + timeout_, "ncclCommInitRank");
    scratch_ = std::make_unique<CudaBuffer>(sizeof(std::int32_t));
  }

  ~NcclCommunicator() override {
    scratch_.reset();
    if (comm_ != nullptr) (aborted_ ? ncclCommAbort(comm_) : ncclCommDestroy(comm_));
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  int Rank() const override { return rank_; }
  int Size() const override { return size_; }
  std::string Backend() const override { return "nccl"; }
  std::unique_ptr<Buffer> Allocate(std::size_t bytes) override {
    return std::make_unique<CudaBuffer>(bytes);
  }

  void Allreduce(Buffer& buffer, std::size_t count, DataType type) override {
    if (count == 0) return;
    auto deadline = Clock::now() + timeout_;
    void* data = buffer.Data();
    CheckNccl(ncclAllReduce(data, data, count, NcclType(type), ncclSum, comm_, stream_),
              "ncclAllReduce");
    WaitComm(deadline, "ncclAllReduce");
    WaitStream(deadline);
  }

  void Barrier() override { Allreduce(*scratch_, 1, DataType::kInt32); }

 private:
  ncclUniqueId ExchangeId(store::Store& store) {
    ncclUniqueId id;
    if (rank_ == 0) {
      CheckNccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      auto* bytes = reinterpret_cast<const std::uint8_t*>(&id);
      store.Set("nccl_unique_id", store::Bytes(bytes, bytes + sizeof(id)));
      return id;
    }
    auto bytes = store.Get("nccl_unique_id");
    if (bytes.size() != sizeof(id)) throw std::runtime_error("malformed ncclUniqueId in store");
    std::memcpy(&id, bytes.data(), sizeof(id));
    return id;
  }

  [[noreturn]] void Abort(const char* what) {
    aborted_ = true;
    throw CollectiveTimeout(std::string(what) + " timed out after " +
                            std::to_string(timeout_.count()) + " ms (communicator aborted)");
  }

  // Polls a non-blocking communicator until its pending call has been issued.
  void WaitComm(Clock::time_point deadline, const char* what) {
    for (;;) {
      ncclResult_t state = ncclSuccess;
      CheckNccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      if (state == ncclSuccess) return;
      CheckNccl(state, what);
      if (Clock::now() > deadline) Abort(what);
      std::this_thread::yield();
    }
  }

  // Polls the stream, watching for asynchronous NCCL errors (a dead peer) and the deadline.
  void WaitStream(Clock::time_point deadline) {
    for (;;) {
      cudaError_t status = cudaStreamQuery(stream_);
      if (status == cudaSuccess) return;
      if (status != cudaErrorNotReady) CheckCuda(status, "cudaStreamQuery");
      ncclResult_t state = ncclSuccess;
      CheckNccl(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError");
      CheckNccl(state, "ncclAllReduce (async)");
      if (Clock::now() > deadline) Abort("ncclAllReduce");
      std::this_thread::yield();
    }
  }

  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
  cudaStream_t stream_ = nullptr;
  ncclComm_t comm_ = nullptr;
  bool aborted_ = false;
  std::unique_ptr<CudaBuffer> scratch_;
};

void CopyError(const std::string& message, char* error, std::size_t error_len) {
  if (error_len == 0) return;
  std::snprintf(error, error_len, "%s", message.c_str());
}

}  // namespace
}  // namespace ddprun::worker

extern "C" int DdprunNcclDeviceCount(char* error, std::size_t error_len) {
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count;
  ddprun::worker::CopyError(std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status), error,
                            error_len);
  return -1;
}

extern "C" ddprun::worker::Communicator* DdprunNcclCreate(
    const ddprun::worker::NcclPluginArgs* args, char* error, std::size_t error_len) {
  using namespace ddprun;
  try {
    return new worker::NcclCommunicator(*args);
  } catch (const worker::CollectiveTimeout& e) {
    worker::CopyError(std::string(kDdprunNcclTimeoutTag) + e.what(), error, error_len);
  } catch (const store::StoreTimeout& e) {
    worker::CopyError(std::string(kDdprunNcclTimeoutTag) + e.what(), error, error_len);
  } catch (const std::exception& e) {
    worker::CopyError(e.what(), error, error_len);
  }
  return nullptr;
}
