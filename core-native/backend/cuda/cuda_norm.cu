// Norms on the GPU: RMSNorm, gated RMSNorm (GDN output), and the residual add + the next RMSNorm in one pass
// (≤ 8 rows: a cluster of 8 blocks per row meeting through distributed shared memory). Decode-sized outputs
// also get their int8x2 form for the matmuls that follow (quant_out / produced, cuda_matmul.cu).
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

__global__ void k_rmsnorm(const float* x, const float* w, int32_t dim, float eps, float* y, const float* z, QuantOut qo) {
  pdl_trigger();
  pdl_wait();  // launched with PDL: nothing of the kernel before it is read or written until it is done
  __shared__ float sh[32];
  const float* xi = x + int64_t(blockIdx.x) * dim;
  float* yi = y + int64_t(blockIdx.x) * dim;
  float ss = 0.f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) ss += xi[c] * xi[c];
  ss = block_sum(ss, sh);
  const float inv = 1.f / sqrtf(ss / float(dim) + eps);
  const float* zi = z ? z + int64_t(blockIdx.x) * dim : nullptr;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {  // whole warps when qo is set (dim % 32 == 0)
    const float v = zi ? xi[c] * inv * w[c] * siluf_(zi[c]) : xi[c] * inv * w[c];
    yi[c] = v;
    if (qo.q4) quant_group(v, int64_t(blockIdx.x) * dim + c, qo.q4, qo.q8, qo.xs, qo.total);
  }
}
// h += y, then x = rmsnorm(h)·w: one block per row, h kept in registers between the two passes.
constexpr int kAddNormPer = 16;  // dim ≤ 16 · threads
__global__ void k_add_rmsnorm(float* h, const float* y, const float* w, int32_t dim, float eps, float* x, QuantOut qo) {
  pdl_trigger();
  pdl_wait();
  __shared__ float sh[32];
  float* hi = h + int64_t(blockIdx.x) * dim;
  const float* yi = y + int64_t(blockIdx.x) * dim;
  float v[kAddNormPer];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kAddNormPer; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    v[k] = 0.f;
    if (c < dim) {
      v[k] = hi[c] + yi[c];
      hi[c] = v[k];
      ss += v[k] * v[k];
    }
  }
  ss = block_sum(ss, sh);
  const float inv = 1.f / sqrtf(ss / float(dim) + eps);
  float* xi = x + int64_t(blockIdx.x) * dim;
#pragma unroll
  for (int k = 0; k < kAddNormPer; ++k) {
    const int c = threadIdx.x + k * blockDim.x;
    if (c < dim) {
      const float o = v[k] * inv * w[c];
      xi[c] = o;
      if (qo.q4) quant_group(o, int64_t(blockIdx.x) * dim + c, qo.q4, qo.q8, qo.xs, qo.total);
    }
  }
}
// Few rows (decode): a cluster of 8 blocks per row, each adding and squaring its eighth of the row; the
// sums meet through distributed shared memory, so one row uses 8 multiprocessors instead of one.
constexpr int kNormCluster = 8, kNormClusterThreads = 128, kNormClusterPer = 16;  // dim ≤ 16384
__global__ void __cluster_dims__(kNormCluster, 1, 1) __launch_bounds__(kNormClusterThreads)
    k_add_rmsnorm_cluster(float* h, const float* y, const float* w, int32_t dim, float eps, float* x, QuantOut qo) {
  pdl_trigger();
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float sh[32];
  __shared__ float part;
  const int rank = int(cluster.block_rank());
  const int64_t row = blockIdx.x / kNormCluster;
  // slices of whole 32-value groups
  const int per = (dim + 32 * kNormCluster - 1) / (32 * kNormCluster) * 32, c0 = rank * per, c1 = min(dim, c0 + per);
  float* hi = h + row * dim;
  const float* yi = y + row * dim;
  float v[kNormClusterPer], wk[kNormClusterPer];
#pragma unroll
  for (int k = 0; k < kNormClusterPer; ++k) {  // the norm's weights (never written) while the kernel before finishes
    const int c = c0 + threadIdx.x + k * kNormClusterThreads;
    wk[k] = c < c1 ? w[c] : 0.f;
  }
  pdl_wait();
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kNormClusterPer; ++k) {
    const int c = c0 + threadIdx.x + k * kNormClusterThreads;
    v[k] = 0.f;
    if (c < c1) {
      v[k] = hi[c] + yi[c];
      hi[c] = v[k];
      ss += v[k] * v[k];
    }
  }
  ss = block_sum(ss, sh);
  if (threadIdx.x == 0) part = ss;
  cluster.sync();
  float tot = 0.f;
  for (int r = 0; r < kNormCluster; ++r) tot += *cluster.map_shared_rank(&part, r);
  cluster.sync();  // every block has read the others' sums before any exits
  const float inv = 1.f / sqrtf(tot / float(dim) + eps);
  float* xi = x + row * dim;
