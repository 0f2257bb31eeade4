// Gated DeltaNet on the GPU: the causal depthwise conv (+ SiLU) with its rolling state (every (token,
// channel) output in parallel, then the state), and the recurrence over T tokens. State columns are
// independent given the token's k̂, q̂: a prep kernel normalises q and k of every token once; then one warp
// per (head, 32 columns) keeps its [dk × 32] slice of S in registers for the whole call (no block
// barriers), per token one read pass (u = Sᵀk̂, w = Sᵀq̂) and one update, as the CPU form:
//   u = e^g·Sᵀk̂,  δ = (v − u)·β,  o = e^g·Sᵀq̂ + (k̂·q̂)·δ,  S ← e^g·S + k̂ ⊗ δ
// (dk of 32, 64 or 128; other sizes use a block form with the slice split over warps).
// Prefill (gdn_chunked, more than a few tokens) uses the chunked form instead: see the section below.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"

namespace splash::cuda {
namespace {

constexpr int kMaxConv = 8, kMaxDkWarps = 8;  // conv kernel ≤ 8, dk ≤ 256
constexpr int kGdnFewTokens = 16;               // up to this many tokens: the block form with 16 rows per warp

// y[t, c] = silu(Σ_j w[c, j]·buf[t + j, c]) with buf = [state (K−1 rows); x (T rows)].
__global__ void k_conv1d_silu(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, const float* state,
                              float* y) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= int64_t(nt) * C) return;
  const int32_t t = int32_t(i / C), c = int32_t(i % C);
  float s = 0.f;
  for (int j = 0; j < K; ++j) {
    const int32_t r = t + j;  // row of buf
    const float b = r < K - 1 ? state[int64_t(r) * C + c] : x[int64_t(r - (K - 1)) * C + c];
    s += w[int64_t(c) * K + j] * b;
  }
  y[i] = siluf_(s);
}

// state ← last K−1 rows of buf (a separate launch: the conv above reads the old state).
__global__ void k_conv_state(const float* x, int32_t nt, int32_t C, int32_t K, float* state) {
  const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float keep[kMaxConv];
#pragma unroll
  for (int j = 0; j < kMaxConv; ++j) {
    if (j >= K - 1) break;
    const int32_t r = nt + j;  // buf row nt + j, j < K − 1
    keep[j] = r < K - 1 ? state[int64_t(r) * C + c] : x[int64_t(r - (K - 1)) * C + c];
  }
#pragma unroll
  for (int j = 0; j < kMaxConv; ++j) {
    if (j >= K - 1) break;
    state[int64_t(j) * C + c] = keep[j];
  }
}

// Few tokens (decode): a thread per channel computes its outputs and then moves its own state rows.
constexpr int kConvFusedTokens = 8;
__global__ void k_conv1d_silu_state(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state,
                                    float* y) {
  const int32_t c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float buf[kMaxConv - 1 + kConvFusedTokens], wc[kMaxConv];
#pragma unroll
  for (int j = 0; j < kMaxConv; ++j) wc[j] = j < K ? w[int64_t(c) * K + j] : 0.f;
#pragma unroll
  for (int j = 0; j < kMaxConv - 1 + kConvFusedTokens; ++j) {
    const int r = j;  // buf row: state rows, then x rows
    buf[j] = r < K - 1 ? state[int64_t(r) * C + c] : (r - (K - 1) < nt ? x[int64_t(r - (K - 1)) * C + c] : 0.f);
  }
#pragma unroll
  for (int t = 0; t < kConvFusedTokens; ++t) {
    if (t >= nt) break;
    float s = 0.f;
#pragma unroll
    for (int j = 0; j < kMaxConv; ++j)
      if (j < K) s += wc[j] * buf[t + j];
    y[int64_t(t) * C + c] = siluf_(s);
  }
#pragma unroll
  for (int r = 0; r < kMaxConv - 1 + kConvFusedTokens; ++r) {  // new state = buf rows [nt, nt + K − 1)
    const int j = r - nt;
    if (j >= 0 && j < K - 1) state[int64_t(j) * C + c] = buf[r];
  }
}

