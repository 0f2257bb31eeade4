// Gated DeltaNet on the GPU, the chunked form (prefill; the conv and the recurrent form are in cuda_gdn.cu).
// Per head, the tokens go in chunks of kCh = 64; inside a chunk, with γ_i = g_1 + … + g_i the running log decay and S the state at the chunk's start, the recurrence unrolls to
//   A_ij = β_i (k̂_i·k̂_j) e^{γ_i−γ_j} (j < i),  (I + A) U = β⊙V,  (I + A) W = β⊙e^γ⊙K̂
//   Vn = U − W·S                         (the corrected values δ the token-by-token form would have made)
//   O_i = e^{γ_i} q̂_i·S + Σ_{j≤i} P_ij Vn_j,   P_ij = (q̂_i·k̂_j) e^{γ_i−γ_j}
//   S ← e^{γ_last} S + Σ_j e^{γ_last−γ_j} k̂_j ⊗ Vn_j
// (the CPU's gdn_chunked_head). Everything but S is known from the chunk's own tokens: a first kernel builds
// U, W, P and the decay factors of every (chunk, head) at once (the triangular solves included); a second walks
// the chunks in order per (head, 32 state columns), its slice of S in shared memory, doing only the products
// with S. The scratch holds kSegChunks chunks: longer calls go in segments of that many chunks.
#include <algorithm>
#include <cstdlib>

#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cp_async.cuh"

namespace splash::cuda {
namespace {

constexpr int kCh = 64;
constexpr int kSegChunks = 16;
constexpr int kChThreads = 256;
constexpr int kGateStride = 2 * kCh + 4;  // per (head, chunk): e^{γ_i}, e^{γ_last−γ_i} (0 past the end), e^{γ_last}

// Shared memory of the two kernels (floats).
template <int DK>
constexpr int kLocalFloats = 2 * kCh * (DK + 4) + kCh * (kCh + 4) + 3 * kCh;
template <int DK>
constexpr int kScanFloats = DK * 32 + 3 * kCh * 32 + 3 * kCh * DK + kCh * kCh + kGateStride;

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
// Four consecutive rows of a 32-column slice in shared memory, 4 columns each: v[m] = p[m·32 .. m·32 + 3].
__device__ __forceinline__ void ld_rows4(float4 (&v)[4], const float* p) {
#pragma unroll
  for (int m = 0; m < 4; ++m) v[m] = *reinterpret_cast<const float4*>(p + m * 32);
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
      ld_rows4(sv, S + x * 32 + 4 * cq);
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
      ld_rows4(v, Vn + j * 32 + 4 * cq);
#pragma unroll
      for (int r = 0; r < 2; ++r) fma_row4(o[r], p[r], v);
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
  constexpr size_t local_bytes = size_t(kLocalFloats<DK>) * 4, scan_bytes = size_t(kScanFloats<DK>) * 4;
  if (!smem_opt_in<k_gdn_chunk_local<DK>>(c, local_bytes, "gdn_chunk_local smem") ||
      !smem_opt_in<k_gdn_chunk_scan<DK>>(c, scan_bytes, "gdn_chunk_scan smem"))
    return;
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
    gdn_prep(c, s, prep);
    k_gdn_chunk_local<DK><<<dim3(unsigned(nch), unsigned(nv)), kChThreads, local_bytes, strm(c)>>>(s, prep, nch, U, W, P, G);
    SPLASH_LAUNCHED(c, "gdn_chunk_local");
    k_gdn_chunk_scan<DK><<<dim3(unsigned(nv), unsigned(dv / 32)), kChThreads, scan_bytes, strm(c)>>>(s, prep, nch, U, W, P, G);
    SPLASH_LAUNCHED(c, "gdn_chunk_scan");
  }
}

}  // namespace

void gdn_chunked(void* ctx, const splash_gdn_args* a) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (a->n_tokens <= 0) return;
  // CudaOptions::gdn_chunked 1 takes the chunked kernels from 2 tokens on, 0 never (the tests and the benchmark)
  const int force = c->opt.gdn_chunked;
  const bool wanted = force >= 0 ? force == 1 : a->n_tokens > kGdnFewTokens;
  const bool shapes = a->n_tokens >= 2 && a->dv % 32 == 0 && a->nv % a->nk == 0;
  if (wanted && shapes) {
    if (a->dk == 128) return gdn_chunked_run<128>(c, a);
    if (a->dk == 64) return gdn_chunked_run<64>(c, a);
    if (a->dk == 32) return gdn_chunked_run<32>(c, a);
  }
  gdn_recurrent(ctx, a);
}

}  // namespace splash::cuda
