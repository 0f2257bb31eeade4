// q4 weights × 5 to 64 tokens (kernel_choice.h decides; CudaOptions::qgemm_min / qgemm_max) on the bf16 tensor cores, the
// weights dequantised in registers as they are multiplied: verify blocks, batched decodes and cached-prefix replays,
// where the GEMM path of cuda_gemm.cu writes and reads a bf16 copy of every weight per step (nine times the bytes of
// the q4 weights) and launches of the GEMV re-read the weights per 8 tokens.
//
// y[t, r] = Σ_k x[t, k]·W[r, k]. The activations are first rounded to bf16 in a permuted order (below), with their
// sums per 64 values; the weights, their scales and biases and the activations stream through shared memory 128
// columns per stage (256 with CudaOptions::qgemm_ks = 256; 3 or 4 stages in flight, cp.async); each warp takes 32 rows (two
// m16 tiles) × 8·NTW tokens and multiplies with mma.m16n8k16 (fp32 accumulation). Up to 2 n8 tiles a warp (kLate)
// it multiplies the raw values 128 + q and scales each 64-column group's sums once; with more it dequantises the
// nibbles in registers (s·q + b rounded once: the values the GEMM path's dequantisation produces, up to a rare
// double rounding there). A block is 4 × WN warps: 128 rows × 8·NTW·WN tokens. When those blocks do not fill the
// GPU the columns are split (grid z), each split writing its partial sums, and a second kernel adds them in a fixed
// order, so the result does not depend on timing.
//
// Operand layout: qmma.cuh (the weights are A, the tokens B).
#include <cuda_bf16.h>

#include <algorithm>

#include "backend/cuda/cp_async.cuh"
#include "backend/cuda/gemv_q.cuh"
#include "backend/cuda/qmma.cuh"

