// Expert-grouped GEMM for routed experts over many tokens (prefill, verify): the (token, expert) pairs are sorted
// by expert into slots (cuda_moe.cu), and one launch multiplies every expert's slots by that expert's weights.
// A block takes one row tile of one expert (kGm slots; a table maps the grid's row index to it) and a tile of output
// features of one weight, with no dequantised copy of the experts and no host round trip. Each output element is
// one dot product of bf16 operands in a fixed order with fp32 sums, so the result does not depend on which slots
// share a tile.
//
// q4 experts (k_expert_q4): 128 features × 64 slots a block, the fused q4 GEMM's inner loop (cuda_qgemm.cu,
// qmma.cuh): the q4 weights, their scales and biases and the gathered slots' bf16 activations (permuted per 8
// columns, qgemm_act) stream through shared memory one 64-column group a stage (cp.async, ST stages in flight); a
// warp takes 32 features × 64 / WN slots, dequantises its weights in registers (s·q + b rounded once to bf16) and
// multiplies with mma.m16n8k16. Other dtypes (k_expert_wmma): 64 × 64 tiles, the weight tile dequantised (load8) to
// bf16 in shared memory as it is read, WMMA.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/qmma.cuh"
#include "backend/cuda/wmma_tile.cuh"

#include <cstdlib>
#include <cstring>