// Normalised q̂ (scaled by 1/√dk), k̂ and k̂·q̂ for every (token, key head): [T][nk][2·dk + 4] (16-byte rows).
__global__ void k_gdn_prep(splash_gdn_args a, float* prep) {
  __shared__ float sh[32];
  const int32_t t = blockIdx.x / a.nk, kh = blockIdx.x % a.nk, dk = a.dk, i = threadIdx.x;
  const float* q = a.q + t * a.qk_stride + int64_t(kh) * dk;
  const float* k = a.k + t * a.qk_stride + int64_t(kh) * dk;
  const float qi = i < dk ? q[i] : 0.f, ki = i < dk ? k[i] : 0.f;
  const float sq = block_sum(qi * qi, sh), sk = block_sum(ki * ki, sh), sqk = block_sum(qi * ki, sh);
  const float iq = (1.f / sqrtf(float(dk))) / sqrtf(sq + 1e-6f), ik = 1.f / sqrtf(sk + 1e-6f);
  float* o = prep + int64_t(blockIdx.x) * (2 * dk + 4);
  if (i < dk) o[i] = qi * iq, o[dk + i] = ki * ik;
  if (i == 0) o[2 * dk] = sqk * iq * ik;
}

template <int DK>
__global__ void __launch_bounds__(32) k_gdn_warp(splash_gdn_args a, const float* prep) {
  const int lane = threadIdx.x;
  const int32_t h = blockIdx.x, col = blockIdx.y * 32 + lane, dv = a.dv, kh = h / (a.nv / a.nk);
  const bool colok = col < dv;
  float* S = a.state + int64_t(h) * DK * dv;
  float s[DK];
#pragma unroll
  for (int i = 0; i < DK; ++i) s[i] = colok ? S[int64_t(i) * dv + col] : 0.f;
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const float* p = prep + (int64_t(t) * a.nk + kh) * (2 * DK + 4);
    const float4* q4 = reinterpret_cast<const float4*>(p);
    const float4* k4 = reinterpret_cast<const float4*>(p + DK);
    float u = 0.f, wq = 0.f;
#pragma unroll
    for (int i = 0; i < DK / 4; ++i) {
      const float4 kk = k4[i], qq = q4[i];
      u += s[4 * i] * kk.x + s[4 * i + 1] * kk.y + s[4 * i + 2] * kk.z + s[4 * i + 3] * kk.w;
      wq += s[4 * i] * qq.x + s[4 * i + 1] * qq.y + s[4 * i + 2] * qq.z + s[4 * i + 3] * qq.w;
    }
    const float kq = p[2 * DK];
    const float decay = expf(a.g[int64_t(t) * a.nv + h]), beta = a.beta[int64_t(t) * a.nv + h];
    const float v = colok ? a.v[t * a.v_stride + int64_t(h) * dv + col] : 0.f;
    const float d = (v - decay * u) * beta;
    if (colok) a.out[int64_t(t) * a.nv * dv + int64_t(h) * dv + col] = decay * wq + kq * d;
    asm volatile("" ::: "memory");  // reload k̂ below rather than keep 128 values live across the two passes
#pragma unroll
    for (int i = 0; i < DK / 4; ++i) {
      const float4 kk = k4[i];
      s[4 * i] = decay * s[4 * i] + kk.x * d;
      s[4 * i + 1] = decay * s[4 * i + 1] + kk.y * d;
      s[4 * i + 2] = decay * s[4 * i + 2] + kk.z * d;
      s[4 * i + 3] = decay * s[4 * i + 3] + kk.w * d;
    }
  }
#pragma unroll
  for (int i = 0; i < DK; ++i)
    if (colok) S[int64_t(i) * dv + col] = s[i];
}

