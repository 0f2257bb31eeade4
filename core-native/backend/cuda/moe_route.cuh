// One token's routing by one warp (E ≤ 32·PER experts, K ≤ 32): softmax over the router logits, then K rounds of a
// warp arg-max (ties to the lower index; each lane's candidates sorted first, so a round is two warp reductions),
// the weights renormalised over the K when `renorm`. The one arithmetic of the routing kernel (cuda_moe.cu) and of
// the fused decode MoE (cuda_moe_fused.cu), so both choose the same experts with the same weights. Writes ids[0..K) (lane 0) and wts[0..K) (lanes < K); global or shared memory.
#pragma once
#include <climits>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {

// A float's bits as an int that orders like the float (for the warp's integer max).
__device__ __forceinline__ int ordered_int(float f) {
  const int b = __float_as_int(f);
  return b >= 0 ? b : b ^ 0x7FFFFFFF;
}

template <int PER>
__device__ __forceinline__ void route_warp(const float* row, int32_t E, int32_t K, int32_t renorm, int lane,
                                           int32_t* ids, float* wts) {
  float p[PER];
  int e[PER];
  int mo = INT_MIN;
#pragma unroll
  for (int i = 0; i < PER; ++i) {
    e[i] = lane + 32 * i;  // lane-strided: expert e = lane + 32·i
    p[i] = e[i] < E ? row[e[i]] : -INFINITY;
    mo = max(mo, ordered_int(p[i]));
  }
  mo = __reduce_max_sync(0xffffffffu, mo);
  const float m = __int_as_float(mo >= 0 ? mo : mo ^ 0x7FFFFFFF);
  float part = 0.f;
#pragma unroll
  for (int i = 0; i < PER; ++i) part += (p[i] = e[i] < E ? expf(p[i] - m) : 0.f);
  const float den = warp_sum(part);
#pragma unroll
  for (int i = 0; i < PER; ++i) p[i] = e[i] < E ? p[i] / den : -1.f;
  // the lane's candidates in descending order, equal ones by ascending expert (a stable odd-even transposition sort)
#pragma unroll
  for (int r = 0; r < PER; ++r)
#pragma unroll
    for (int i = r & 1; i + 1 < PER; i += 2)
      if (p[i + 1] > p[i]) {
        const float tp = p[i];
        p[i] = p[i + 1], p[i + 1] = tp;
        const int te = e[i];
        e[i] = e[i + 1], e[i + 1] = te;
      }
  // K rounds: the largest head of the lanes' lists (probabilities ≥ 0 order like their bits; 0: none left), the
  // lowest expert among the lanes that hold it; that lane moves on to its next candidate
  float sum = 0.f, mine = 0.f;
  for (int j = 0; j < K; ++j) {
    const unsigned key = p[0] >= 0.f ? __float_as_uint(p[0]) + 1u : 0u;
    const unsigned mx = __reduce_max_sync(0xffffffffu, key);
    const unsigned bi = __reduce_min_sync(0xffffffffu, key == mx && mx != 0u ? unsigned(e[0]) : 0xffffffffu);
    const float bv = mx != 0u ? __uint_as_float(mx - 1u) : -1.f;
    if (mx != 0u && lane == int(bi & 31u)) {
#pragma unroll
      for (int i = 0; i + 1 < PER; ++i) p[i] = p[i + 1], e[i] = e[i + 1];
      p[PER - 1] = -1.f;
    }
    if (lane == j) mine = bv;
    if (lane == 0) ids[j] = mx != 0u ? int32_t(bi) : E;
    sum += bv;
  }
  if (lane < K) wts[lane] = renorm ? mine / sum : mine;
}

}  // namespace splash::cuda
