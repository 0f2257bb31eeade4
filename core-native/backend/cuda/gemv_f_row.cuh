// The few-row GEMV on fp32 activations (GDN b/a, routers, gates): a block per row, its columns split over the
// block's THREADS threads. A thread's first PRE pieces of 8 weights are read before the wait on the kernel that
// writes the activations (PDL; the weights do not depend on it), so after the wait only the activations and the
// sums remain. With `gates` (the GDN's b and a rows as weights 0 and 1 of the group), gdn_gates is applied to the
// sums as they are stored: beta = sigmoid(b), g = −exp(A_log)·softplus(a + dt_bias), k_gdn_gates's expressions.
// Run by k_gemv_f_row (cuda_matmul.cu) and by the leading blocks of the streaming GEMV (cuda_gemv_stream.cu) when
// these rows ride in the launch of the q4/q8 GEMVs on the same activations.
#pragma once
#include "backend/cuda/gemv_q.cuh"

namespace splash::cuda {

// acc[t] += the 8 weights u · x[t, c .. c + 8) for the nt ≤ NT tokens (x rows of C values): the one fp32 product of
// the few-row GEMV and of the warp-per-row GEMV (cuda_matmul.cu k_gemv_f).
template <int NT>
__device__ __forceinline__ void dot8_tokens(float (&acc)[NT], const float (&u)[8], const float* x, int64_t C, int64_t c,
                                            int32_t nt) {
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= nt) break;
    const float4* xp = reinterpret_cast<const float4*>(x + t * C + c);
    const float4 a = __ldg(xp), b = __ldg(xp + 1);
    acc[t] += u[0] * a.x + u[1] * a.y + u[2] * a.z + u[3] * a.w + u[4] * b.x + u[5] * b.y + u[6] * b.z + u[7] * b.w;
  }
}

// Block `b` of the group (its row of its weight); every thread of the block calls it.
template <int NT, int THREADS, int PRE>
__device__ __forceinline__ void gemv_f_row_block(const GemvGroup& grp, int32_t b, const float* x, int32_t nt,
                                                 const RowGates& gates) {
  __shared__ float red[NT][THREADS / 32];
  splash_weight w;
  float* y;
  int64_t ys;
  const int64_t r = gemv_group_of(grp, b, w, y, ys), C = w.cols;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float v[PRE][8];
#pragma unroll
  for (int k = 0; k < PRE; ++k) {
    const int64_t c = (int64_t(threadIdx.x) + int64_t(k) * THREADS) * 8;
    if (c < C) load8(w, r, c, v[k]);
  }
  pdl_wait();  // the activations come from the kernel before this one
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
#pragma unroll
  for (int k = 0; k < PRE; ++k) {
    const int64_t c = (int64_t(threadIdx.x) + int64_t(k) * THREADS) * 8;
    if (c < C) dot8_tokens<NT>(acc, v[k], x, C, c, nt);
  }
  for (int64_t c = (int64_t(threadIdx.x) + int64_t(PRE) * THREADS) * 8; c < C; c += THREADS * 8) {
    float u[8];
    load8(w, r, c, u);
    dot8_tokens<NT>(acc, u, x, C, c, nt);
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0) red[t][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x < NT && threadIdx.x < nt) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < THREADS / 32; ++k) s += red[threadIdx.x][k];
    if (gates.A_log) {
      if (b < grp.first[1]) {
        s = sigmoidf_(s);
      } else {
        const float u = s + gates.dt_bias[r];
        const float sp = u > 20.f ? u : log1pf(expf(u));
        s = -expf(gates.A_log[r]) * sp;
      }
    }
    y[threadIdx.x * ys + r] = s;
  }
}

}  // namespace splash::cuda