namespace splash::cuda {
namespace {

constexpr int kQgRows = 128;

// WN warps along the tokens (× 4 along the rows), NTW n8 tiles a warp, KS columns a stage, ST stages in flight.
template <int WN, int NTW, int KS, int ST>
struct QgTile {
  static constexpr int kWarps = 4 * WN, kThreads = 32 * kWarps, kTok = 8 * NTW * WN, kGroups = KS / 64;
  static constexpr int kWRow = KS / 2;                   // staged bytes per weight row
  static constexpr int kW = kQgRows * kWRow;             // q4 weights of the stage
  static constexpr int kX = kTok * KS * 2;               // bf16 activations
  static constexpr int kS = kQgRows * kGroups * 2 * 2;   // per row the groups' scales, then per row their biases
  static constexpr int kStage = kW + kX + kS;
  static constexpr size_t kSmem = size_t(ST) * kStage;
  static constexpr int kMinBlocks = WN == 1 ? 5 : 2;     // ≤ 102 / 128 registers a thread
  // few tokens a warp: multiply the raw nibbles and scale each group's sums once (2 fp32 fma per output and
  // group) instead of dequantising every weight (2 bf16x2 fma per 2 weights), which costs less below 3 n8 tiles
  static constexpr bool kLate = NTW <= 2;
  // the 32-byte segment of weight row r that holds segment h: a half-warp reads 4 rows' segment h, which must
  // fall in 4 different quarters of a 128-byte line (rows are kWRow bytes apart)
  __device__ static int seg(int r, int h) { return h ^ (KS == 128 ? (r >> 1) & 1 : r & 3); }
};

struct QgArgs {
  GemvGroup grp;           // first[]: row blocks of 128
  const uint16_t* x;       // [T][K] bf16, permuted per 8 columns
  const float* xsum;       // [T][K / 64] sums of those bf16 values per group of 64
  int32_t T, kper;         // tokens; stages per split
  float* part;             // splits > 1: [split][T][rtot] partial sums; rows of weight g from rofs[g]
  int32_t rtot;
  int32_t rofs[kGemvGroup];
};

// The weight of row block b, its output and where its rows start among the group's (constant indices only: the
// arguments stay in the parameter space).
struct QgPart {
  splash_weight w;
  float* y;
  int64_t ys;
  int32_t rofs;
};
__device__ __forceinline__ int32_t qg_group_of(const QgArgs& a, int32_t b, QgPart& p) {
  p = {a.grp.w[0], a.grp.y[0], a.grp.ys[0], a.rofs[0]};
  int32_t base = 0;
#pragma unroll
  for (int k = 1; k < kGemvGroup; ++k)
    if (k < a.grp.n && b >= a.grp.first[k]) p = {a.grp.w[k], a.grp.y[k], a.grp.ys[k], a.rofs[k]}, base = a.grp.first[k];
  return b - base;
}

template <int WN, int NTW, int KS, int ST>
__global__ void __launch_bounds__(QgTile<WN, NTW, KS, ST>::kThreads, QgTile<WN, NTW, KS, ST>::kMinBlocks) k_qgemm(QgArgs a) {
  using L = QgTile<WN, NTW, KS, ST>;
  extern __shared__ __align__(128) uint8_t qg_smem[];
  QgPart p;
  const int32_t bx = qg_group_of(a, blockIdx.x, p);
  const splash_weight& w = p.w;
  const int64_t R = w.rows, K = w.cols, G = K / 64, row_bytes = K / 2;
  const int64_t r0 = int64_t(bx) * kQgRows;
  const int t0 = int(blockIdx.y) * L::kTok;
  const int kb = int(blockIdx.z) * a.kper, ke = min(int(K / KS), kb + a.kper);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wm = warp & 3, wn = warp >> 2;
  const int gq = lane >> 2, c = lane & 3;
  const uint8_t* const wq = static_cast<const uint8_t*>(w.data);

  auto stage = [&](int kt) { return qg_smem + ((kt - kb) % ST) * L::kStage; };
  // Each thread's copies, the same every stage: fixed counts and the addresses of stage 0 worked out once (a
  // generic strided loop here cost more instructions than the multiplications).
  constexpr int kPw = L::kWRow / 16, kPx = KS / 8, kPs = L::kGroups / 2;  // 16-byte / 4-byte pieces a row
  constexpr int kNw = kQgRows * kPw / L::kThreads, kNs = 2 * kQgRows * kPs / L::kThreads, kNx = L::kTok * kPx / L::kThreads;
  static_assert(kNw * L::kThreads == kQgRows * kPw && kNs * L::kThreads == 2 * kQgRows * kPs &&
                    kNx * L::kThreads == L::kTok * kPx,
                "every thread makes the same number of copies");
  const uint8_t* wsrc[kNw];
  uint32_t wdst[kNw];
#pragma unroll
  for (int n = 0; n < kNw; ++n) {  // 128 rows × kPw pieces of 16 bytes, placed by segment (QgTile::seg)
    const int i = tid + n * L::kThreads, r = i / kPw, q = i % kPw;
    wsrc[n] = wq + min(r0 + r, R - 1) * row_bytes + q * 16;
    wdst[n] = r * L::kWRow + L::seg(r, q >> 1) * 32 + (q & 1) * 16;
  }
  const uint16_t* ssrc[kNs];
  uint32_t sdst[kNs];
#pragma unroll
  for (int n = 0; n < kNs; ++n) {  // per row the groups' scales, then their biases, 4 bytes a copy
    const int i = tid + n * L::kThreads, which = i / (kQgRows * kPs), r = (i / kPs) % kQgRows, q = i % kPs;
    ssrc[n] = (which ? w.biases : w.scales) + min(r0 + r, R - 1) * G + 2 * q;
    sdst[n] = L::kW + L::kX + ((which * kQgRows + r) * L::kGroups + 2 * q) * 2;
  }
  const uint16_t* xsrc[kNx];
  uint32_t xdst[kNx];
  bool xok[kNx];
#pragma unroll
  for (int n = 0; n < kNx; ++n) {  // kTok tokens × kPx pieces; piece u of token t at u ^ (t & 1)
    const int i = tid + n * L::kThreads, t = i / kPx, u = i % kPx;
    xok[n] = t0 + t < a.T;
    xsrc[n] = a.x + int64_t(xok[n] ? t0 + t : 0) * K + u * 8;
    xdst[n] = L::kW + t * (2 * KS) + ((u ^ (t & 1)) << 4);
  }
  auto issue_w = [&](int kt) {
    uint8_t* S = stage(kt);
#pragma unroll
    for (int n = 0; n < kNw; ++n) cp16(S + wdst[n], wsrc[n] + int64_t(kt) * L::kWRow, true);
#pragma unroll
    for (int n = 0; n < kNs; ++n) cp4(S + sdst[n], ssrc[n] + int64_t(kt) * L::kGroups, true);
  };
  auto issue_x = [&](int kt) {
    uint8_t* S = stage(kt);
#pragma unroll
    for (int n = 0; n < kNx; ++n) cp16(S + xdst[n], xsrc[n] + int64_t(kt) * KS, xok[n]);
  };
  // the first stages' weights go out before the activations' producer has finished (PDL)
  for (int s = 0; s < ST - 1; ++s)
    if (kb + s < ke) issue_w(kb + s);
  pdl_wait();
  for (int s = 0; s < ST - 1; ++s) {
    if (kb + s < ke) issue_x(kb + s);
    cp_commit();
  }

  float acc[2][NTW][4] = {};

  for (int kt = kb; kt < ke; ++kt) {
    cp_wait<ST - 2>();
    __syncthreads();  // the stage has landed for every thread, and the one refilled below has been read
    if (const int nx = kt + ST - 1; nx < ke) issue_w(nx), issue_x(nx);
    cp_commit();
    const uint8_t* const S = stage(kt);
    const uint8_t* const X = S + L::kW;
    const uint16_t* const SC = reinterpret_cast<const uint16_t*>(X + L::kX);
#pragma unroll 1
    for (int h = 0; h < L::kGroups; ++h) {  // the stage's 64-column groups
      // per 16-row tile: the scale and bias of rows g, g + 8, and their 8 bytes of the group (64-bit loads: a
      // half-warp reads 4 rows × 32 bytes, without bank conflicts given the segment order)
      uint16_t sb[2][4];
      uint2 wv[2][2];
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int ra = wm * 32 + 16 * i + gq, rb = ra + 8;
        sb[i][0] = SC[ra * L::kGroups + h], sb[i][1] = SC[(kQgRows + ra) * L::kGroups + h];
        sb[i][2] = SC[rb * L::kGroups + h], sb[i][3] = SC[(kQgRows + rb) * L::kGroups + h];
        wv[i][0] = *reinterpret_cast<const uint2*>(S + ra * L::kWRow + L::seg(ra, h) * 32 + 8 * c);
        wv[i][1] = *reinterpret_cast<const uint2*>(S + rb * L::kWRow + L::seg(rb, h) * 32 + 8 * c);
      }
      // kLate: the group's products of the raw values 128 + q go to fresh sums, scaled once per group below
      float part[2][NTW][4] = {};  // (unused by the other form)
#pragma unroll
      for (int wi = 0; wi < 2; ++wi) {  // the thread's two words of the group (columns 16c + 8wi ..)
        uint32_t b[NTW][4];
#pragma unroll
        for (int j = 0; j < NTW; ++j) {
          const int t = (wn * NTW + j) * 8 + gq, u = 8 * h + 2 * c + wi;
          const uint4 v = *reinterpret_cast<const uint4*>(X + t * (2 * KS) + ((u ^ (t & 1)) << 4));
          b[j][0] = v.x, b[j][1] = v.y, b[j][2] = v.z, b[j][3] = v.w;
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {  // the warp's two 16-row tiles
          const uint32_t wa = wi ? wv[i][0].y : wv[i][0].x, wb = wi ? wv[i][1].y : wv[i][1].x;
#pragma unroll
          for (int p = 0; p < 2; ++p) {  // k16 steps: nibble pairs 2p and 2p + 1 of the word
            const int sh = 8 * p;
            uint32_t a0 = nib2(wa >> sh), a1 = nib2(wb >> sh);
            uint32_t a2 = nib2(wa >> (sh + 4)), a3 = nib2(wb >> (sh + 4));
            if constexpr (L::kLate) {
#pragma unroll
              for (int j = 0; j < NTW; ++j) mma_bf16(part[i][j], a0, a1, a2, a3, b[j][2 * p], b[j][2 * p + 1]);
            } else {
              const uint32_t sa = pair16(sb[i][0]), ba = pair16(sb[i][1]), sr = pair16(sb[i][2]), br = pair16(sb[i][3]);
              a0 = deq2(a0, sa, ba), a1 = deq2(a1, sr, br), a2 = deq2(a2, sa, ba), a3 = deq2(a3, sr, br);
#pragma unroll
              for (int j = 0; j < NTW; ++j) mma_bf16(acc[i][j], a0, a1, a2, a3, b[j][2 * p], b[j][2 * p + 1]);
            }
          }
        }
      }
      if constexpr (L::kLate) {
        // Σ (s·q + b)·x = s·Σ (128 + q)·x + (b − 128·s)·Σ x, with Σ x of the bf16 activations per (token, group)
        const int64_t gidx = int64_t(kt) * L::kGroups + h;
#pragma unroll
        for (int j = 0; j < NTW; ++j) {
          const int ta = t0 + (wn * NTW + j) * 8 + 2 * c;
          const float xa = ta < a.T ? __ldg(a.xsum + ta * G + gidx) : 0.f;
          const float xb = ta + 1 < a.T ? __ldg(a.xsum + (ta + 1) * G + gidx) : 0.f;
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const float sa = bf16f(sb[i][0]), sr = bf16f(sb[i][2]);
            const float ba = fmaf(-128.f, sa, bf16f(sb[i][1])), br = fmaf(-128.f, sr, bf16f(sb[i][3]));
            acc[i][j][0] = fmaf(ba, xa, fmaf(sa, part[i][j][0], acc[i][j][0]));
            acc[i][j][1] = fmaf(ba, xb, fmaf(sa, part[i][j][1], acc[i][j][1]));
            acc[i][j][2] = fmaf(br, xa, fmaf(sr, part[i][j][2], acc[i][j][2]));
            acc[i][j][3] = fmaf(br, xb, fmaf(sr, part[i][j][3], acc[i][j][3]));
          }
        }
      }
    }
  }
  pdl_trigger();
  const bool split = gridDim.z > 1;
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < NTW; ++j)
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int64_t r = r0 + wm * 32 + 16 * i + gq + (k >= 2 ? 8 : 0);
        const int t = t0 + (wn * NTW + j) * 8 + 2 * c + (k & 1);
        if (r >= R || t >= a.T) continue;
        if (split) a.part[(int64_t(blockIdx.z) * a.T + t) * a.rtot + p.rofs + r] = acc[i][j][k];
        else p.y[t * p.ys + r] = acc[i][j][k];
      }
}

