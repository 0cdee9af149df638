// Finds and loads libddprun_worker_nccl.so at run time: $DDPRUN_NCCL_PLUGIN, then next to the
// running executable, then in the install tree's <libdir>/ddprun. Loaded once, never
// unloaded. Every failure is a BackendUnavailable saying why.
#pragma once
#include <memory>
#include <stdexcept>

#include "worker/communicator.h"
#include "worker/nccl_plugin.h"

namespace ddprun::worker {

class BackendUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class NcclPlugin {
 public:
  // The process-wide plugin; throws BackendUnavailable when it cannot be loaded.
  static NcclPlugin& Get();

  int DeviceCount() const;  // throws BackendUnavailable (no driver, no device)
  std::unique_ptr<Communicator> Create(const NcclPluginArgs& args) const;

 private:
  using DeviceCountFn = int (*)(char*, std::size_t);
  using CreateFn = Communicator* (*)(const NcclPluginArgs*, char*, std::size_t);

  NcclPlugin(DeviceCountFn device_count, CreateFn create)
      : device_count_(device_count), create_(create) {}

  DeviceCountFn device_count_;
  CreateFn create_;
};

}  // namespace ddprun::worker
