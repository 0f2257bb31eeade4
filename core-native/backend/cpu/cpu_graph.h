// The CPU backend's ABI-2 slots: memory movement and the model graph's elementwise pieces, in host
// memory. These are the reference forms of what every other backend does on its device.
#pragma once
#include <cstddef>
#include <cstdint>

#include "splash/backend.h"

namespace splash::cpu {

void copy_to_device(void* ctx, void* dst, const void* src, size_t bytes);
void copy_to_host(void* ctx, void* dst, const void* src, size_t bytes);
void copy2d(void* ctx, void* dst, size_t dp, const void* src, size_t sp, size_t width, size_t height);
void argmax_rows(void* ctx, const float* x, int32_t rows, int64_t width, int32_t* out);
void sample_rows(void* ctx, float* x, int64_t width, const splash_sample_desc* rows, int32_t n, const int32_t* ints,
                 int64_t n_ints, int32_t* out);
void memset_zero(void* ctx, void* dst, size_t bytes);
void embed(void* ctx, const splash_weight* w, const int32_t* tokens, int32_t n, float* out);
void add(void* ctx, float* y, const float* x, int64_t n);
void gdn_gates(void* ctx, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv);
void sigmoid_gate(void* ctx, float* x, int64_t xp, const float* g, int64_t gp, int32_t rows, int32_t width);
void gated_add(void* ctx, float* y, const float* x, const float* gate, int32_t n, int32_t dim);
void rope_seq(void* ctx, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, int32_t rd, int32_t start,
              const int32_t* section, float theta);

using MatmulFn = void (*)(void*, const splash_weight*, const float*, int32_t, float*, int64_t);
using SwigluFn = void (*)(void*, const float*, const float*, int64_t, float*);
// Routed experts: tokens grouped per expert (one matmul per expert), results summed in expert order; then the
// shared expert when given.
void moe_grouped(void* ctx, const splash_moe_args* a, MatmulFn matmul, SwigluFn swiglu);

}  // namespace splash::cpu