// The splits' partial sums, added in split order, into each weight's output.
__global__ void k_qgemm_sum(QgArgs a, int32_t splits) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  pdl_wait();
  if (i >= int64_t(a.T) * a.rtot) return;
  const int32_t t = int32_t(i / a.rtot), rr = int32_t(i % a.rtot);
  float* y = a.grp.y[0];
  int64_t ys = a.grp.ys[0];
  int32_t r = rr;
#pragma unroll
  for (int k = 1; k < kGemvGroup; ++k)
    if (k < a.grp.n && rr >= a.rofs[k]) y = a.grp.y[k], ys = a.grp.ys[k], r = rr - a.rofs[k];
  float s = 0.f;
  for (int z = 0; z < splits; ++z) s += a.part[(int64_t(z) * a.T + t) * a.rtot + rr];
  y[t * ys + r] = s;
}

// fp32 activations → bf16, each 8 columns in the order 0 4 1 5 2 6 3 7, and (sums not null) the sum of each 64
// rounded values (8 threads: n8 is a multiple of 8 and blocks are whole warps); `vec`: x is 16-byte aligned (else
// 4-byte loads)
__global__ void k_qgemm_x(const float* x, int64_t n8, uint16_t* out, float* sums, bool vec) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  pdl_wait();
  const bool live = i < n8;
  float4 p = make_float4(0.f, 0.f, 0.f, 0.f), q = p;
  if (live && vec) {
    p = __ldg(reinterpret_cast<const float4*>(x) + 2 * i), q = __ldg(reinterpret_cast<const float4*>(x) + 2 * i + 1);
  } else if (live) {
    const float* v = x + 8 * i;
    p = make_float4(__ldg(v), __ldg(v + 1), __ldg(v + 2), __ldg(v + 3));
    q = make_float4(__ldg(v + 4), __ldg(v + 5), __ldg(v + 6), __ldg(v + 7));
  }
  const __nv_bfloat162 o[4] = {__floats2bfloat162_rn(p.x, q.x), __floats2bfloat162_rn(p.y, q.y),
                               __floats2bfloat162_rn(p.z, q.z), __floats2bfloat162_rn(p.w, q.w)};
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += __low2float(o[k]) + __high2float(o[k]);
#pragma unroll
  for (int m = 4; m > 0; m >>= 1) s += __shfl_xor_sync(0xffffffffu, s, m);
  if (!live) return;
  reinterpret_cast<uint4*>(out)[i] = *reinterpret_cast<const uint4*>(o);
  if (sums && (i & 7) == 0) sums[i >> 3] = s;
}