namespace splash::cuda {
namespace {

constexpr int kGm = 64, kGn = 64, kGk = 64, kLd = kGk + 8;  // bf16 pitch of the staged tiles (+16 B)

// The WMMA form. kQ4: the weights are q4 (each thread fetches 32 values with one 16-byte load); otherwise any dtype
// via load8.
// The next k-tile's activations (into the other shared stage) and q4 words (into registers) are fetched before the
// current tile's products, so their latency overlaps the tensor-core work.
template <bool kQ4>
__global__ void __launch_bounds__(128, 4) k_expert_wmma(ExpertGemm a) {
  const int e = a.tile_e[blockIdx.y];
  if (e < 0) return;  // past the last row tile
  const int r0 = a.tile_r[blockIdx.y], r1 = min(r0 + kGm, a.off[e + 1]);
  const int g = blockIdx.x / a.ct, n0 = (blockIdx.x % a.ct) * kGn;
  const splash_weight w = splash_weight_expert(&a.w[g], e);
  const int64_t R = w.rows, K = w.cols;
  __shared__ __align__(128) __nv_bfloat16 sa[2][kGm * kLd];
  __shared__ __align__(32) __nv_bfloat16 sb[kGn * kLd];
  __shared__ __align__(32) float sc[4][16 * 16];
  __shared__ int64_t xrow[kGm];
  const int tid = threadIdx.x;
  if (tid < kGm) {
    const int s = r0 + tid;
    xrow[tid] = s < r1 ? int64_t(a.perm ? a.perm[s] / a.xdiv : s) * K : -1;
  }
  __syncthreads();
  // q4 weights: thread = (row tid/2, half tid%2)
  uint4 qw = make_uint4(0, 0, 0, 0);
  float qs = 0.f, qb = 0.f;
  const int brow = tid >> 1, bhalf = tid & 1;
  const bool blive = n0 + brow < R;
  // the k-tile's bf16 activations straight into shared memory (64 rows × 8 chunks of 16 bytes, 4 a thread)
  auto load_a = [&](int64_t k0, int st) {
#pragma unroll
    for (int j = 0; j < kGm * kGk / 8 / 128; ++j) {
      const int i = tid + j * 128, row = i / (kGk / 8), col = (i % (kGk / 8)) * 8;
      const int64_t xr = xrow[row];
      cp16(&sa[st][row * kLd + col], a.xb + (xr >= 0 ? xr + k0 + col : 0), xr >= 0);
    }
  };
  auto fetch = [&](int64_t k0) {
    if (kQ4 && blive) {
      const int64_t r = n0 + brow;
      qw = __ldg(reinterpret_cast<const uint4*>(static_cast<const uint32_t*>(w.data) + r * (K / 8) + k0 / 8 + bhalf * 4));
      const int64_t gi = r * (K / 64) + k0 / 64;
      qs = bf16f(w.scales[gi]), qb = bf16f(w.biases[gi]);
    }
  };
  auto stash = [&](int64_t k0) {
    if (kQ4) {
      const uint32_t words[4] = {qw.x, qw.y, qw.z, qw.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        __align__(16) __nv_bfloat16 o[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) o[k] = __float2bfloat16(qs * float((words[q] >> (4 * k)) & 15u) + qb);
        *reinterpret_cast<uint4*>(&sb[brow * kLd + bhalf * 32 + q * 8]) = *reinterpret_cast<const uint4*>(o);
      }
    } else {
      for (int i = tid; i < kGn * kGk / 8; i += 128) {
        const int row = i / (kGk / 8), col = (i % (kGk / 8)) * 8;
        float v[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
        if (n0 + row < R) load8(w, n0 + row, k0 + col, v);
        __align__(16) __nv_bfloat16 o[8];
#pragma unroll
        for (int k = 0; k < 8; ++k) o[k] = __float2bfloat16(v[k]);
        *reinterpret_cast<uint4*>(&sb[row * kLd + col]) = *reinterpret_cast<const uint4*>(o);
      }
    }
  };
  const int warp = tid / 32;
  WmmaTile tile(warp);
  load_a(0, 0);
  cp_commit();
  fetch(0);
  int st = 0;
  for (int64_t k0 = 0; k0 < K; k0 += kGk, st ^= 1) {
    if (k0 + kGk < K) load_a(k0 + kGk, st ^ 1);  // the other stage: its last reader finished before the barrier
    cp_commit();
    stash(k0);
    cp_wait<1>();  // this k-tile's activations have landed
    __syncthreads();
    if (k0 + kGk < K) fetch(k0 + kGk);
    tile.mma<kGk, kLd>(sa[st], sb);
    __syncthreads();
  }
  float* y = a.y[g];
  tile.store(sc[warp], tid % 32, [&](int mi, int ni, float v) {
    const int m = r0 + mi;
    const int64_t n = n0 + ni;
    if (m < r1 && n < R) y[int64_t(m) * R + n] = v;
  });
}

// The q4 form: WN warps along the slots (× 4 along the features), ST stages of one 64-column group. kGlu: the
// block's 128 weight rows are 64 features of the gate (stage rows 0..63) and the same features of the up
// projection (64..127); warp wm's two 16-row tiles are its 16 features of each, so a thread holds gate and up of
// the same (slot, feature) and writes silu(gate)·up as the down projection's activations (bf16, permuted as
// qgemm_act writes them) instead of the two fp32 products.
template <int WN, int ST>
struct EqTile {
  static constexpr int kRows = 128, kNtw = 8 / WN;  // weight rows a block; n8 slot tiles a warp
  static constexpr int kWarps = 4 * WN, kThreads = 32 * kWarps;
  static constexpr int kW = kRows * 32;    // q4 weights of the stage: 32 bytes a row
  static constexpr int kX = kGm * 128;     // bf16 activations: 64 slots × 64 columns
  static constexpr int kS = kRows * 2 * 4; // per row the scales of groups 2j, 2j+1 (4 bytes), then the biases
  static constexpr int kStage = kW + kX + kS;
  static constexpr size_t kSmem = size_t(ST) * kStage;
  static constexpr int kMinBlocks = WN == 1 ? 3 : 2;
};

template <int WN, int ST, bool kGlu>
__global__ void __launch_bounds__(EqTile<WN, ST>::kThreads, EqTile<WN, ST>::kMinBlocks)
    k_expert_q4(ExpertGemm a, uint16_t* hb) {
  using L = EqTile<WN, ST>;
  constexpr int kFeat = kGlu ? L::kRows / 2 : L::kRows;  // output features a block
  extern __shared__ __align__(128) uint8_t eq_smem[];
  const int e = a.tile_e[blockIdx.y];
  if (e < 0) return;  // past the last row tile
  const int s0 = a.tile_r[blockIdx.y], ns = min(kGm, a.off[e + 1] - s0);
  const int g = kGlu ? 0 : blockIdx.x / a.ct;
  const int64_t r0 = int64_t(blockIdx.x % a.ct) * kFeat;
  const splash_weight w = splash_weight_expert(&a.w[g], e);
  const splash_weight wu = kGlu ? splash_weight_expert(&a.w[1], e) : w;
  const int64_t R = w.rows, K = w.cols, G = K / 64, row_bytes = K / 2;
  const int nk = int(G);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
  const int gq = lane >> 2, c = lane & 3;
  const uint16_t* const xb = reinterpret_cast<const uint16_t*>(a.xb);
  auto stage = [&](int kt) { return eq_smem + (kt % ST) * L::kStage; };
  // stage row r: its weight and feature
  auto src_w = [&](int r) -> const splash_weight& { return kGlu && r >= kFeat ? wu : w; };
  auto feat = [&](int r) { return min(r0 + (kGlu ? r % kFeat : r), R - 1); };
  // each thread's copies, the same every stage (addresses of group 0)
  constexpr int kNw = L::kRows * 2 / L::kThreads, kNs = L::kRows * 2 / L::kThreads, kNx = kGm * 8 / L::kThreads;
  static_assert(kNw * L::kThreads == L::kRows * 2 && kNx * L::kThreads == kGm * 8, "whole copies a thread");
  const uint8_t* wsrc[kNw];
  uint32_t wdst[kNw];
#pragma unroll
  for (int n = 0; n < kNw; ++n) {  // 128 rows × 2 pieces of 16 bytes
    const int i = tid + n * L::kThreads, r = i / 2, q = i % 2;
    wsrc[n] = static_cast<const uint8_t*>(src_w(r).data) + feat(r) * row_bytes + q * 16;
    wdst[n] = r * 32 + q * 16;
  }
  const uint16_t* ssrc[kNs];
  uint32_t sdst[kNs];
#pragma unroll
  for (int n = 0; n < kNs; ++n) {  // the scales, then the biases: 4 bytes (two groups) a row
    const int i = tid + n * L::kThreads, which = i / L::kRows, r = i % L::kRows;
    ssrc[n] = (which ? src_w(r).biases : src_w(r).scales) + feat(r) * G;
    sdst[n] = L::kW + L::kX + (which * L::kRows + r) * 4;
  }
  const uint16_t* xsrc[kNx];
  uint32_t xdst[kNx];
  bool xok[kNx];
#pragma unroll
  for (int n = 0; n < kNx; ++n) {  // 64 slots × 8 pieces; piece u of slot t at u ^ (t & 1)
    const int i = tid + n * L::kThreads, t = i / 8, u = i % 8;
    xok[n] = t < ns;
    const int s = s0 + (xok[n] ? t : 0);
    xsrc[n] = xb + int64_t(a.perm ? a.perm[s] / a.xdiv : s) * K + u * 8;
    xdst[n] = L::kW + t * 128 + ((u ^ (t & 1)) << 4);
  }
  auto issue = [&](int kt) {
    uint8_t* S = stage(kt);
#pragma unroll
    for (int n = 0; n < kNw; ++n) cp16(S + wdst[n], wsrc[n] + int64_t(kt) * 32, true);
#pragma unroll
    for (int n = 0; n < kNs; ++n) cp4(S + sdst[n], ssrc[n] + (kt & ~1), true);
#pragma unroll
    for (int n = 0; n < kNx; ++n) cp16(S + xdst[n], xsrc[n] + int64_t(kt) * 64, xok[n]);
  };
  for (int s = 0; s < ST - 1; ++s) {
    if (s < nk) issue(s);
    cp_commit();
  }
  // the warp's 16-row tile i: stage rows ra(i) + gq and + 8
  auto ra = [&](int i) { return kGlu ? i * kFeat + wm * 16 : wm * 32 + 16 * i; };
  float acc[2][L::kNtw][4] = {};
  for (int kt = 0; kt < nk; ++kt) {
    cp_wait<ST - 2>();
    __syncthreads();  // the stage has landed for every thread, and the one refilled below has been read
    if (kt + ST - 1 < nk) issue(kt + ST - 1);
    cp_commit();
    const uint8_t* const S = stage(kt);
    const uint8_t* const X = S + L::kW;
    const uint16_t* const SC = reinterpret_cast<const uint16_t*>(X + L::kX);
    const int h = kt & 1;
    uint32_t sb[2][4];
    uint2 wv[2][2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {  // per 16-row tile: rows g and g + 8, their scales, biases and 8 bytes
      const int rA = ra(i) + gq, rB = rA + 8;
      sb[i][0] = pair16(SC[rA * 2 + h]), sb[i][1] = pair16(SC[(L::kRows + rA) * 2 + h]);
      sb[i][2] = pair16(SC[rB * 2 + h]), sb[i][3] = pair16(SC[(L::kRows + rB) * 2 + h]);
      wv[i][0] = *reinterpret_cast<const uint2*>(S + rA * 32 + 8 * c);
      wv[i][1] = *reinterpret_cast<const uint2*>(S + rB * 32 + 8 * c);
    }
#pragma unroll
    for (int wi = 0; wi < 2; ++wi) {  // the thread's two words (columns 16c + 8wi ..)
      uint32_t b[L::kNtw][4];
#pragma unroll
      for (int j = 0; j < L::kNtw; ++j) {
        const int t = (wn * L::kNtw + j) * 8 + gq, u = 2 * c + wi;
        const uint4 v = *reinterpret_cast<const uint4*>(X + t * 128 + ((u ^ (t & 1)) << 4));
        b[j][0] = v.x, b[j][1] = v.y, b[j][2] = v.z, b[j][3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const uint32_t wa = wi ? wv[i][0].y : wv[i][0].x, wb = wi ? wv[i][1].y : wv[i][1].x;
#pragma unroll
        for (int p = 0; p < 2; ++p) {  // k16 steps: nibble pairs 2p and 2p + 1 of the word
          const int sh = 8 * p;
          const uint32_t a0 = deq2(nib2(wa >> sh), sb[i][0], sb[i][1]), a1 = deq2(nib2(wb >> sh), sb[i][2], sb[i][3]);
          const uint32_t a2 = deq2(nib2(wa >> (sh + 4)), sb[i][0], sb[i][1]);
          const uint32_t a3 = deq2(nib2(wb >> (sh + 4)), sb[i][2], sb[i][3]);
#pragma unroll
          for (int j = 0; j < L::kNtw; ++j) mma_bf16(acc[i][j], a0, a1, a2, a3, b[j][2 * p], b[j][2 * p + 1]);
        }
      }
    }
  }
  if constexpr (kGlu) {
    // silu(gate)·up as k_swiglu computes it, rounded to bf16 into column f's place among its 8 (0 4 1 5 2 6 3 7)
#pragma unroll
    for (int j = 0; j < L::kNtw; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t f = r0 + wm * 16 + gq + (k >= 2 ? 8 : 0);
        const int t = (wn * L::kNtw + j) * 8 + 2 * c + (k & 1);
        if (f >= R || t >= ns) continue;
        const float v = siluf_(acc[0][j][k]) * acc[1][j][k];
        const int q = int(f & 7);
        hb[int64_t(s0 + t) * R + (f & ~int64_t(7)) + (q & 3) * 2 + (q >> 2)] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
      }
  } else {
    float* const y = a.y[g];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int j = 0; j < L::kNtw; ++j)
#pragma unroll
        for (int k = 0; k < 4; ++k) {
          const int64_t r = r0 + wm * 32 + 16 * i + gq + (k >= 2 ? 8 : 0);
          const int t = (wn * L::kNtw + j) * 8 + 2 * c + (k & 1);
          if (r < R && t < ns) y[int64_t(s0 + t) * R + r] = acc[i][j][k];
        }
  }
}

// Which form a q4 expert GEMM takes (CudaOptions::expert_q4, for measurement: 0 wmma, 1 one warp along the slots,
// 2 two).
int q4_form(const Ctx* c) { return c->opt.expert_q4; }

bool q4_fits(const splash_weight& w) {
  return w.dtype == SPLASH_Q4 && w.cols % 128 == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.scales) % 4 == 0 && reinterpret_cast<uintptr_t>(w.biases) % 4 == 0 &&
         (w.rows * w.cols / 2) % 16 == 0;  // every expert's slice 16-byte aligned (its scales: cols % 128)
}

template <int WN, int ST, bool kGlu>
bool launch_q4(Ctx* c, const ExpertGemm& a, int32_t row_tiles, uint16_t* hb) {
  using L = EqTile<WN, ST>;
  if (!smem_opt_in<k_expert_q4<WN, ST, kGlu>>(c, L::kSmem, "expert q4 smem")) return false;
  ExpertGemm b = a;
  const int feat = kGlu ? L::kRows / 2 : L::kRows;
  b.ct = int32_t((a.w[0].rows + feat - 1) / feat);
  const unsigned gx = unsigned(kGlu ? b.ct : b.ct * b.nw);
  k_expert_q4<WN, ST, kGlu><<<dim3(gx, unsigned(row_tiles)), L::kThreads, L::kSmem, strm(c)>>>(b, hb);
  return true;
}

// One q4 launch in the form CudaOptions::expert_q4 names (2, else 1); the caller has checked q4_form(c) != 0.
template <bool kGlu>
bool launch_q4_form(Ctx* c, const ExpertGemm& a, int32_t row_tiles, uint16_t* hb) {
  return q4_form(c) == 2 ? launch_q4<2, 4, kGlu>(c, a, row_tiles, hb) : launch_q4<1, 4, kGlu>(c, a, row_tiles, hb);
}

// The activations in the q4 form's layout (bf16, permuted per 8 columns), in scratch
const uint16_t* q4_act(Ctx* c, const ExpertGemm& a) {
  const int64_t n = int64_t(a.x_rows) * a.w[0].cols;
  auto* xb = static_cast<uint16_t*>(scratch(c, kEgX, size_t(n) * 2));
  if (xb) qgemm_act(c, a.x, n, xb, nullptr);
  return xb;
}

}  // namespace

bool expert_gemm_fits(const splash_weight& w) { return w.cols % kGk == 0 && w.rows > 0; }

int expert_gemm_rows() { return kGm; }

bool expert_q4_fits(const Ctx* c, const splash_weight& w) { return q4_form(c) != 0 && q4_fits(w); }

void expert_gemm(Ctx* c, const ExpertGemm& a, int32_t row_tiles) {
  if (row_tiles <= 0) return;
  if (!a.x || (expert_q4_fits(c, a.w[0]) && (a.nw < 2 || expert_q4_fits(c, a.w[1])))) {
    ExpertGemm b = a;
    if (a.x) b.xb = reinterpret_cast<const __nv_bfloat16*>(q4_act(c, a));
    if (!b.xb) return;
    if (launch_q4_form<false>(c, b, row_tiles, nullptr)) SPLASH_LAUNCHED(c, "expert_q4");
    return;
  }
  ExpertGemm b = a;
  b.ct = int32_t((a.w[0].rows + kGn - 1) / kGn);
  const dim3 grid(unsigned(b.ct * b.nw), unsigned(row_tiles));
  const int64_t n = int64_t(a.x_rows) * a.w[0].cols;
  auto* xb = static_cast<__nv_bfloat16*>(scratch(c, kEgX, size_t(n) * 2));
  if (!xb) return;
  to_bf16(c, a.x, n, xb);
  b.xb = xb;
  if (a.w[0].dtype == SPLASH_Q4) k_expert_wmma<true><<<grid, 128, 0, strm(c)>>>(b);
  else k_expert_wmma<false><<<grid, 128, 0, strm(c)>>>(b);
  SPLASH_LAUNCHED(c, "expert_gemm");
}

void expert_glu(Ctx* c, const ExpertGemm& gu, uint16_t* hb, int32_t row_tiles) {
  if (row_tiles <= 0) return;
  ExpertGemm b = gu;
  b.xb = reinterpret_cast<const __nv_bfloat16*>(q4_act(c, gu));
  if (!b.xb) return;
  if (launch_q4_form<true>(c, b, row_tiles, hb)) SPLASH_LAUNCHED(c, "expert_glu");
}

}  // namespace splash::cuda
