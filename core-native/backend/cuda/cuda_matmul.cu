// Linear layers on the GPU. Decode (≤ 8 tokens): memory-bound GEMVs; q4/q8 weights meet activations
// quantised to two int8 levels per 32 values (level 2 holds the residual at 1/256 of the step, so the
// product is within ~1e-5 of fp32) through dp4a; bf16/f32 and the EXACT matrices use fp32 activations.
// Prefill (> 8 tokens): weights dequantised to bf16 and multiplied on the tensor cores (cuBLAS when
// libcublas loads, else the WMMA kernel below), fp32 accumulation.
#include <dlfcn.h>
#include <mma.h>

#include <algorithm>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

constexpr int kMaxGemvTokens = 8;

// ---- activation quantisation: per 32 values, scale = amax/127, level 1 and the residual level 2;
// q4 layout interleaves each 8 values as [0,2,4,6,1,3,5,7] to meet the even/odd nibbles of a word.
template <bool Q4>
__global__ void k_quant_x(const float* x, int64_t C, int32_t n, int8_t* xq, float* xs, float* xsum) {
  const int64_t groups = C / 32;
  const int64_t gid = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (gid >= groups * n) return;
  const int64_t t = gid / groups, g = gid % groups;
  const float v = x[t * C + g * 32 + lane];
  const float amax = warp_max(fabsf(v));
  const float sum = warp_sum(v);
  const float sc = amax / 127.f, inv = amax > 0.f ? 127.f / amax : 0.f;
  const int q1 = max(-127, min(127, int(rintf(v * inv))));
  const float sc2 = sc / 256.f, inv2 = sc2 > 0.f ? 1.f / sc2 : 0.f;
  const int q2 = max(-127, min(127, int(rintf((v - sc * float(q1)) * inv2))));
  int pos = lane;
  if (Q4) {
    const int j = lane & 7;
    pos = (lane & ~7) | ((j & 1) ? 4 + (j >> 1) : (j >> 1));
  }
  int8_t* o1 = xq + t * C * 2 + g * 32;
  o1[pos] = int8_t(q1);
  o1[C + pos] = int8_t(q2);
  if (lane == 0) {
    xs[t * groups + g] = sc;
    xsum[t * groups + g] = sum;
  }
}