template <int WN, int NTW, int KS, int ST>
bool launch(Ctx* c, QgArgs& a, int64_t K) {
  using L = QgTile<WN, NTW, KS, ST>;
  if (!smem_opt_in<k_qgemm<WN, NTW, KS, ST>>(c, L::kSmem, "qgemm smem")) return false;
  const int nk = int(K / KS), rb = a.grp.first[a.grp.n], tb = int((a.T + L::kTok - 1) / L::kTok);
  // one wave (as many blocks per SM as the registers allow); split the columns when the row × token blocks are
  // fewer (≥ 2 stages a split)
  const int target = c->sms * L::kMinBlocks, blocks = rb * tb;
  int splits = 1;
  if (blocks < target) splits = std::max(1, std::min({target / blocks, nk / 2, 16}));
  a.kper = (nk + splits - 1) / splits;
  splits = (nk + a.kper - 1) / a.kper;
  if (splits > 1) {
    a.part = static_cast<float*>(scratch(c, kQgPart, size_t(splits) * a.T * a.rtot * 4));
    if (!a.part) return false;
  }
  if (!launch_pdl(c, k_qgemm<WN, NTW, KS, ST>, dim3(unsigned(rb), unsigned(tb), unsigned(splits)), dim3(L::kThreads), L::kSmem, a))
    return false;
  if (splits > 1)
    launch_pdl(c, k_qgemm_sum, dim3(blocks_for(int64_t(a.T) * a.rtot, 256)), dim3(256), 0, a, int32_t(splits));
  return true;
}

}  // namespace

