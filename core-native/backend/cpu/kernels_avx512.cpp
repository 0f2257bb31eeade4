// AVX-512 (F/BW/VL/VNNI) row kernels (this file is compiled with -mavx512f -mavx512bw -mavx512vl
// -mavx512vnni -mavx2 -mfma): VNNI dpbusd for the int8 path, 16-wide fp32.
#define SPLASH_ISA_NS avx512
#define SPLASH_ISA_NAME "avx512"
#define SPLASH_AVX512 1
#include "backend/cpu/kernels_x86.inc"

namespace splash::cpu {
const IsaKernels* isa_avx512() { return &avx512::kKernels; }
}  // namespace splash::cpu