#pragma unroll
  for (int k = 0; k < kNormClusterPer; ++k) {
    const int c = c0 + threadIdx.x + k * kNormClusterThreads;
    if (c < c1) {
      const float o = v[k] * inv * wk[k];
      xi[c] = o;
      if (qo.q4) quant_group(o, row * dim + c, qo.q4, qo.q8, qo.xs, qo.total);
    }
  }
}

// Many rows of whole float4s (prefill; no int8x2 form): a warp per row, float4 loads, no block barriers. The
// one-block form above, a block of up to 512 threads per row with two barriers for a few values a thread, took (H100,
// ncu) 42 µs for the residual add + norm of 2048 rows of 2048, 49 µs for 32,768 rows of 256 (attention q norms),
// 81 µs for 65,536 rows of 128 (GDN's gated norm). The sum of squares runs in another order (each lane's values in
// turn, then the warp's tree), so the outputs may differ from the block form's in the last bits; each row's result
// depends on that row alone. kRegs: float4s a lane keeps between the passes (the row's values in registers up to
// 128·kRegs columns; past that the second pass reads them again). Rows of up to 256 columns take kRegs = 2: fewer
// registers, so 40 warps in flight per SM instead of 16 (the values are summed in the same order either way).
constexpr int kWarpNormRows = 8, kWarpNormRegs = 16, kWarpNormRegsFew = 2;
__device__ __forceinline__ float sq4(float4 v) { return v.x * v.x + v.y * v.y + v.z * v.z + v.w * v.w; }
template <bool kAdd, int kRegs>
__global__ void __launch_bounds__(32 * kWarpNormRows, kRegs == kWarpNormRegsFew ? 5 : 2)
    k_norm_warp(float* h, const float* y, const float* w, int32_t rows, int32_t dim, float eps, float* out,
                const float* z) {
  pdl_trigger();
  pdl_wait();
  const int lane = threadIdx.x & 31;
  const int64_t row = int64_t(blockIdx.x) * kWarpNormRows + (threadIdx.x >> 5);
  if (row >= rows) return;
  const int n4 = dim / 4;
  float4* hi = reinterpret_cast<float4*>(h + row * dim);
  const float4* yi = kAdd ? reinterpret_cast<const float4*>(y + row * dim) : nullptr;
  float4 keep[kRegs];
  float ss = 0.f;
#pragma unroll
  for (int k = 0; k < kRegs; ++k) {
    const int c = lane + 32 * k;
    if (c < n4) {
      float4 v = hi[c];
      if (kAdd) {
        const float4 u = yi[c];
        v = make_float4(v.x + u.x, v.y + u.y, v.z + u.z, v.w + u.w);
        hi[c] = v;
      }
      keep[k] = v;
      ss += sq4(v);
    }
  }
  for (int c = lane + 32 * kRegs; c < n4; c += 32) {
    float4 v = hi[c];
    if (kAdd) {
      const float4 u = yi[c];
      v = make_float4(v.x + u.x, v.y + u.y, v.z + u.z, v.w + u.w);
      hi[c] = v;
    }
    ss += sq4(v);
  }
  ss = warp_sum(ss);
  const float inv = 1.f / sqrtf(ss / float(dim) + eps);
  float4* oi = reinterpret_cast<float4*>(out + row * dim);
  const float4* zi = z ? reinterpret_cast<const float4*>(z + row * dim) : nullptr;
  const float4* w4 = reinterpret_cast<const float4*>(w);
  auto put = [&](int c, float4 v) {
    const float4 g = w4[c];
    float4 o = make_float4(v.x * inv * g.x, v.y * inv * g.y, v.z * inv * g.z, v.w * inv * g.w);
    if (zi) {
      const float4 q = zi[c];
      o = make_float4(o.x * siluf_(q.x), o.y * siluf_(q.y), o.z * siluf_(q.z), o.w * siluf_(q.w));
    }
    oi[c] = o;
  };
#pragma unroll
  for (int k = 0; k < kRegs; ++k)
    if (lane + 32 * k < n4) put(lane + 32 * k, keep[k]);
  for (int c = lane + 32 * kRegs; c < n4; c += 32) put(c, hi[c]);
}
// k_norm_warp over n rows, with the register count for their width
template <bool kAdd>
void launch_norm_warp(Ctx* c, float* h, const float* y, const float* w, int32_t n, int32_t dim, float eps, float* out,
                      const float* z) {
  const dim3 grid(unsigned((n + kWarpNormRows - 1) / kWarpNormRows)), block(32 * kWarpNormRows);
  if (dim <= 128 * kWarpNormRegsFew)
    launch_dep(c, true, k_norm_warp<kAdd, kWarpNormRegsFew>, grid, block, 0, h, y, w, n, dim, eps, out, z);
  else
    launch_dep(c, true, k_norm_warp<kAdd, kWarpNormRegs>, grid, block, 0, h, y, w, n, dim, eps, out, z);
}
// whether the warp form takes these rows
bool norm_warp(int32_t n, int32_t dim, const QuantOut& qo, std::initializer_list<const void*> ptrs) {
  if (qo.q4 || n <= 8 || dim % 4) return false;
  for (const void* p : ptrs)
    if (reinterpret_cast<uintptr_t>(p) % 16) return false;
  return true;
}

