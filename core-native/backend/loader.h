// Backend choice: the CPU backend is linked in; the CUDA backend is a separate module
// (libsplash_cuda.so next to the engine binary, or $SPLASH_CUDA_MODULE) opened at run time, so the same
// install works with and without a GPU.
#pragma once
#include <cstdint>
#include <string>

#include "splash/backend.h"

namespace splash {

struct BackendHandle {
  splash_backend* backend = nullptr;
  void (*destroy)(splash_backend*) = nullptr;
  void* module = nullptr;  // dlopen handle of a loaded module, or null
};

// `name`: "cpu", "cuda", or "auto"/empty = $SPLASH_BACKEND if set, else CUDA when the module loads and a
// device is present, else CPU. Throws Error("unsupported") when the named backend cannot start.
BackendHandle backend_open(const std::string& name, int threads, const char* isa, int act_levels);
void backend_close(BackendHandle& h);
// A device backend's memory: the device's free and total bytes (cudaMemGetInfo), the bytes this backend
// holds and its cap (0: none). False for host-memory backends.
bool backend_device_memory(const splash_backend& b, uint64_t& free, uint64_t& total, uint64_t& used, uint64_t& limit);
// Caps a device backend's allocations (0: no cap); false when the backend has no such control.
bool backend_set_memory_limit(const splash_backend& b, uint64_t bytes);
// Why the CUDA backend was not chosen (empty when it was, or was not tried).
const std::string& backend_cuda_note();

}  // namespace splash