// Block form: warp w holds rows [w·RW, (w+1)·RW) of the (head, 32 columns) slice. RW = 16 for few tokens
// (decode, verify rows): 8 warps per block for dk = 128, 4× the threads of the warp form and a quarter of its
// serial loads, which decode is bound by; RW = 32 for head sizes the warp form does not take.
template <int RW>
__global__ void k_gdn(splash_gdn_args a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  const int32_t h = blockIdx.x, col = blockIdx.y * 32 + lane;
  const int32_t dk = a.dk, dv = a.dv, kh = h / (a.nv / a.nk);
  const bool colok = col < dv;
  float* S = a.state + int64_t(h) * dk * dv;
  __shared__ float qn[32 * kMaxDkWarps], kn[32 * kMaxDkWarps];
  __shared__ float pu[kMaxDkWarps][32], pw[kMaxDkWarps][32], delta[32], red[3][32];
  float s[RW];
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    const int row = warp * RW + i;
    s[i] = (colok && row < dk) ? S[int64_t(row) * dv + col] : 0.f;
  }
  const float qscale = 1.f / sqrtf(float(dk));
  for (int32_t t = 0; t < a.n_tokens; ++t) {
    const float* q = a.q + t * a.qk_stride + int64_t(kh) * dk;
    const float* k = a.k + t * a.qk_stride + int64_t(kh) * dk;
    const int i = threadIdx.x;
    const float qi = i < dk ? q[i] : 0.f, ki = i < dk ? k[i] : 0.f;
    // three block sums: |q|², |k|², q·k
    float v0 = warp_sum(qi * qi), v1 = warp_sum(ki * ki), v2 = warp_sum(qi * ki);
    if (lane == 0) red[0][warp] = v0, red[1][warp] = v1, red[2][warp] = v2;
    __syncthreads();
    float sq = 0.f, sk = 0.f, sqk = 0.f;
    for (int w = 0; w < nw; ++w) sq += red[0][w], sk += red[1][w], sqk += red[2][w];
    const float iq = qscale / sqrtf(sq + 1e-6f), ik = 1.f / sqrtf(sk + 1e-6f);
    if (i < dk) qn[i] = qi * iq, kn[i] = ki * ik;
    const float kq = sqk * iq * ik;
    __syncthreads();
    float u = 0.f, wq = 0.f;
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const int row = warp * RW + r;
      const float kr = row < dk ? kn[row] : 0.f, qr = row < dk ? qn[row] : 0.f;
      u += s[r] * kr;
      wq += s[r] * qr;
    }
    pu[warp][lane] = u;
    pw[warp][lane] = wq;
    __syncthreads();
    const float decay = expf(a.g[int64_t(t) * a.nv + h]);
    if (warp == 0) {
      float U = 0.f, W = 0.f;
      for (int w = 0; w < nw; ++w) U += pu[w][lane], W += pw[w][lane];
      const float beta = a.beta[int64_t(t) * a.nv + h];
      const float v = colok ? a.v[t * a.v_stride + int64_t(h) * dv + col] : 0.f;
      const float d = (v - decay * U) * beta;
      delta[lane] = d;
      if (colok) a.out[int64_t(t) * a.nv * dv + int64_t(h) * dv + col] = decay * W + kq * d;
    }
    __syncthreads();
    const float d = delta[lane];
#pragma unroll
    for (int r = 0; r < RW; ++r) {
      const int row = warp * RW + r;
      const float kr = row < dk ? kn[row] : 0.f;
      s[r] = decay * s[r] + kr * d;
    }
    __syncthreads();  // qn/kn/red are rewritten by the next token
  }
#pragma unroll
  for (int i = 0; i < RW; ++i) {
    const int row = warp * RW + i;
    if (colok && row < dk) S[int64_t(row) * dv + col] = s[i];
  }
}

// ---- The chunked form (prefill). Per head, the tokens go in chunks of kCh = 64; inside a chunk, with
// γ_i = g_1 + … + g_i the running log decay and S the state at the chunk's start, the recurrence unrolls to
//   A_ij = β_i (k̂_i·k̂_j) e^{γ_i−γ_j} (j < i),  (I + A) U = β⊙V,  (I + A) W = β⊙e^γ⊙K̂
//   Vn = U − W·S                         (the corrected values δ the token-by-token form would have made)
//   O_i = e^{γ_i} q̂_i·S + Σ_{j≤i} P_ij Vn_j,   P_ij = (q̂_i·k̂_j) e^{γ_i−γ_j}
//   S ← e^{γ_last} S + Σ_j e^{γ_last−γ_j} k̂_j ⊗ Vn_j
// (the CPU's gdn_chunked_head). Everything but S is known from the chunk's own tokens: a first kernel builds
// U, W, P and the decay factors of every (chunk, head) at once (the triangular solves included); a second walks
// the chunks in order per (head, 32 state columns), its slice of S in shared memory, doing only the products
// with S. The scratch holds kSegChunks chunks: longer calls go in segments of that many chunks.
constexpr int kCh = 64;
constexpr int kSegChunks = 16;
constexpr int kChThreads = 256;
constexpr int kGateStride = 2 * kCh + 4;  // per (head, chunk): e^{γ_i}, e^{γ_last−γ_i} (0 past the end), e^{γ_last}

// Shared memory of the two kernels (floats).
template <int DK>
constexpr int kLocalFloats = 2 * kCh * (DK + 4) + kCh * (kCh + 4) + 3 * kCh;
template <int DK>
constexpr int kScanFloats = DK * 32 + 3 * kCh * 32 + 3 * kCh * DK + kCh * kCh + kGateStride;

// 16-byte copies global → shared that complete in the background (cp.async); !ok fills zeros and reads nothing.
__device__ __forceinline__ void cp16(float* dst, const float* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
// A 16-byte shared load kept whole: the compiler splits float4 loads at constant addresses (the unrolled forward
// substitution's) into four scalar ones, four times the load instructions.
__device__ __forceinline__ float4 lds4(const float* p) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(p)))
               : "memory");
  return v;
}