__device__ __forceinline__ int dp4a_us(uint32_t a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// Warp per ROWS rows; lane handles 32 columns (one activation group) per iteration.
// With `eidx` (stacked experts): blockIdx.y = pair p uses expert eidx[p], activation row p / xdiv, output
// row p (one token per pair).
template <int BITS, int NT, int ROWS, int UNROLL = 2>
__global__ void __launch_bounds__(128) k_gemv_q(splash_weight w, const int8_t* xq, const float* xs, const float* xsum,
                                                int32_t nt, float* y, int64_t ys, const int32_t* eidx, int32_t xdiv) {
  const int lane = threadIdx.x & 31;
  const int64_t r0 = (int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32) * ROWS;
  const int64_t R = w.rows, C = w.cols, nch = C / 32, G = C / 64;
  if (r0 >= R) return;
  if (eidx) {
    const int32_t p = blockIdx.y, e = eidx[p];
    w.data = static_cast<const uint8_t*>(w.data) + int64_t(e) * R * (C * BITS / 8);
    w.scales += int64_t(e) * R * G;
    w.biases += int64_t(e) * R * G;
    const int64_t xr = p / xdiv;
    xq += xr * C * 2;
    xs += xr * nch;
    xsum += xr * nch;
    y += int64_t(p) * ys;
  }
  float acc[ROWS][NT];
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[i][t] = 0.f;
  const uint8_t* base = static_cast<const uint8_t*>(w.data);
  const int64_t row_bytes = C * BITS / 8;
#pragma unroll UNROLL
  for (int64_t ch = lane; ch < nch; ch += 32) {
    uint4 wv[ROWS][BITS / 4];
    float s[ROWS], b[ROWS];
#pragma unroll
    for (int i = 0; i < ROWS; ++i) {
      const int64_t r = min(r0 + i, R - 1);
      const uint4* p = reinterpret_cast<const uint4*>(base + r * row_bytes + ch * (32 * BITS / 8));
#pragma unroll
      for (int k = 0; k < BITS / 4; ++k) wv[i][k] = __ldg(p + k);
      s[i] = bf16f(w.scales[r * G + ch / 2]);
      b[i] = bf16f(w.biases[r * G + ch / 2]);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= nt) break;
      const int4* xp = reinterpret_cast<const int4*>(xq + t * C * 2 + ch * 32);
      const int4 a0 = __ldg(xp), a1 = __ldg(xp + 1);
      const int4 c0 = __ldg(reinterpret_cast<const int4*>(reinterpret_cast<const int8_t*>(xp) + C)),
                 c1 = __ldg(reinterpret_cast<const int4*>(reinterpret_cast<const int8_t*>(xp) + C) + 1);
      const int x1[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const int x2[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
      const float sx = xs[t * nch + ch] * (1.f / 256.f), sumx = xsum[t * nch + ch];
#pragma unroll
      for (int i = 0; i < ROWS; ++i) {
        int d1 = 0, d2 = 0;
        const uint32_t* ww = reinterpret_cast<const uint32_t*>(&wv[i][0]);
        if (BITS == 4) {
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            const int lo = int(ww[k] & 0x0F0F0F0Fu), hi = int((ww[k] >> 4) & 0x0F0F0F0Fu);
            d1 = __dp4a(lo, x1[2 * k], d1);
            d1 = __dp4a(hi, x1[2 * k + 1], d1);
            d2 = __dp4a(lo, x2[2 * k], d2);
            d2 = __dp4a(hi, x2[2 * k + 1], d2);
          }
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k) {
            d1 = dp4a_us(ww[k], x1[k], d1);
            d2 = dp4a_us(ww[k], x2[k], d2);
          }
        }
        acc[i][t] += s[i] * sx * float(256 * d1 + d2) + b[i] * sumx;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < ROWS; ++i)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= nt) break;
      const float v = warp_sum(acc[i][t]);
      if (lane == 0 && r0 + i < R) y[t * ys + r0 + i] = v;
    }
}

// 8 consecutive weights of row r from column c (c % 8 == 0), any dtype, as fp32.
__device__ __forceinline__ void load8(const splash_weight& w, int64_t r, int64_t c, float v[8]) {
  const int64_t C = w.cols;
  if (w.dtype == SPLASH_F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w.data) + r * C + c);
    const float4 a = __ldg(p), b = __ldg(p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
  } else if (w.dtype == SPLASH_BF16) {
    const uint4 a = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.data) + r * C + c));
    const uint32_t u[4] = {a.x, a.y, a.z, a.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) v[2 * k] = __uint_as_float(u[k] << 16), v[2 * k + 1] = __uint_as_float(u[k] & 0xFFFF0000u);
  } else {
    const int64_t g = r * (C / 64) + c / 64;
    const float s = bf16f(w.scales[g]), b = bf16f(w.biases[g]);
    if (w.dtype == SPLASH_Q4) {
      const uint32_t q = __ldg(static_cast<const uint32_t*>(w.data) + r * (C / 8) + c / 8);
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = s * float((q >> (4 * k)) & 15u) + b;
    } else {
      const uint2 q = __ldg(reinterpret_cast<const uint2*>(static_cast<const uint32_t*>(w.data) + r * (C / 4) + c / 4));
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = s * float((q.x >> (8 * k)) & 255u) + b, v[4 + k] = s * float((q.y >> (8 * k)) & 255u) + b;
    }
  }
}

// fp32 activations, any dtype (cols % 8 == 0): warp per row, up to 8 tokens.
template <int NT>
__global__ void __launch_bounds__(128) k_gemv_f(splash_weight w, const float* x, int32_t nt, float* y, int64_t ys) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= w.rows) return;
  const int64_t C = w.cols;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
  for (int64_t c = int64_t(lane) * 8; c < C; c += 256) {
    float v[8];
    load8(w, r, c, v);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= nt) break;
      const float4* xp = reinterpret_cast<const float4*>(x + t * C + c);
      const float4 a = __ldg(xp), b = __ldg(xp + 1);
      acc[t] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= nt) break;
    const float s = warp_sum(acc[t]);
    if (lane == 0) y[t * ys + r] = s;
  }
}

