// AVX2 + FMA row kernels (this file is compiled with -mavx2 -mfma).
#define SPLASH_ISA_NS avx2
#define SPLASH_ISA_NAME "avx2"
#define SPLASH_AVX512 0
#include "backend/cpu/kernels_x86.inc"

namespace splash::cpu {
const IsaKernels* isa_avx2() { return &avx2::kKernels; }
}  // namespace splash::cpu
