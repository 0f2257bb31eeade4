// The CPU backend's ABI-3 slots: the vision encoder's LayerNorm, bias, GELU, table rotary and segment
// attention, in host memory (the reference forms of what every other backend does on its device).
#pragma once
#include <cstdint>

#include "runtime/thread_pool.h"
#include "splash/backend.h"

namespace splash::cpu {

void layer_norm(void* ctx, const float* x, const float* w, const float* b, int32_t n, int32_t dim, float eps, float* y);
void add_bias(void* ctx, float* y, const float* b, int32_t n, int32_t dim);
void gelu(void* ctx, float* x, int64_t n, int32_t tanh_approx);
void rope_table(void* ctx, float* x, int32_t nt, int64_t row_stride, int32_t nh, int64_t head_stride, int32_t hd,
                const float* cos, const float* sin);
// One task per (token, head) on `pool`; each task computes its row alone, so any split gives the same result.
void seg_attention_on(ThreadPool& pool, const splash_seg_attn_args* a);

}  // namespace splash::cpu