// Few rows (GDN b/a, routers, gates): block per row, the columns split over the block.
template <int NT>
__global__ void __launch_bounds__(128) k_gemv_f_row(splash_weight w, const float* x, int32_t nt, float* y, int64_t ys) {
  __shared__ float red[NT][4];
  const int64_t r = blockIdx.x, C = w.cols;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
  for (int64_t c = int64_t(threadIdx.x) * 8; c < C; c += 1024) {
    float v[8];
    load8(w, r, c, v);
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= nt) break;
      const float4* xp = reinterpret_cast<const float4*>(x + t * C + c);
      const float4 a = __ldg(xp), b = __ldg(xp + 1);
      acc[t] += v[0] * a.x + v[1] * a.y + v[2] * a.z + v[3] * a.w + v[4] * b.x + v[5] * b.y + v[6] * b.z + v[7] * b.w;
    }
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    const float s = warp_sum(acc[t]);
    if (lane == 0) red[t][warp] = s;
  }
  __syncthreads();
  if (threadIdx.x < NT && threadIdx.x < nt)
    y[threadIdx.x * ys + r] = red[threadIdx.x][0] + red[threadIdx.x][1] + red[threadIdx.x][2] + red[threadIdx.x][3];
}

__global__ void k_to_f32_w(splash_weight w, float* out) {
  const int64_t n8 = w.rows * w.cols / 8;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (w.cols / 8), c = (i % (w.cols / 8)) * 8;
    float v[8];
    load8(w, r, c, v);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[r * w.cols + c + k] = v[k];
  }
}

// Any shape (f32/bf16 with cols % 8 != 0): thread per output.
__global__ void k_gemv_scalar(splash_weight w, const float* x, int32_t nt, float* y, int64_t ys) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= w.rows * nt) return;
  const int64_t t = i / w.rows, r = i % w.rows, C = w.cols;
  float s = 0.f;
  for (int64_t c = 0; c < C; ++c) {
    const float wv = w.dtype == SPLASH_F32 ? static_cast<const float*>(w.data)[r * C + c]
                                           : bf16f(static_cast<const uint16_t*>(w.data)[r * C + c]);
    s += wv * x[t * C + c];
  }
  y[t * ys + r] = s;
}

// ---- prefill: bf16 operands on the tensor cores

__global__ void k_to_bf16_w(splash_weight w, __nv_bfloat16* out) {
  const int64_t n8 = w.rows * w.cols / 8;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n8; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / (w.cols / 8), c = (i % (w.cols / 8)) * 8;
    float v[8];
    load8(w, r, c, v);
    __align__(16) __nv_bfloat16 o[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) o[k] = __float2bfloat16(v[k]);
    *reinterpret_cast<uint4*>(out + r * w.cols + c) = *reinterpret_cast<const uint4*>(o);
  }
}

__global__ void k_to_bf16_x(const float* x, int64_t n, __nv_bfloat16* out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(x[i]);
}

// WMMA GEMM (when cuBLAS is absent): y[t, r] = Σ_k A[t, k]·B[r, k]; 64×64 tile, 4 warps of 32×32.
constexpr int BM = 64, BN = 64, BK = 32, LDS = BK + 8;
__global__ void __launch_bounds__(128) k_gemm_wmma(const __nv_bfloat16* A, const __nv_bfloat16* B, int M, int N, int K,
                                                   float* y, int64_t ys) {
  using namespace nvcuda;
  __shared__ __align__(32) __nv_bfloat16 sa[BM * LDS];
  __shared__ __align__(32) __nv_bfloat16 sb[BN * LDS];
  __shared__ __align__(32) float sc[4][16 * 16];
  const int warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);
  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int i = threadIdx.x; i < BM * BK / 8; i += blockDim.x) {
      const int row = i / (BK / 8), col = (i % (BK / 8)) * 8;
      uint4 va = make_uint4(0, 0, 0, 0), vb = make_uint4(0, 0, 0, 0);
      if (m0 + row < M && k0 + col < K) va = *reinterpret_cast<const uint4*>(A + int64_t(m0 + row) * K + k0 + col);
      if (n0 + row < N && k0 + col < K) vb = *reinterpret_cast<const uint4*>(B + int64_t(n0 + row) * K + k0 + col);
      *reinterpret_cast<uint4*>(&sa[row * LDS + col]) = va;
      *reinterpret_cast<uint4*>(&sb[row * LDS + col]) = vb;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[2];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &sa[(wm * 32 + i * 16) * LDS + kk], LDS);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &sb[(wn * 32 + j * 16) * LDS + kk], LDS);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(sc[warp], acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = lane; e < 256; e += 32) {
        const int m = m0 + wm * 32 + i * 16 + e / 16, n = n0 + wn * 32 + j * 16 + e % 16;
        if (m < M && n < N) y[int64_t(m) * ys + n] = sc[warp][e];
      }
      __syncwarp();
    }
}

