// The vision encoder's ops on the device: LayerNorm with bias, bias add, GELU, the rotary from
// per-token tables and bidirectional attention inside segments (frames). The attention is tiled: a block holds
// 32 queries of one head (4 threads per query, each with a quarter of the head dims in registers), loads the
// keys and values of its segment 32 rows at a time into shared memory and keeps an online softmax.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

Ctx* C(void* p) { return static_cast<Ctx*>(p); }

__global__ void k_layer_norm(const float* x, const float* w, const float* b, int32_t dim, float eps, float* y) {
  __shared__ float sh[32];
  const float* xi = x + int64_t(blockIdx.x) * dim;
  float* yi = y + int64_t(blockIdx.x) * dim;
  float s = 0.f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) s += xi[c];
  const float mean = block_sum(s, sh) / float(dim);
  float v = 0.f;
  for (int c = threadIdx.x; c < dim; c += blockDim.x) v += (xi[c] - mean) * (xi[c] - mean);
  const float inv = 1.f / sqrtf(block_sum(v, sh) / float(dim) + eps);
  for (int c = threadIdx.x; c < dim; c += blockDim.x) yi[c] = (xi[c] - mean) * inv * w[c] + b[c];
}

__global__ void k_add_bias(float* y, const float* b, int64_t n, int32_t dim) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] += b[i % dim];
}

__global__ void k_gelu(float* x, int64_t n, int32_t tanh_approx) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float v = x[i];
    x[i] = tanh_approx ? 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)))
                       : 0.5f * v * (1.f + erff(v * 0.7071067811865476f));
  }
}

__global__ void k_rope_table(float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, const float* cos,
                             const float* sin) {
  const int32_t half = hd / 2;
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(nt) * nh * half) return;
  const int64_t t = i / (int64_t(nh) * half);
  const int32_t rem = int32_t(i % (int64_t(nh) * half)), h = rem / half, j = rem % half;
  float* v = x + t * rs + h * hs;
  const float* cr = cos + t * hd;
  const float* sr = sin + t * hd;
  const float a = v[j], b = v[j + half];
  v[j] = a * cr[j] - b * sr[j];
  v[j + half] = b * cr[j + half] + a * sr[j + half];
}

constexpr int kQ = 32, kKT = 32, kTPQ = 4, kMaxHd = 128;  // queries per block, keys per tile, threads per query

template <int D>  // head dims per thread (head_dim ≤ kTPQ·D)
__global__ void __launch_bounds__(kQ* kTPQ) k_seg_attn(splash_seg_attn_args a, int32_t qblocks) {
  __shared__ float ks[kKT][kMaxHd], vs[kKT][kMaxHd];
  const int hd = a.head_dim, h = blockIdx.y, u = threadIdx.x % kTPQ;
  const int32_t seg = blockIdx.x / qblocks, qb = blockIdx.x % qblocks;
  const int32_t s0 = seg * a.segment, s1 = min(a.n_tokens, s0 + a.segment);
  const int32_t qi = s0 + qb * kQ + int32_t(threadIdx.x) / kTPQ;
  const bool valid = qi < s1;
  float q[D], acc[D];
#pragma unroll
  for (int i = 0; i < D; ++i) {
    const int d = u + kTPQ * i;
    q[i] = valid && d < hd ? a.q[int64_t(qi) * a.stride + int64_t(h) * hd + d] : 0.f;
    acc[i] = 0.f;
  }
  float m = -INFINITY, l = 0.f;
  for (int32_t j0 = s0; j0 < s1; j0 += kKT) {
    const int kt = min(kKT, s1 - j0);
    __syncthreads();
    for (int idx = threadIdx.x; idx < kt * hd; idx += blockDim.x) {
      const int r = idx / hd, d = idx % hd;
      const int64_t off = int64_t(j0 + r) * a.stride + int64_t(h) * hd + d;
      ks[r][d] = a.k[off];
      vs[r][d] = a.v[off];
    }
    __syncthreads();
    float s[kKT];
    float mt = -INFINITY;
#pragma unroll
    for (int r = 0; r < kKT; ++r) {
      float p = 0.f;
      if (r < kt) {
#pragma unroll
        for (int i = 0; i < D; ++i) {
          const int d = u + kTPQ * i;
          if (d < hd) p += q[i] * ks[r][d];
        }
      }
      p += __shfl_xor_sync(0xffffffffu, p, 1);
      p += __shfl_xor_sync(0xffffffffu, p, 2);
      s[r] = r < kt ? p * a.scale : -INFINITY;
      mt = fmaxf(mt, s[r]);
    }
    const float mn = fmaxf(m, mt), corr = expf(m - mn);
    l *= corr;
#pragma unroll
    for (int i = 0; i < D; ++i) acc[i] *= corr;
#pragma unroll
    for (int r = 0; r < kKT; ++r) {
      if (r >= kt) break;
      const float e = expf(s[r] - mn);
      l += e;
#pragma unroll
      for (int i = 0; i < D; ++i) {
        const int d = u + kTPQ * i;
        if (d < hd) acc[i] += e * vs[r][d];
      }
    }
    m = mn;
  }
  if (!valid) return;
  float* o = a.out + int64_t(qi) * a.n_heads * hd + int64_t(h) * hd;
#pragma unroll
  for (int i = 0; i < D; ++i) {
    const int d = u + kTPQ * i;
    if (d < hd) o[d] = acc[i] / l;
  }
}

}  // namespace