void qgemm_act(Ctx* c, const float* x, int64_t n, uint16_t* out, float* sums) {
  const int64_t n8 = n / 8;
  launch_pdl(c, k_qgemm_x, dim3(blocks_for(n8, 256)), dim3(256), 0, x, n8, out, sums,
             reinterpret_cast<uintptr_t>(x) % 16 == 0);
}

void qgemm(Ctx* c, GemvGroup& grp, const float* x, int32_t nt) {
  const int64_t K = grp.w[0].cols;
  // the bf16 activations, then their sums per 64
  auto* xb = static_cast<uint16_t*>(scratch(c, kQgX, size_t(nt) * K * 2 + size_t(nt) * (K / 64) * 4));
  if (!xb) return;
  float* xsum = reinterpret_cast<float*>(xb + int64_t(nt) * K);
  qgemm_act(c, x, int64_t(nt) * K, xb, xsum);
  QgArgs a{};
  a.grp = grp;
  a.x = xb;
  a.xsum = xsum;
  a.T = nt;
  a.grp.first[0] = 0;
  for (int g = 0; g < grp.n; ++g) {
    a.grp.first[g + 1] = a.grp.first[g] + int32_t(blocks_for(grp.w[g].rows, kQgRows));
    a.rofs[g] = a.rtot;
    a.rtot += int32_t(grp.w[g].rows);
  }
  // stage width (CudaOptions::qgemm_ks, for measurement): 128 / 256 columns
  int ks = c->opt.qgemm_ks;
  if (K % ks) ks = 128;
  if (nt <= 8) {
    if (ks == 256) launch<1, 1, 256, 3>(c, a, K);
    else launch<1, 1, 128, 3>(c, a, K);
  } else if (nt <= 16) {
    if (ks == 256) launch<2, 1, 256, 3>(c, a, K);
    else launch<2, 1, 128, 4>(c, a, K);
  } else if (nt <= 32) {
    if (ks == 256) launch<2, 2, 256, 3>(c, a, K);
    else launch<2, 2, 128, 4>(c, a, K);
  } else {
    if (ks == 256) launch<2, 4, 256, 3>(c, a, K);
    else launch<2, 4, 128, 4>(c, a, K);
  }
  SPLASH_LAUNCHED(c, "qgemm");
}

}  // namespace splash::cuda
