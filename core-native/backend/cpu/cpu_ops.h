// Plain C++ CPU ops (reference implementations; the -O3 compiler vectorises the inner loops).
#pragma once
#include <cmath>
#include <cstdint>

#include "splash/backend.h"

namespace splash::cpu {

void dequant_row_ref(const splash_weight* w, int64_t r, float* out);  // natural order
double matmul_ref_dot(const splash_weight* w, int64_t r, const float* x);  // fp64 reference dot
void rmsnorm_ref(const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y);
void gated_rmsnorm_ref(const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y);
void rope_ref(float* x, int32_t n_heads, int64_t head_stride, int32_t hd, int32_t rd, const int32_t pos[3],
              const int32_t* section, float theta);
void swiglu_ref(const float* g, const float* u, int64_t n, float* out);
void conv1d_silu_ref(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y);
void attention_task(const splash_attn_args* a, int64_t task);  // task = token * n_heads + head
void gdn_recurrent_head(const splash_gdn_args* a, int32_t h);
void gdn_chunked_head(const splash_gdn_args* a, int32_t h);

inline float silu(float x) { return x / (1.f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.f / (1.f + std::exp(-x)); }

}  // namespace splash::cpu
