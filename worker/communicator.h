// The Communicator seam: in-place sum allreduce and barrier over a fixed group of ranks.
// Implementations: gloo over TCP (CPU memory) and NCCL (CUDA memory, a plugin). Data lives in
// Buffers the communicator allocates, so callers need not know which memory it reduces in.
// One thread at a time; every rank must issue the same calls in the same order.
#pragma once
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "worker/data_type.h"

namespace ddprun::worker {

// A collective did not complete before its deadline (a peer died, hung or never joined).
class CollectiveTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Memory a communicator reduces in (host or device), with copies from and to host memory.
class Buffer {
 public:
  virtual ~Buffer() = default;
  virtual void* Data() = 0;
  virtual std::size_t Bytes() const = 0;
  // Copy `bytes` (<= Bytes()) between host memory and the start of this buffer.
  virtual void Upload(const void* host, std::size_t bytes) = 0;
  virtual void Download(void* host, std::size_t bytes) const = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int Rank() const = 0;
  virtual int Size() const = 0;
  virtual std::string Backend() const = 0;  // "cpu" or "nccl"
  virtual std::unique_ptr<Buffer> Allocate(std::size_t bytes) = 0;
  // Sums `count` elements of `type` at the start of `buffer` across ranks, in place. Throws
  // CollectiveTimeout or std::runtime_error.
  virtual void Allreduce(Buffer& buffer, std::size_t count, DataType type) = 0;
  virtual void Barrier() = 0;
};

}  // namespace ddprun::worker