template <int NT>
void launch_gemv_f(Ctx* c, const splash_weight& w, const float* x, int32_t nt, float* y, int64_t ys) {
  if (w.rows < 4 * c->sms) k_gemv_f_row<NT><<<unsigned(w.rows), 128, 0, c->stream>>>(w, x, nt, y, ys);
  else k_gemv_f<NT><<<blocks_for(w.rows, 4), 128, 0, c->stream>>>(w, x, nt, y, ys);
}

template <int BITS, int NT, int ROWS>
void launch_rows(Ctx* c, const splash_weight& w, const int8_t* xq, const float* xs, const float* xsum, int32_t nt,
                 float* y, int64_t ys, const int32_t* eidx, int32_t pairs, int32_t xdiv) {
  dim3 grid(blocks_for(w.rows, 4 * ROWS), unsigned(eidx ? pairs : 1));
  if (NT == 1 && c->gemv_unroll == 4)  // deeper unroll (more loads in flight), single token only: measured variant
    k_gemv_q<BITS, NT, ROWS, 4><<<grid, 128, 0, c->stream>>>(w, xq, xs, xsum, nt, y, ys, eidx, xdiv);
  else
    k_gemv_q<BITS, NT, ROWS><<<grid, 128, 0, c->stream>>>(w, xq, xs, xsum, nt, y, ys, eidx, xdiv);
}

template <int BITS, int NT>
void launch_gemv_q(Ctx* c, const splash_weight& w, const int8_t* xq, const float* xs, const float* xsum, int32_t nt,
                   float* y, int64_t ys, const int32_t* eidx = nullptr, int32_t pairs = 0, int32_t xdiv = 1) {
  switch (c->gemv_rows) {  // rows per warp ($SPLASH_GEMV_ROWS, for measurement); default 2
    case 1: launch_rows<BITS, NT, 1>(c, w, xq, xs, xsum, nt, y, ys, eidx, pairs, xdiv); break;
    case 4: launch_rows<BITS, NT, 4>(c, w, xq, xs, xsum, nt, y, ys, eidx, pairs, xdiv); break;
    default: launch_rows<BITS, NT, 2>(c, w, xq, xs, xsum, nt, y, ys, eidx, pairs, xdiv);
  }
}

// Activations [n, C] → two int8 levels (layout for the weight's bit width) in scratch.
bool quantize_x(Ctx* c, int bits, const float* x, int64_t C, int32_t n, int8_t*& xq, float*& xs, float*& xsum) {
  const int64_t groups = C / 32;
  xq = static_cast<int8_t*>(scratch(c, kXq, size_t(n) * C * 2));
  xs = static_cast<float*>(scratch(c, kXs, size_t(n) * groups * 2 * 4));
  if (!xq || !xs) return false;
  xsum = xs + n * groups;
  const int64_t threads = groups * n * 32;
  if (bits == 4) k_quant_x<true><<<blocks_for(threads, 256), 256, 0, c->stream>>>(x, C, n, xq, xs, xsum);
  else k_quant_x<false><<<blocks_for(threads, 256), 256, 0, c->stream>>>(x, C, n, xq, xs, xsum);
  return SPLASH_LAUNCHED(c, "quant_x");
}

