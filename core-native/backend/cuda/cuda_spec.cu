// Package-specialised kernels: a package may ship a CUDA image (`kernels/cuda-sm90.fatbin`, manifest
// `kernels` entry) holding the int8x2 decode GEMV compiled for its own weight shapes (gemv_q.cuh,
// SPLASH_SPEC_GEMV). The model hands the image over at open (extra proc "splash_cuda_load_kernels"); it is
// loaded with the runtime's library API, checked against this backend's ABI, and its kernels are recorded
// by (bits, cols, tokens). launch_rows (cuda_matmul.cu) takes one when it exists for a launch's shape.
#include <cstdio>
#include <string>

#include "backend/cuda/gemv_q.cuh"

namespace splash::cuda {

void spec_unload(Ctx* c) {
  c->spec.clear();
  if (c->spec_lib) cudaLibraryUnload(c->spec_lib);
  c->spec_lib = nullptr;
  c->spec_image.clear();
  c->spec_image.shrink_to_fit();
}

int spec_shapes(void* ctx) { return int(static_cast<Ctx*>(ctx)->spec.size() / 4); }

const char* spec_load(void* ctx, const void* image, size_t bytes, int abi) {
  Ctx* c = static_cast<Ctx*>(ctx);
  thread_local std::string why;
  auto fail = [&](std::string msg) -> const char* {
    spec_unload(c);
    cudaGetLastError();
    why = std::move(msg);
    return why.c_str();
  };
  spec_unload(c);
  if (!image && bytes == 0) return nullptr;  // (null, 0): back to the generic kernels
  if (abi != SPLASH_SPEC_ABI)
    return fail("kernel image built for ABI " + std::to_string(abi) + ", this backend runs ABI " +
                std::to_string(SPLASH_SPEC_ABI));
  if (!image || bytes < 16) return fail("empty kernel image");
  c->spec_image.assign(static_cast<const char*>(image), static_cast<const char*>(image) + bytes);
  cudaError_t e = cudaLibraryLoadData(&c->spec_lib, c->spec_image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (e != cudaSuccess) {
    c->spec_lib = nullptr;
    return fail(std::string("cannot load the kernel image: ") + cudaGetErrorString(e));
  }
  // the image's own table: {ABI, sizeof(GemvGroup), n, bits, cols, ...}
  void* dtab = nullptr;
  size_t tab_bytes = 0;
  if (cudaLibraryGetGlobal(&dtab, &tab_bytes, c->spec_lib, "splash_spec_table") != cudaSuccess || tab_bytes < 12 ||
      tab_bytes % 4)
    return fail("the kernel image has no splash_spec_table");
  std::vector<int> tab(tab_bytes / 4);
  if ((e = cudaMemcpy(tab.data(), dtab, tab_bytes, cudaMemcpyDeviceToHost)) != cudaSuccess)
    return fail(std::string("cannot read the kernel table: ") + cudaGetErrorString(e));
  if (tab[0] != SPLASH_SPEC_ABI || tab[1] != int(sizeof(GemvGroup)))
    return fail("the kernel image's table says ABI " + std::to_string(tab[0]) + " (argument block of " +
                std::to_string(tab[1]) + " bytes), this backend runs ABI " + std::to_string(SPLASH_SPEC_ABI) + " (" +
                std::to_string(sizeof(GemvGroup)) + " bytes)");
  const int n = tab[2];
  if (n < 0 || tab.size() != size_t(3 + 2 * n)) return fail("the kernel image's table is malformed");
  for (int i = 0; i < n; ++i) {
    const int bits = tab[3 + 2 * i], cols = tab[4 + 2 * i];
    if ((bits != 4 && bits != 8) || cols <= 0 || cols % 64) return fail("the kernel table names a bad shape");
    for (int nt : {1, 2, 4, 8}) {
      const std::string name = std::string(SPLASH_SPEC_PREFIX) + std::to_string(bits) + "_k" + std::to_string(cols) +
                               "_t" + std::to_string(nt);
      cudaKernel_t k = nullptr;
      if (cudaLibraryGetKernel(&k, c->spec_lib, name.c_str()) != cudaSuccess) return fail("kernel " + name + " is missing");
      cudaFuncAttributes attr{};  // loads it for this device now (not while a decode graph records)
      if ((e = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(k))) != cudaSuccess)
        return fail("kernel " + name + ": " + cudaGetErrorString(e));
      if (attr.maxThreadsPerBlock < 128) return fail("kernel " + name + " cannot run 128 threads per block");
      c->spec[spec_key(bits, cols, nt)] = reinterpret_cast<const void*>(k);
    }
  }
  return nullptr;
}

}  // namespace splash::cuda
