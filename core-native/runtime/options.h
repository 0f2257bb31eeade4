// The native core's options, in one typed object: read from the environment here and nowhere else, when a model
// or backend opens (options_from_env), and handed down from there. The CUDA backend reads its own kernel options
// the same way when it is created (backend/cuda/cuda_options.h). docs/configuration.md lists every variable, its
// default and who needs it.
#pragma once
#include <string>

namespace splash {

struct Options {
  std::string backend;      // $SPLASH_BACKEND: "cpu", "cuda" or "auto" (empty: auto)
  std::string cuda_module;  // $SPLASH_CUDA_MODULE: the CUDA module's path (empty: libsplash_cuda.so beside the binary)
  int cuda_device = 0;      // $SPLASH_CUDA_DEVICE: which GPU
  bool device_argmax = true;  // $SPLASH_DEVICE_ARGMAX=0: greedy rows chosen on the host (measurement)
  // $SPLASH_DEVICE_SAMPLE: 1 the backend's sampler also on the CPU (where it is the host's sampler: to test the
  // path), 0 always the host's; -1 (unset) device backends only
  int device_sample = -1;
  bool spec_kernels = true;  // $SPLASH_SPEC_KERNELS=0: the package's specialised kernels are not loaded
  bool step_graphs = true;   // $SPLASH_CUDA_GRAPHS=0: steps are never recorded as graphs (diagnosis)
  std::string gdn_rollback;  // $SPLASH_GDN_ROLLBACK: "replay", "states" or empty (chosen by the state size)
};

Options options_from_env();

}  // namespace splash