void gemv(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  const bool quant = w->dtype == SPLASH_Q4 || w->dtype == SPLASH_Q8;
  if (quant && !(w->flags & SPLASH_WEIGHT_EXACT) && w->cols % 64 == 0 && !c->precise) {
    int8_t* xq;
    float *xs, *xsum;
    if (!quantize_x(c, w->dtype == SPLASH_Q4 ? 4 : 8, x, w->cols, nt, xq, xs, xsum)) return;
    const bool q4 = w->dtype == SPLASH_Q4;
    switch (nt) {
      case 1: q4 ? launch_gemv_q<4, 1>(c, *w, xq, xs, xsum, nt, y, ys) : launch_gemv_q<8, 1>(c, *w, xq, xs, xsum, nt, y, ys); break;
      case 2: q4 ? launch_gemv_q<4, 2>(c, *w, xq, xs, xsum, nt, y, ys) : launch_gemv_q<8, 2>(c, *w, xq, xs, xsum, nt, y, ys); break;
      case 3: case 4: q4 ? launch_gemv_q<4, 4>(c, *w, xq, xs, xsum, nt, y, ys) : launch_gemv_q<8, 4>(c, *w, xq, xs, xsum, nt, y, ys); break;
      default: q4 ? launch_gemv_q<4, 8>(c, *w, xq, xs, xsum, nt, y, ys) : launch_gemv_q<8, 8>(c, *w, xq, xs, xsum, nt, y, ys);
    }
    SPLASH_LAUNCHED(c, "gemv_q");
    return;
  }
  if (w->cols % 8 == 0) {
    switch (nt) {
      case 1: launch_gemv_f<1>(c, *w, x, nt, y, ys); break;
      case 2: launch_gemv_f<2>(c, *w, x, nt, y, ys); break;
      case 3: case 4: launch_gemv_f<4>(c, *w, x, nt, y, ys); break;
      default: launch_gemv_f<8>(c, *w, x, nt, y, ys);
    }
  } else {
    k_gemv_scalar<<<blocks_for(w->rows * nt, 128), 128, 0, c->stream>>>(*w, x, nt, y, ys);
  }
  SPLASH_LAUNCHED(c, "gemv_f");
}

void gemm(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  const int64_t R = w->rows, K = w->cols;
  const __nv_bfloat16* B;
  if (w->dtype == SPLASH_BF16) {
    B = static_cast<const __nv_bfloat16*>(w->data);
  } else {
    auto* wb = static_cast<__nv_bfloat16*>(scratch(c, kWbf, size_t(R) * K * 2));
    if (!wb) return;
    k_to_bf16_w<<<std::min<unsigned>(blocks_for(R * K / 8, 256), unsigned(c->sms) * 16), 256, 0, c->stream>>>(*w, wb);
    SPLASH_LAUNCHED(c, "to_bf16_w");
    B = wb;
  }
  auto* xb = static_cast<__nv_bfloat16*>(scratch(c, kXbf, size_t(nt) * K * 2));
  if (!xb) return;
  k_to_bf16_x<<<std::min<unsigned>(blocks_for(int64_t(nt) * K, 256), unsigned(c->sms) * 16), 256, 0, c->stream>>>(
      x, int64_t(nt) * K, xb);
  SPLASH_LAUNCHED(c, "to_bf16_x");
  if (c->gemm_ex && c->use_cublas) {
    const float one = 1.f, zero = 0.f;
    // column-major view: C[R×nt] (ld ys) = op(B)ᵀ… W is K×R column-major (ld K), transposed; x is K×nt (ld K)
    const int st = c->gemm_ex(c->cublas, /*T*/ 1, /*N*/ 0, int(R), int(nt), int(K), &one, B, /*bf16*/ 14, int(K), xb, 14,
                              int(K), &zero, y, /*f32*/ 0, int(ys), /*COMPUTE_32F*/ 68, /*DEFAULT*/ -1);
    if (st != 0 && c->error.empty()) c->error = "cublasGemmEx failed with status " + std::to_string(st);
    return;
  }
  dim3 grid(blocks_for(R, BN), blocks_for(nt, BM));
  k_gemm_wmma<<<grid, 128, 0, c->stream>>>(xb, B, nt, int(R), int(K), y, ys);
  SPLASH_LAUNCHED(c, "gemm_wmma");
}

