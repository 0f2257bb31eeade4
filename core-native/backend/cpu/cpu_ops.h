// Plain C++ CPU ops (reference implementations; the -O3 compiler vectorises the inner loops).
#pragma once
#include <cmath>
#include <cstdint>

#include "sampler/fast_exp.h"
#include "splash/backend.h"

// Hot loops of the plain ops get x86-64-v4 (AVX-512) and x86-64-v3 (AVX2 + FMA) clones next to the baseline one
// (GCC function multi-versioning, resolved once at load time; a bare "avx2" clone had no FMA); other targets build
// the portable version only.
#if (defined(__x86_64__) || defined(_M_X64)) && defined(__GNUC__) && defined(__linux__)
#define SPLASH_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SPLASH_CLONES
#endif

namespace splash::cpu {

void dequant_row_ref(const splash_weight* w, int64_t r, float* out);  // natural order
double matmul_ref_dot(const splash_weight* w, int64_t r, const float* x);  // fp64 reference dot
void rmsnorm_ref(const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y);
void gated_rmsnorm_ref(const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y);
void rope_ref(float* x, int32_t n_heads, int64_t head_stride, int32_t hd, int32_t rd, const int32_t pos[3],
              const int32_t* section, float theta);
void swiglu_ref(const float* g, const float* u, int64_t n, float* out);
void conv1d_silu_ref(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y);
// Tiled causal attention of query tokens [t0, t1) for the query heads of KV head `kvh` (see cpu_attention.cpp).
constexpr int32_t kAttnKeyBlock = 64;    // keys per block (absolute positions: the same blocks for every row)
constexpr int32_t kAttnQueryBlock = 16;  // query tokens per task
void attention_tile(const splash_attn_args* a, int32_t kvh, int32_t t0, int32_t t1);
void gdn_recurrent_head(const splash_gdn_args* a, int32_t h);
void gdn_chunked_head(const splash_gdn_args* a, int32_t h);

// Dot product the compiler may vectorise (reassociation allowed here only: -fopenmp-simd).
inline float dotf(const float* a, const float* b, int32_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int32_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// The sampler's polynomial exp (~2e-7 relative error), which loops over channels vectorise (std::exp stays a scalar
// libm call per element); the files that use them in such loops are compiled with -fno-trapping-math (CMakeLists.txt).
inline float silu(float x) { return x / (1.f + sampler::fast_exp(-x)); }
inline float sigmoid(float x) { return 1.f / (1.f + sampler::fast_exp(-x)); }

}  // namespace splash::cpu