// o[n] += a·(column n of the 4×4 block v), for n = 0..3: one row of a register tile times four rows of a 32-column
// slice (the products of a column summed in the same order for every use)
__device__ __forceinline__ void fma_row4(float (&o)[4], const float4 a, const float4 (&v)[4]) {
  o[0] += a.x * v[0].x + a.y * v[1].x + a.z * v[2].x + a.w * v[3].x;
  o[1] += a.x * v[0].y + a.y * v[1].y + a.z * v[2].y + a.w * v[3].y;
  o[2] += a.x * v[0].z + a.y * v[1].z + a.z * v[2].z + a.w * v[3].z;
  o[3] += a.x * v[0].w + a.y * v[1].w + a.z * v[2].w + a.w * v[3].w;
}

// One (chunk, v-head) per block: q̂, k̂ of the chunk's tokens from the prep rows (zero past the last token, so
// every row past it comes out zero), γ, then A and P by 4×4 register tiles (rows ti + 16a, columns tj + 16b:
// a quarter warp reads 8 consecutive padded rows, no bank conflicts), then the forward substitution
// x_i = r_i − Σ_{j<i} A_ij x_j for one column of U or W per thread, the column held in registers.
// Outputs per (head, chunk) hc: U [64, dv], W [64, DK], P [64, 64] (zero above the diagonal), gates [kGateStride].
template <int DK>
__global__ void __launch_bounds__(kChThreads, 2) k_gdn_chunk_local(splash_gdn_args a, const float* prep, int32_t nch,
                                                                   float* U, float* W, float* P, float* G) {
  constexpr int KS = DK + 4, AS = kCh + 4;
  extern __shared__ float4 sm4[];
  float* Kn = reinterpret_cast<float*>(sm4);  // [64][KS]
  float* Qn = Kn + kCh * KS;                  // [64][KS]
  float* At = Qn + kCh * KS;                  // [64][AS]: At[j][i] = A_ij
  float* gam = At + kCh * AS;                 // [64] γ
  float* bet = gam + kCh;                     // [64] β
  float* eg = bet + kCh;                      // [64] e^{γ}
  const int tid = threadIdx.x;
  const int32_t c = blockIdx.x, h = blockIdx.y, kh = h / (a.nv / a.nk), dv = a.dv;
  const int32_t t0 = c * kCh, L = min(kCh, a.n_tokens - t0);
  const int64_t hc = int64_t(h) * nch + c;
  for (int e = tid; e < kCh * DK / 4; e += kChThreads) {
    const int i = e / (DK / 4), x = e % (DK / 4) * 4;
    float4 q = make_float4(0.f, 0.f, 0.f, 0.f), k = q;
    if (i < L) {
      const float* p = prep + (int64_t(t0 + i) * a.nk + kh) * (2 * DK + 4);
      q = *reinterpret_cast<const float4*>(p + x);
      k = *reinterpret_cast<const float4*>(p + DK + x);
    }
    *reinterpret_cast<float4*>(Qn + i * KS + x) = q;
    *reinterpret_cast<float4*>(Kn + i * KS + x) = k;
  }
  if (tid < kCh) {
    bet[tid] = tid < L ? a.beta[int64_t(t0 + tid) * a.nv + h] : 0.f;
    gam[tid] = tid < L ? a.g[int64_t(t0 + tid) * a.nv + h] : 0.f;
  }
  __syncthreads();
  if (tid == 0) {  // the running sum in token order, as the CPU adds it
    float cum = 0.f;
    for (int i = 0; i < kCh; ++i) cum += gam[i], gam[i] = cum;
  }
  __syncthreads();
  if (tid < kCh) {
    const float gl = gam[L - 1];
    const bool in = tid < L;
    const float e = in ? expf(gam[tid]) : 0.f;
    eg[tid] = e;
    float* gr = G + hc * kGateStride;
    gr[tid] = e;
    gr[kCh + tid] = in ? expf(gl - gam[tid]) : 0.f;
    if (tid < 4) gr[2 * kCh + tid] = tid == 0 ? expf(gl) : 0.f;
  }
  {  // k̂_i·k̂_j and q̂_i·k̂_j over the chunk
    const int ti = tid >> 4, tj = tid & 15;
    float kk[4][4] = {}, qk[4][4] = {};
#pragma unroll 2
    for (int x = 0; x < DK; x += 4) {
      float4 ki[4], qi[4], kj[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        ki[r] = *reinterpret_cast<const float4*>(Kn + (ti + 16 * r) * KS + x);
        qi[r] = *reinterpret_cast<const float4*>(Qn + (ti + 16 * r) * KS + x);
        kj[r] = *reinterpret_cast<const float4*>(Kn + (tj + 16 * r) * KS + x);
      }
#pragma unroll
      for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          kk[r][s] += ki[r].x * kj[s].x + ki[r].y * kj[s].y + ki[r].z * kj[s].z + ki[r].w * kj[s].w;
          qk[r][s] += qi[r].x * kj[s].x + qi[r].y * kj[s].y + qi[r].z * kj[s].z + qi[r].w * kj[s].w;
        }
    }
    float* Ph = P + hc * kCh * kCh;
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int i = ti + 16 * r, j = tj + 16 * s;
        const float d = expf(gam[i] - gam[j]);  // ≤ 1 where used (j ≤ i, decays ≤ 0)
        At[j * AS + i] = j < i ? bet[i] * kk[r][s] * d : 0.f;
        Ph[i * kCh + j] = j <= i ? qk[r][s] * d : 0.f;
      }
  }
  __syncthreads();
  // Forward substitution, right-looking: once x_j is final it is taken off every later row, so row i still
  // subtracts its terms in j order (as the CPU's row-by-row loop).
  for (int col = tid; col < dv + DK; col += kChThreads) {
    float x[kCh];
    if (col < dv) {
      const float* v = a.v + int64_t(t0) * a.v_stride + int64_t(h) * dv + col;
#pragma unroll
      for (int i = 0; i < kCh; ++i) {
        x[i] = i < L ? bet[i] * *v : 0.f;
        if (i < L - 1) v += a.v_stride;  // one pointer stepped down the rows (64 addresses would not fit)
      }
    } else {
#pragma unroll
      for (int i = 0; i < kCh; ++i) x[i] = bet[i] * eg[i] * Kn[i * KS + col - dv];
    }
#pragma unroll
    for (int j = 0; j < kCh - 1; ++j) {
      const float xj = x[j];
#pragma unroll
      for (int i4 = (j + 1) / 4 * 4; i4 < kCh; i4 += 4) {
        const float4 a4 = lds4(At + j * AS + i4);
        if (i4 > j) x[i4] -= a4.x * xj;
        if (i4 + 1 > j) x[i4 + 1] -= a4.y * xj;
        if (i4 + 2 > j) x[i4 + 2] -= a4.z * xj;
        x[i4 + 3] -= a4.w * xj;
      }
    }
    float* dst = col < dv ? U + hc * kCh * dv + col : W + hc * kCh * DK + (col - dv);
    const int ld = col < dv ? dv : DK;
#pragma unroll
    for (int i = 0; i < kCh; ++i) dst[i * ld] = x[i];
  }
}

