// Shared pieces of the CUDA backend: the context (one device, one stream, growable scratch buffers,
// the first error seen) and small device helpers.
#pragma once
#include <cuda_runtime.h>
#include <stdint.h>

#include <string>

#include "splash/backend.h"

namespace splash::cuda {

enum Scratch { kXq, kXs, kXbf, kWbf, kAttn, kTok, kMoeIdx, kMoeX, kMoeG, kMoeU, kMoeY, kMoeR, kWf, kGdn, kNumScratch };

struct Ctx {
  int device = 0;
  int sms = 0;
  cudaStream_t stream = nullptr;
  std::string error;  // first failure (sticky until read)
  void* scratch[kNumScratch] = {};
  size_t scratch_cap[kNumScratch] = {};
  // cuBLAS, when libcublas loads (prefill GEMMs); null otherwise
  void* cublas_lib = nullptr;
  void* cublas = nullptr;
  int (*gemm_ex)(void*, int, int, int, int, int, const void*, const void*, int, int, const void*, int, int, const void*,
                 void*, int, int, int, int) = nullptr;
  bool use_cublas = true;
  bool precise = false;
  int gemv_rows = 2;    // rows per warp of the int8x2 GEMV ($SPLASH_GEMV_ROWS)
  int gemv_unroll = 2;  // column-loop unroll of the one-token GEMV ($SPLASH_GEMV_UNROLL)  // fp32 activations in every matmul (no int8 levels, no bf16 GEMM): parity checks
};

// Records the first CUDA failure; later slots keep running but the model reads the error after the step.
inline bool check(Ctx* c, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  if (c->error.empty()) c->error = std::string(what) + ": " + cudaGetErrorString(e);
  return false;
}
#define SPLASH_CK(c, call) ::splash::cuda::check((c), (call), #call)
#define SPLASH_LAUNCHED(c, name) ::splash::cuda::check((c), cudaGetLastError(), name)

void* scratch(Ctx* c, Scratch s, size_t bytes);

__device__ __forceinline__ float bf16f(uint16_t v) { return __uint_as_float(uint32_t(v) << 16); }
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float siluf_(float x) { return x / (1.f + expf(-x)); }

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
// Sum over a block of up to 1024 threads (all threads get the result); `sh` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* sh) {
  const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) sh[w] = v;
  __syncthreads();
  float t = lane < nw ? sh[lane] : 0.f;
  return warp_sum(t);
}

inline unsigned blocks_for(int64_t n, int per) { return unsigned((n + per - 1) / per); }

// Entry points of the other translation units.
void matmul(void* ctx, const splash_weight* w, const float* x, int32_t n, float* y, int64_t ys);
// Stacked-expert GEMV (q4/q8, ≤ 1 token per pair): pair p multiplies activation row p / xdiv (of nx rows)
// by expert eidx[p] (device) into y row p. False when the weight is not eligible (the caller falls back).
bool matmul_experts(Ctx* c, const splash_weight* base, const float* x, int32_t nx, const int32_t* eidx, int32_t pairs,
                    int32_t xdiv, float* y, int64_t ys);
void attention(void* ctx, const splash_attn_args* a);
void conv1d_silu(void* ctx, const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y);
void gdn_recurrent(void* ctx, const splash_gdn_args* a);
void moe(void* ctx, const splash_moe_args* a);
void swiglu(void* ctx, const float* g, const float* u, int64_t n, float* out);
// the vision encoder's slots (cuda_vision.cu)
void layer_norm(void* ctx, const float* x, const float* w, const float* b, int32_t n, int32_t dim, float eps, float* y);
void add_bias(void* ctx, float* y, const float* b, int32_t n, int32_t dim);
void gelu(void* ctx, float* x, int64_t n, int32_t tanh_approx);
void rope_table(void* ctx, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, const float* cos,
                const float* sin);
void seg_attention(void* ctx, const splash_seg_attn_args* a);
void cublas_open(Ctx* c);
void cublas_close(Ctx* c);

}  // namespace splash::cuda
