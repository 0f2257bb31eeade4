// CPU matmul row kernels, one set per instruction set (scalar, AVX2, AVX-512), chosen at run time.
// The activation block is prepared once per matmul (prepare_act) in a layout every ISA shares:
//  - q4 weights: within each 64-group, activations are reordered [even 32 | odd 32] so the low and
//    high nibbles of the 32 packed bytes line up with contiguous activations (no shuffles);
//  - other weights: natural order.
// The int8 activations of q4 weights go one step further: groups are stored in pairs,
// [g even 32 | g+1 even 32 | g odd 32 | g+1 odd 32], so one 512-bit load feeds a nibble plane of two
// groups (an unpaired last group is [even 32 | odd 32]); q4_even_at / q4_odd_at give the offsets.
// Two arithmetic paths exist for q4/q8: "f32" (fp32 activations, exact up to rounding) and "i8"
// (activations quantised to int8 per 64-group, integer dot products, then
//  dot_g = scale_g·sx_g·Σ q·xq + bias_g·Σ x_g), optionally with a second int8 level for the residual
//  ("int8x2": x ≈ sx·xq + sx2·xq2, sx2 = sx/256, error ~1/65000 of amax; both levels reuse the unpacked
//  weights). bf16/f32 weights always use fp32.
#pragma once
#include <cstdint>
#include <vector>

#include "splash/backend.h"

namespace splash {
class ThreadPool;
}

namespace splash::cpu {

struct Act {
  int64_t cols = 0;
  int32_t nt = 0;
  bool i8 = false;
  const float* xf = nullptr;      // [nt, cols] fp32 activations in kernel layout
  const int8_t* xq = nullptr;     // [nt, cols] int8 (i8 path), kernel layout
  const float* xs = nullptr;      // [nt, G] activation scale per group
  const float* xsum = nullptr;    // [nt, G] Σ x per group (fp32, original values)
  const int32_t* xqsum = nullptr; // [nt, G] Σ xq per group
  const int8_t* xq2 = nullptr;    // second level (int8x2 only), else nullptr
  const float* xs2 = nullptr;
  const int32_t* xqsum2 = nullptr;
};

struct ActBuf {
  std::vector<float> xf, xs, xsum;
  std::vector<int8_t> xq, xq2;
  std::vector<int32_t> xqsum, xqsum2;
  std::vector<float> xs2;
};

// Fills `a` (pointing into `buf` or at x itself).
// levels: 0 = fp32 activations, 1 = int8, 2 = int8x2. pool: splits the tokens of a large call across threads.
void prepare_act(const splash_weight* w, const float* x, int32_t nt, int levels, ActBuf& buf, Act& a,
                 ThreadPool* pool = nullptr);

struct IsaKernels {
  const char* name;
  // y[t*ys + r] for r in [r0, r1), t < a.nt.
  void (*rows)(const splash_weight* w, const Act& a, int64_t r0, int64_t r1, float* y, int64_t ys);
};

const IsaKernels* isa_scalar();
#if defined(__x86_64__) || defined(_M_X64)
const IsaKernels* isa_avx2();
const IsaKernels* isa_avx512();
#endif
#if defined(__aarch64__)
const IsaKernels* isa_neon_dotprod();  // q4 int8 tiles with sdot; other paths fall back to scalar
#endif
// Best ISA this CPU supports, or the named one ("scalar" | "avx2" | "avx512" | "neon-dotprod"); nullptr if
// unsupported.
const IsaKernels* isa_select(const char* name);
// Names of the ISAs this CPU can run, best last.
std::vector<const IsaKernels*> isa_available();

inline int64_t q4_even_at(int64_t g) { return (g & 1) ? (g - 1) * 64 + 32 : g * 64; }
inline int64_t q4_odd_at(int64_t g, int64_t G) { return (g & 1) || g + 1 < G ? q4_even_at(g) + 64 : g * 64 + 32; }

inline float bf16_to_f32(uint16_t v) {
  union { uint32_t u; float f; } c{uint32_t(v) << 16};
  return c.f;
}

}  // namespace splash::cpu