// One (v-head, 32 state columns) per block of 8 warps, walking the chunks in order. Per chunk three phases:
//   A  Vn = U − W·S, and the decayed query part e^{γ_i} q̂_i·S of the outputs (both read the old S)
//   B  O_i += Σ_{j≤i} P_ij Vn_j, then O out
//   C  S ← e^{γ_last} S + Σ_j k̂_j ⊗ Vs_j,  Vs_j = e^{γ_last−γ_j} Vn_j (made in A)
// Shared memory feeds every product, so each thread keeps a 2-D tile in registers (every value it loads serves
// several multiply-adds): in A and B rows i and 63 − i of the chunk (i = tid / 8: the causal P·Vn then costs
// every thread the same) by 4 columns (4·(tid % 8)); in C 4 (DK/32) rows of S by the same 4 columns, kept in
// registers across chunks. A quarter warp shares its rows and reads 8 consecutive column quads: no bank
// conflicts. The inputs come in three cp.async groups, each refilled for the next chunk as soon as its phase has
// read it (A: W, q̂, U, the decays; B: P; C: k̂), so the loads run under the other two phases; one barrier per
// phase.
template <int DK>
__global__ void __launch_bounds__(kChThreads, 1) k_gdn_chunk_scan(splash_gdn_args a, const float* prep, int32_t nch,
                                                                  const float* U, const float* W, const float* P,
                                                                  const float* G) {
  constexpr int RK = DK / 32;  // state rows per thread in C
  extern __shared__ float4 sm4[];
  float* S = reinterpret_cast<float*>(sm4);  // [DK][32] this block's columns of the state
  float* Vn = S + DK * 32;                   // [64][32]
  float* Vs = Vn + kCh * 32;                 // [64][32] Vn scaled for the state update
  float* Ub = Vs + kCh * 32;                 // [64][32]
  float* Wb = Ub + kCh * 32;                 // [64][DK]
  float* Qb = Wb + kCh * DK;                 // [64][DK] q̂
  float* Kb = Qb + kCh * DK;                 // [64][DK] k̂
  float* Pb = Kb + kCh * DK;                 // [64][64]
  float* gA = Pb + kCh * kCh;                // [kGateStride] e^{γ_i}, e^{γ_last−γ_i}, e^{γ_last}
  const int tid = threadIdx.x, rp = tid >> 3, cq = tid & 7;
  const int32_t h = blockIdx.x, col0 = blockIdx.y * 32, dv = a.dv, kh = h / (a.nv / a.nk);
  const int64_t prs = int64_t(a.nk) * (2 * DK + 4);
  const float* ph = prep + int64_t(kh) * (2 * DK + 4);
  auto load_A = [&](int32_t c) {
    if (c < nch) {
      const int64_t hc = int64_t(h) * nch + c;
      const int32_t t0 = c * kCh, L = min(kCh, a.n_tokens - t0);
      const float* w = W + hc * kCh * DK;
      for (int e = tid; e < kCh * DK / 4; e += kChThreads) {
        const int i = e / (DK / 4), x = e % (DK / 4) * 4;
        cp16(Wb + 4 * e, w + 4 * e, true);
        cp16(Qb + 4 * e, ph + int64_t(t0 + min(i, L - 1)) * prs + x, i < L);
      }
      const float* u = U + hc * kCh * dv + col0;
      for (int e = tid; e < kCh * 8; e += kChThreads) cp16(Ub + 4 * e, u + int64_t(e >> 3) * dv + (e & 7) * 4, true);
      if (tid < kGateStride / 4) cp16(gA + 4 * tid, G + hc * kGateStride + 4 * tid, true);
    }
    cp_commit();
  };
  auto load_B = [&](int32_t c) {
    if (c < nch) {
      const float* p = P + (int64_t(h) * nch + c) * kCh * kCh;
      for (int e = tid; e < kCh * kCh / 4; e += kChThreads) cp16(Pb + 4 * e, p + 4 * e, true);
    }
    cp_commit();
  };
  auto load_C = [&](int32_t c) {
    if (c < nch) {
      const int32_t t0 = c * kCh, L = min(kCh, a.n_tokens - t0);
      for (int e = tid; e < kCh * DK / 4; e += kChThreads) {
        const int i = e / (DK / 4), x = e % (DK / 4) * 4;
        cp16(Kb + 4 * e, ph + int64_t(t0 + min(i, L - 1)) * prs + DK + x, i < L);
      }
    }
    cp_commit();
  };
  auto ld4 = [](const float* p) { return *reinterpret_cast<const float4*>(p); };
  auto st4 = [](float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; };
  // C's tile of the state: rows rp·RK + m, columns 4·cq + n
  float* Sg = a.state + int64_t(h) * DK * dv + col0 + 4 * cq;
  float s[RK][4];
#pragma unroll
  for (int m = 0; m < RK; ++m) {
#pragma unroll
    for (int n = 0; n < 4; ++n) s[m][n] = Sg[int64_t(rp * RK + m) * dv + n];
    st4(S + (rp * RK + m) * 32 + 4 * cq, make_float4(s[m][0], s[m][1], s[m][2], s[m][3]));
  }
  load_A(0);
  load_B(0);
  load_C(0);
  cp_wait<2>();
  __syncthreads();
  const int r0 = rp, r1 = kCh - 1 - rp;
  float* outc = a.out + int64_t(h) * dv + col0 + 4 * cq;
  const int64_t ors = int64_t(a.nv) * dv;
  for (int32_t c = 0; c < nch; ++c) {
    const int32_t t0 = c * kCh, L = min(kCh, a.n_tokens - t0);
    // A
    float aw[2][4] = {}, o[2][4] = {};
#pragma unroll 2
    for (int x = 0; x < DK; x += 4) {
      const float4 w[2] = {ld4(Wb + r0 * DK + x), ld4(Wb + r1 * DK + x)};
      const float4 q[2] = {ld4(Qb + r0 * DK + x), ld4(Qb + r1 * DK + x)};
      float4 sv[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) sv[m] = ld4(S + (x + m) * 32 + 4 * cq);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        fma_row4(aw[r], w[r], sv);
        fma_row4(o[r], q[r], sv);
      }
    }
    const float el = gA[2 * kCh];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = r ? r1 : r0;
      const float4 u = ld4(Ub + i * 32 + 4 * cq);
      const float4 vn = make_float4(u.x - aw[r][0], u.y - aw[r][1], u.z - aw[r][2], u.w - aw[r][3]);
      const float eg = gA[i], ek = gA[kCh + i];
      st4(Vn + i * 32 + 4 * cq, vn);
      st4(Vs + i * 32 + 4 * cq, make_float4(ek * vn.x, ek * vn.y, ek * vn.z, ek * vn.w));
#pragma unroll
      for (int n = 0; n < 4; ++n) o[r][n] *= eg;
    }
    cp_wait<1>();
    __syncthreads();
    load_A(c + 1);
    // B: row r1 ≥ r0 needs j ≤ r1 (P is zero above the diagonal, so row r0 takes the extra terms as zeros)
    const int jend = (r1 + 4) & ~3;
    for (int j = 0; j < jend; j += 4) {
      const float4 p[2] = {ld4(Pb + r0 * kCh + j), ld4(Pb + r1 * kCh + j)};
      float4 v[4];
#pragma unroll
      for (int m = 0; m < 4; ++m) v[m] = ld4(Vn + (j + m) * 32 + 4 * cq);
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        fma_row4(o[r], p[r], v);
      }
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = r ? r1 : r0;
      if (i < L)
