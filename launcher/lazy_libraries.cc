// The resolver of ddprun's lazily loaded libraries (cmake/LazyLibraries.cmake): the first call
// of any of a library's functions lands here through its trampoline's stub, loads the library,
// points every slot of that library at the real function, and returns the one called. Built
// into the ddprun executable only, when DDPRUN_LAZY_LIBRARIES is on.
#include <dlfcn.h>
#include <unistd.h>

#include <cstddef>
#include <mutex>
#include <string>

extern "C" {
// The trampolines' slots (the generated .S), in the table's order.
extern void* ddprun_lazy_slots[];
// Called by the generated stub with the slot's index; returns the function to jump to.
void* DdprunLazyResolve(std::size_t index) noexcept;
}

namespace {

const char* const kLibraries[] = {
#define DDPRUN_LAZY_LIBRARY(soname) soname,
#define DDPRUN_LAZY_SYMBOL(name)
#include "lazy_libraries.inc"
#undef DDPRUN_LAZY_LIBRARY
#undef DDPRUN_LAZY_SYMBOL
};

constexpr std::size_t kNoLibrary = ~std::size_t{0};

// The libraries (nullptr) each followed by its symbols, in the slots' order.
const char* const kTable[] = {
#define DDPRUN_LAZY_LIBRARY(soname) nullptr,
#define DDPRUN_LAZY_SYMBOL(name) name,
#include "lazy_libraries.inc"
#undef DDPRUN_LAZY_LIBRARY
#undef DDPRUN_LAZY_SYMBOL
};

// The library of symbol `index`: the last library entry before it in kTable.
std::size_t LibraryOf(std::size_t index) {
  std::size_t library = kNoLibrary;
  std::size_t symbol = 0;
  for (const char* entry : kTable) {
    if (entry == nullptr) {
      ++library;
      continue;
    }
    if (symbol++ == index) return library;
  }
  return kNoLibrary;
}

// No exception can cross the assembly stub: a library that cannot be loaded ends the program
// with one line, as a missing DT_NEEDED library would have before main.
[[noreturn]] void Fail(const std::string& what) {
  const std::string line = "ddprun: " + what + "\n";
  [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  ::_exit(127);
}

}  // namespace

void* DdprunLazyResolve(std::size_t index) noexcept {
  static std::mutex mutex;
  const std::lock_guard lock(mutex);
  const std::size_t library = LibraryOf(index);
  if (library == kNoLibrary) Fail("lazy symbol out of range");
  // RTLD_NODELETE: the slots keep pointing into it for the program's life.
  void* handle = ::dlopen(kLibraries[library], RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (handle == nullptr)
    Fail(std::string("cannot load ") + kLibraries[library] + ": " + ::dlerror());
  std::size_t symbol = 0;
  std::size_t at = kNoLibrary;
  for (const char* entry : kTable) {
    if (entry == nullptr) {
      ++at;
      continue;
    }
    if (at == library) {
      void* address = ::dlsym(handle, entry);
      if (address == nullptr) Fail(std::string("no ") + entry + " in " + kLibraries[library]);
      __atomic_store_n(&ddprun_lazy_slots[symbol], address, __ATOMIC_RELEASE);
    }
    ++symbol;
  }
  return __atomic_load_n(&ddprun_lazy_slots[index], __ATOMIC_ACQUIRE);
}