void layer_norm(void* ctx, const float* x, const float* w, const float* b, int32_t n, int32_t dim, float eps, float* y) {
  if (n <= 0) return;
  const int threads = dim >= 1024 ? 512 : dim >= 256 ? 256 : dim >= 128 ? 128 : 64;
  k_layer_norm<<<n, threads, 0, strm(C(ctx))>>>(x, w, b, dim, eps, y);
  SPLASH_LAUNCHED(C(ctx), "layer_norm");
}

void add_bias(void* ctx, float* y, const float* b, int32_t n, int32_t dim) {
  const int64_t m = int64_t(n) * dim;
  if (m <= 0) return;
  k_add_bias<<<std::min<unsigned>(blocks_for(m, 256), 8192), 256, 0, strm(C(ctx))>>>(y, b, m, dim);
  SPLASH_LAUNCHED(C(ctx), "add_bias");
}

void gelu(void* ctx, float* x, int64_t n, int32_t tanh_approx) {
  if (n <= 0) return;
  k_gelu<<<std::min<unsigned>(blocks_for(n, 256), 8192), 256, 0, strm(C(ctx))>>>(x, n, tanh_approx);
  SPLASH_LAUNCHED(C(ctx), "gelu");
}

void rope_table(void* ctx, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, const float* cos,
                const float* sin) {
  const int64_t n = int64_t(nt) * nh * (hd / 2);
  if (n <= 0) return;
  k_rope_table<<<blocks_for(n, 256), 256, 0, strm(C(ctx))>>>(x, nt, rs, nh, hs, hd, cos, sin);
  SPLASH_LAUNCHED(C(ctx), "rope_table");
}

void seg_attention(void* ctx, const splash_seg_attn_args* a) {
  Ctx* c = C(ctx);
  if (a->n_tokens <= 0) return;
  if (a->head_dim > kMaxHd || a->segment <= 0) {
    if (c->error.empty()) c->error = "seg_attention: head_dim > 128 or an empty segment is not supported by the CUDA backend";
    return;
  }
  const int32_t qblocks = (std::min(a->segment, a->n_tokens) + kQ - 1) / kQ;
  const int32_t segs = (a->n_tokens + a->segment - 1) / a->segment;
  const dim3 grid(unsigned(segs * qblocks), unsigned(a->n_heads));
  const int hd = a->head_dim;
  if (hd <= 32) k_seg_attn<8><<<grid, kQ * kTPQ, 0, strm(c)>>>(*a, qblocks);
  else if (hd <= 64) k_seg_attn<16><<<grid, kQ * kTPQ, 0, strm(c)>>>(*a, qblocks);
  else if (hd <= 96) k_seg_attn<24><<<grid, kQ * kTPQ, 0, strm(c)>>>(*a, qblocks);
  else k_seg_attn<32><<<grid, kQ * kTPQ, 0, strm(c)>>>(*a, qblocks);
  SPLASH_LAUNCHED(c, "seg_attention");
}

}  // namespace splash::cuda