#pragma unroll
        for (int n = 0; n < 4; ++n) outc[int64_t(t0 + i) * ors + n] = o[r][n];
    }
    cp_wait<1>();
    __syncthreads();
    load_B(c + 1);
    // C
#pragma unroll
    for (int m = 0; m < RK; ++m)
#pragma unroll
      for (int n = 0; n < 4; ++n) s[m][n] *= el;
#pragma unroll 4
    for (int j = 0; j < kCh; ++j) {
      const float4 v = ld4(Vs + j * 32 + 4 * cq);
      float k[RK];
      if constexpr (RK == 4) {
        const float4 k4 = ld4(Kb + j * DK + rp * 4);
        k[0] = k4.x, k[1] = k4.y, k[2] = k4.z, k[3] = k4.w;
      } else {
#pragma unroll
        for (int m = 0; m < RK; ++m) k[m] = Kb[j * DK + rp * RK + m];
      }
#pragma unroll
      for (int m = 0; m < RK; ++m) {
        s[m][0] += k[m] * v.x;
        s[m][1] += k[m] * v.y;
        s[m][2] += k[m] * v.z;
        s[m][3] += k[m] * v.w;
      }
    }
#pragma unroll
    for (int m = 0; m < RK; ++m) st4(S + (rp * RK + m) * 32 + 4 * cq, make_float4(s[m][0], s[m][1], s[m][2], s[m][3]));
    cp_wait<1>();
    __syncthreads();
    load_C(c + 1);
  }