// fp32 GEMM through cuBLAS (exact weights, f32 weights and precise mode with many tokens); false without it.
bool sgemm(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  if (!c->gemm_ex || !c->use_cublas || w->cols % 8 != 0) return false;
  const int64_t R = w->rows, K = w->cols;
  const float* B = static_cast<const float*>(w->data);
  if (w->dtype != SPLASH_F32) {
    auto* wf = static_cast<float*>(scratch(c, kWf, size_t(R) * K * 4));
    if (!wf) return true;
    k_to_f32_w<<<std::min<unsigned>(blocks_for(R * K / 8, 256), unsigned(c->sms) * 16), 256, 0, c->stream>>>(*w, wf);
    SPLASH_LAUNCHED(c, "to_f32_w");
    B = wf;
  }
  const float one = 1.f, zero = 0.f;
  const int st = c->gemm_ex(c->cublas, 1, 0, int(R), int(nt), int(K), &one, B, /*f32*/ 0, int(K), x, 0, int(K), &zero, y, 0,
                            int(ys), /*COMPUTE_32F, no TF32*/ 68, -1);
  if (st != 0 && c->error.empty()) c->error = "cublasGemmEx (fp32) failed with status " + std::to_string(st);
  return true;
}

}  // namespace

bool matmul_experts(Ctx* c, const splash_weight* base, const float* x, int32_t nx, const int32_t* eidx, int32_t pairs,
                    int32_t xdiv, float* y, int64_t ys) {
  const bool quant = base->dtype == SPLASH_Q4 || base->dtype == SPLASH_Q8;
  if (!quant || base->cols % 64 != 0 || c->precise) return false;
  int8_t* xq;
  float *xs, *xsum;
  const int bits = base->dtype == SPLASH_Q4 ? 4 : 8;
  if (!quantize_x(c, bits, x, base->cols, nx, xq, xs, xsum)) return true;
  if (bits == 4) launch_gemv_q<4, 1>(c, *base, xq, xs, xsum, 1, y, ys, eidx, pairs, xdiv);
  else launch_gemv_q<8, 1>(c, *base, xq, xs, xsum, 1, y, ys, eidx, pairs, xdiv);
  SPLASH_LAUNCHED(c, "gemv_experts");
  return true;
}

void matmul(void* ctx, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (nt <= 0 || w->rows <= 0) return;
  const bool tensor = nt > kMaxGemvTokens && w->cols % 8 == 0 && w->dtype != SPLASH_F32 &&
                      !(w->flags & SPLASH_WEIGHT_EXACT) && !c->precise;
  if (tensor) {
    gemm(c, w, x, nt, y, ys);
    return;
  }
  if (nt > kMaxGemvTokens && sgemm(c, w, x, nt, y, ys)) return;
  for (int32_t t0 = 0; t0 < nt; t0 += kMaxGemvTokens)
    gemv(c, w, x + int64_t(t0) * w->cols, std::min(kMaxGemvTokens, nt - t0), y + int64_t(t0) * ys, ys);
}

// libcublas through dlopen: the module keeps no link-time dependency on it.
void cublas_open(Ctx* c) {
  if (const char* e = getenv("SPLASH_CUBLAS"); e && e[0] == '0') return;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    c->cublas_lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (c->cublas_lib) break;
  }
  if (!c->cublas_lib) return;
  using create_fn = int (*)(void**);
  using stream_fn = int (*)(void*, cudaStream_t);
  auto create = reinterpret_cast<create_fn>(dlsym(c->cublas_lib, "cublasCreate_v2"));
  auto set_stream = reinterpret_cast<stream_fn>(dlsym(c->cublas_lib, "cublasSetStream_v2"));
  auto gemm = dlsym(c->cublas_lib, "cublasGemmEx");
  if (!create || !set_stream || !gemm || create(&c->cublas) != 0 || set_stream(c->cublas, c->stream) != 0) {
    dlclose(c->cublas_lib);
    c->cublas_lib = nullptr;
    c->cublas = nullptr;
    return;
  }
  c->gemm_ex = reinterpret_cast<decltype(c->gemm_ex)>(gemm);
}

void cublas_close(Ctx* c) {
  if (!c->cublas_lib) return;
  using destroy_fn = int (*)(void*);
  if (auto destroy = reinterpret_cast<destroy_fn>(dlsym(c->cublas_lib, "cublasDestroy_v2"))) destroy(c->cublas);
  dlclose(c->cublas_lib);
  c->cublas_lib = nullptr;
}

}  // namespace splash::cuda