int norm_threads(int dim) { return dim >= 1024 ? 512 : dim >= 256 ? 256 : dim >= 128 ? 128 : 64; }

}  // namespace

void rmsnorm(void* ctx, const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (n <= 0) return;
  const QuantOut qo = dim % 32 == 0 ? quant_out(c, int64_t(n) * dim) : QuantOut{};  // for the matmuls that follow
  if (norm_warp(n, dim, qo, {x, w, y})) {
    launch_norm_warp<false>(c, const_cast<float*>(x), nullptr, w, n, dim, eps, y, nullptr);
    SPLASH_LAUNCHED(c, "rmsnorm");
    return;
  }
  launch_dep(c, true, k_rmsnorm, dim3(unsigned(n)), dim3(norm_threads(dim)), 0, x, w, dim, eps, y, nullptr, qo);
  if (SPLASH_LAUNCHED(c, "rmsnorm") && qo.q4) produced(c, y, qo.total);
}
void add_rmsnorm(void* ctx, float* h, const float* y, const float* w, int32_t n, int32_t dim, float eps, float* x) {
  if (n <= 0) return;
  Ctx* c = static_cast<Ctx*>(ctx);
  const QuantOut qo = dim % 32 == 0 ? quant_out(c, int64_t(n) * dim) : QuantOut{};  // for the matmuls that follow
  if (n <= 8 && dim <= kNormCluster * kNormClusterThreads * kNormClusterPer) {
    launch_dep(c, true, k_add_rmsnorm_cluster, dim3(unsigned(n) * kNormCluster), dim3(kNormClusterThreads), 0,
               h, y, w, dim, eps, x, qo);
    if (SPLASH_LAUNCHED(c, "add_rmsnorm") && qo.q4) produced(c, x, qo.total);
    return;
  }
  if (norm_warp(n, dim, qo, {h, y, w, x})) {
    launch_norm_warp<true>(c, h, y, w, n, dim, eps, x, nullptr);
    SPLASH_LAUNCHED(c, "add_rmsnorm");
    return;
  }
  if (dim > kAddNormPer * 1024) {  // wider than one block holds in registers: the two passes apart
    add(ctx, h, y, int64_t(n) * dim);
    rmsnorm(ctx, h, w, n, dim, eps, x);
    return;
  }
  const int threads = std::max(norm_threads(dim), std::min(1024, (dim + kAddNormPer - 1) / kAddNormPer + 31) / 32 * 32);
  launch_dep(c, true, k_add_rmsnorm, dim3(unsigned(n)), dim3(threads), 0, h, y, w, dim, eps, x, qo);
  if (SPLASH_LAUNCHED(c, "add_rmsnorm") && qo.q4) produced(c, x, qo.total);
}
void gated_rmsnorm(void* ctx, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (n <= 0) return;
  const QuantOut qo = dim % 32 == 0 ? quant_out(c, int64_t(n) * dim) : QuantOut{};  // for the output projection
  if (norm_warp(n, dim, qo, {x, z, w, y})) {
    launch_norm_warp<false>(c, const_cast<float*>(x), nullptr, w, n, dim, eps, y, z);
    SPLASH_LAUNCHED(c, "gated_rmsnorm");
    return;
  }
  launch_dep(c, true, k_rmsnorm, dim3(unsigned(n)), dim3(norm_threads(dim)), 0, x, w, dim, eps, y, z, qo);
  if (SPLASH_LAUNCHED(c, "gated_rmsnorm") && qo.q4) produced(c, y, qo.total);
}

}  // namespace splash::cuda