#pragma unroll
  for (int m = 0; m < RK; ++m)
#pragma unroll
    for (int n = 0; n < 4; ++n) Sg[int64_t(rp * RK + m) * dv + n] = s[m][n];
  cp_wait<0>();
}

template <int DK>
void gdn_chunked_run(Ctx* c, const splash_gdn_args* a) {
  static bool opted = false;  // dynamic shared memory past 48 KiB needs an opt-in, once per kernel
  constexpr size_t local_bytes = size_t(kLocalFloats<DK>) * 4, scan_bytes = size_t(kScanFloats<DK>) * 4;
  if (!opted) {
    if (!check(c, cudaFuncSetAttribute(k_gdn_chunk_local<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(local_bytes)),
               "gdn_chunk_local smem") ||
        !check(c, cudaFuncSetAttribute(k_gdn_chunk_scan<DK>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(scan_bytes)),
               "gdn_chunk_scan smem"))
      return;
    opted = true;
  }
  const int32_t T = a->n_tokens, nv = a->nv, dv = a->dv;
  const int32_t seg_tokens = kSegChunks * kCh, seg = std::min(T, seg_tokens);
  const int64_t nch_max = (seg + kCh - 1) / kCh, per = int64_t(nv) * nch_max * kCh;
  const size_t nU = size_t(per) * dv, nW = size_t(per) * DK, nP = size_t(per) * kCh, nG = size_t(nv) * nch_max * kGateStride;
  auto* prep = static_cast<float*>(scratch(c, kGdn, size_t(seg) * a->nk * (2 * DK + 4) * 4));
  auto* U = static_cast<float*>(scratch(c, kGdnChunk, (nU + nW + nP + nG) * 4));
  if (!prep || !U) return;  // the error is recorded
  float *W = U + nU, *P = W + nW, *G = P + nP;
  for (int32_t s0 = 0; s0 < T; s0 += seg_tokens) {
    splash_gdn_args s = *a;
    s.n_tokens = std::min(seg_tokens, T - s0);
    s.q += s0 * a->qk_stride;
    s.k += s0 * a->qk_stride;
    s.v += s0 * a->v_stride;
    s.beta += int64_t(s0) * nv;
    s.g += int64_t(s0) * nv;
    s.out += int64_t(s0) * nv * dv;
    const int32_t nch = (s.n_tokens + kCh - 1) / kCh;
    k_gdn_prep<<<unsigned(s.n_tokens * a->nk), DK, 0, strm(c)>>>(s, prep);
    SPLASH_LAUNCHED(c, "gdn_prep");
    k_gdn_chunk_local<DK><<<dim3(unsigned(nch), unsigned(nv)), kChThreads, local_bytes, strm(c)>>>(s, prep, nch, U, W, P, G);
    SPLASH_LAUNCHED(c, "gdn_chunk_local");
    k_gdn_chunk_scan<DK><<<dim3(unsigned(nv), unsigned(dv / 32)), kChThreads, scan_bytes, strm(c)>>>(s, prep, nch, U, W, P, G);
    SPLASH_LAUNCHED(c, "gdn_chunk_scan");
  }
}

}  // namespace

void conv1d_silu(void* ctx, const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (K < 1 || K > kMaxConv) {
    if (c->error.empty()) c->error = "conv1d: kernel size > 8 is not supported by the CUDA backend";
    return;
  }
  if (nt <= 0) return;
  if (nt <= kConvFusedTokens) {
    k_conv1d_silu_state<<<blocks_for(C, 128), 128, 0, strm(c)>>>(x, nt, C, K, w, state, y);
    SPLASH_LAUNCHED(c, "conv1d_silu_state");
    return;
  }
  k_conv1d_silu<<<blocks_for(int64_t(nt) * C, 256), 256, 0, strm(c)>>>(x, nt, C, K, w, state, y);
  SPLASH_LAUNCHED(c, "conv1d_silu");
  k_conv_state<<<blocks_for(C, 128), 128, 0, strm(c)>>>(x, nt, C, K, state);
  SPLASH_LAUNCHED(c, "conv_state");
}

void gdn_recurrent(void* ctx, const splash_gdn_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (a->dk > 32 * kMaxDkWarps) {
    if (c->error.empty()) c->error = "gdn: key head dim > 256 is not supported by the CUDA backend";
    return;
  }
  if (a->n_tokens <= 0) return;
  dim3 grid(unsigned(a->nv), unsigned((a->dv + 31) / 32));
  if (a->n_tokens <= kGdnFewTokens && a->dk % 16 == 0 && a->dk <= 16 * kMaxDkWarps) {
    k_gdn<16><<<grid, (a->dk / 16) * 32, 0, strm(c)>>>(*a);
    SPLASH_LAUNCHED(c, "gdn");
    return;
  }
  if (a->dk == 32 || a->dk == 64 || a->dk == 128) {
    auto* prep = static_cast<float*>(scratch(c, kGdn, size_t(a->n_tokens) * a->nk * (2 * a->dk + 4) * 4));
    if (!prep) return;
    k_gdn_prep<<<unsigned(a->n_tokens * a->nk), a->dk, 0, strm(c)>>>(*a, prep);
    SPLASH_LAUNCHED(c, "gdn_prep");
    if (a->dk == 32) k_gdn_warp<32><<<grid, 32, 0, strm(c)>>>(*a, prep);
    else if (a->dk == 64) k_gdn_warp<64><<<grid, 32, 0, strm(c)>>>(*a, prep);
    else k_gdn_warp<128><<<grid, 32, 0, strm(c)>>>(*a, prep);
    SPLASH_LAUNCHED(c, "gdn");
    return;
  }
  const int warps = (a->dk + 31) / 32;
  k_gdn<32><<<grid, warps * 32, 0, strm(c)>>>(*a);
  SPLASH_LAUNCHED(c, "gdn");
}

void gdn_chunked(void* ctx, const splash_gdn_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (a->n_tokens <= 0) return;
  // SPLASH_GDN_CHUNKED=1 takes the chunked kernels from 2 tokens on, =0 never (the tests and the benchmark)
  const char* force = std::getenv("SPLASH_GDN_CHUNKED");
  const bool wanted = force ? force[0] == '1' : a->n_tokens > kGdnFewTokens;
  const bool shapes = a->n_tokens >= 2 && a->dv % 32 == 0 && a->nv % a->nk == 0;
  if (wanted && shapes) {
    if (a->dk == 128) return gdn_chunked_run<128>(c, a);
    if (a->dk == 64) return gdn_chunked_run<64>(c, a);
    if (a->dk == 32) return gdn_chunked_run<32>(c, a);
  }
  gdn_recurrent(ctx, a);
}

}  // namespace splash::cuda
