// The int8x2 GEMV of q4 / q8 weights on the integer tensor cores, for launches of SPLASH_GEMV_MMA (default 8) to
// 8 tokens (verify blocks, batched decodes, the 8-token launches of longer GEMV steps): mma.m16n8k32 with the
// weights as A (u8: q4 nibbles 0..15 or q8 bytes, 16 rows) and the activations as B (s8: one int8 level, 8 token
// columns). Per 32-column chunk each (row, token) gets the two integer dot products the dp4a GEMV makes (level 1
// and level 2), exact in int32, and the same fp32 scaling, s·sx·(256·d1 + d2) + b·Σx; only the order of the fp32
// sums differs (with SPLASH_GEMV_MMA=1 every token count takes this kernel and a row's bits do not depend on it).
// The dp4a form does 2·NT dp4a per weight word and reloads the activations per row, so its cost grows with the
// token count; here one MMA pair covers 16 rows × 8 tokens × 32 columns. Measured on the 8-layer packages (H200):
// 8-token steps 3.19 → 2.73 ms (27B shape) and 1.80 → 1.64 ms (35B-A3B); at 4 tokens 2.03 → 2.26 ms and at one
// token 1.29 → 1.99 ms on the 27B shape, hence the default threshold. It does not stream at the copy rate yet.
//
// Block = 4 warps over 16 rows; each warp takes a contiguous run of rounds — 128 bytes of every row (q4: 256
// columns = 4 groups of 64 with one weight scale each; q8: 128 columns), the activations of those columns (both
// levels, the step's tokens) and their chunks' scales and sums — copied with cp.async into the warp's two stages
// in whole lines (reading 4-byte fragments straight from 16 rows left the load unit the bottleneck: ~1 TB/s). The
// warps' partial sums meet in shared memory in a fixed order.
// Fragments (PTX m16n8k32, g = lane / 4, c = lane % 4): A a0 = row g, k 4c..4c+3; a1 = row g + 8, same k; a2, a3 =
// k + 16. B b0 = k 4c..4c+3, b1 = k + 16, of token column g. D: rows g, g + 8 × tokens 2c, 2c + 1.
// The k order inside a chunk is chosen so each thread reads whole words: q4, thread c takes word c of the chunk's
// row (8 values): k 4c.. = its low nibbles (values 8c + 0, 2, 4, 6), k 16 + 4c.. = its high nibbles (8c + 1, 3,
// 5, 7), which are activation bytes 8c..8c+3 and 8c+4..8c+7 in the interleaved q4 activation layout; q8, natural
// order (bytes 4c.. and 16 + 4c.. of the chunk on both sides).
#include "backend/cuda/gemv_q.cuh"
#include "backend/cuda/cp_async.cuh"

namespace splash::cuda {
namespace {

constexpr int kMmaWarps = 4, kMmaRows = 16, kRowPitch = 36;  // a staged row: 128 bytes + 16 of padding

__device__ __forceinline__ void mma_u8s8(int (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// A round: 128 bytes of each of the 16 rows (q4: 256 columns = 8 chunks = 4 groups; q8: 128 = 4 chunks = 2 groups),
// the activations of those columns (both levels, the step's tokens) and their chunks' scales and sums, copied into
// the warp's stage in whole lines; the warp's columns are a contiguous run of rounds, two stages in flight.
template <int BITS>
struct MmaRound {
  static constexpr int kCols = 1024 / BITS, kCh = kCols / 32, kGr = kCh / 2;
  static constexpr int kXW = BITS == 4 ? 72 : 36;  // words per staged token row: ≡ 8 / 4 mod 32 (no bank conflicts)
  static constexpr int kW = 0, kX = kW + kMmaRows * kRowPitch, kS = kX + 2 * 8 * kXW, kWords = kS + 2 * 8 * kCh;
  static constexpr size_t kBytes = size_t(kMmaWarps) * 2 * kWords * 4;
};

template <int BITS>
__global__ void __launch_bounds__(32 * kMmaWarps) k_gemv_q_mma(GemvGroup grp, const int8_t* xq, const float* xs,
                                                               const float* xsum, int64_t lvl2, int32_t nt) {
  using L = MmaRound<BITS>;
  extern __shared__ __align__(16) uint32_t mma_smem[];
  __shared__ float red[kMmaWarps][32][4];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, c = lane & 3;
  uint32_t* const stage0 = mma_smem + warp * 2 * L::kWords;
  splash_weight w;
  float* y;
  int64_t ys;
  const int32_t bx = gemv_group_of(grp, blockIdx.x, w, y, ys);
  const int64_t R = w.rows, C = w.cols, nch = C / 32, G = C / 64, row_bytes = C * BITS / 8;
  const int64_t rbase = int64_t(bx) * kMmaRows;
  const int64_t ra = min(rbase + g, R - 1), rb = min(rbase + g + 8, R - 1);
  const uint8_t* const wbase = static_cast<const uint8_t*>(w.data);
  const int nr = int((row_bytes + 127) / 128), rd0 = warp * nr / kMmaWarps, rd1 = (warp + 1) * nr / kMmaWarps;
  const int ntok = min(nt, 8);
  pdl_wait();
  auto issue = [&](int rd, int st) {
    uint32_t* const W = stage0 + st * L::kWords + L::kW;
    uint32_t* const X = stage0 + st * L::kWords + L::kX;
    uint32_t* const S = stage0 + st * L::kWords + L::kS;
    const int64_t off = int64_t(rd) * 128 + (lane & 7) * 16;
#pragma unroll
    for (int k = 0; k < 4; ++k) {  // rows 4k .. 4k + 3, a line each
      const int r = 4 * k + (lane >> 3);
      cp16(W + r * kRowPitch + (lane & 7) * 4, wbase + min(rbase + r, R - 1) * row_bytes + min(off, row_bytes - 16),
           off < row_bytes);
    }
    constexpr int kPieces = L::kCols / 16;
    for (int i = lane; i < 2 * ntok * kPieces; i += 32) {
      const int lv = i / (ntok * kPieces), t = (i / kPieces) % ntok, q = i % kPieces;
      const int64_t col = int64_t(rd) * L::kCols + q * 16;
      cp16(X + (lv * 8 + t) * L::kXW + q * 4, xq + (lv ? lvl2 : 0) + int64_t(t) * C + min(col, C - 16), col < C);
    }
    for (int i = lane; i < 2 * ntok * L::kCh; i += 32) {
      const int ar = i / (ntok * L::kCh), t = (i / L::kCh) % ntok, j = i % L::kCh;
      const int64_t ch = int64_t(rd) * L::kCh + j;
      cp4(S + (ar * 8 + t) * L::kCh + j, (ar ? xsum : xs) + t * nch + min(ch, nch - 1), ch < nch);
    }
    cp_commit();
  };
  const int t0 = 2 * c, t1 = 2 * c + 1;  // this thread's output tokens; its B column is token g
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  if (rd0 < rd1) issue(rd0, 0);
  for (int rd = rd0; rd < rd1; ++rd) {
    const int st = (rd - rd0) & 1;
    if (rd + 1 < rd1) issue(rd + 1, st ^ 1);
    else cp_commit();  // an empty group keeps one group behind the current one
    cp_wait<1>();
    __syncwarp();
    const uint32_t* const W = stage0 + st * L::kWords + L::kW;
    const uint32_t* const X = stage0 + st * L::kWords + L::kX;
    const float* const S = reinterpret_cast<const float*>(stage0 + st * L::kWords + L::kS);
    // the round's weight scales: lane (g, c) reads group c of rows g and g + 8, the others take them by shuffle
    const int64_t p0 = int64_t(rd) * L::kGr;
    float ls[4] = {0.f, 0.f, 0.f, 0.f};
    if (c < L::kGr && p0 + c < G) {
      ls[0] = bf16f(w.scales[ra * G + p0 + c]), ls[1] = bf16f(w.biases[ra * G + p0 + c]);
      ls[2] = bf16f(w.scales[rb * G + p0 + c]), ls[3] = bf16f(w.biases[rb * G + p0 + c]);
    }
#pragma unroll
    for (int j = 0; j < L::kGr; ++j) {
      float sc[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) sc[k] = __shfl_sync(0xffffffffu, ls[k], (g << 2) | j);
      if (p0 + j >= G) break;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int cl = 2 * j + h;  // chunk of the round
        uint32_t a0, a1, a2, a3, b1[2] = {0u, 0u}, b2[2] = {0u, 0u};
        if constexpr (BITS == 4) {
          const uint32_t ua = W[g * kRowPitch + 4 * cl + c], ub = W[(g + 8) * kRowPitch + 4 * cl + c];
          a0 = ua & 0x0F0F0F0Fu, a1 = ub & 0x0F0F0F0Fu, a2 = (ua >> 4) & 0x0F0F0F0Fu, a3 = (ub >> 4) & 0x0F0F0F0Fu;
          if (g < ntok) {
            const uint2 v1 = *reinterpret_cast<const uint2*>(X + g * L::kXW + 8 * cl + 2 * c);
            const uint2 v2 = *reinterpret_cast<const uint2*>(X + (8 + g) * L::kXW + 8 * cl + 2 * c);
            b1[0] = v1.x, b1[1] = v1.y, b2[0] = v2.x, b2[1] = v2.y;
          }
        } else {
          a0 = W[g * kRowPitch + 8 * cl + c], a2 = W[g * kRowPitch + 8 * cl + 4 + c];
          a1 = W[(g + 8) * kRowPitch + 8 * cl + c], a3 = W[(g + 8) * kRowPitch + 8 * cl + 4 + c];
          if (g < ntok) {
            b1[0] = X[g * L::kXW + 8 * cl + c], b1[1] = X[g * L::kXW + 8 * cl + 4 + c];
            b2[0] = X[(8 + g) * L::kXW + 8 * cl + c], b2[1] = X[(8 + g) * L::kXW + 8 * cl + 4 + c];
          }
        }
        int d1[4] = {0, 0, 0, 0}, d2[4] = {0, 0, 0, 0};
        mma_u8s8(d1, a0, a1, a2, a3, b1[0], b1[1]);
        mma_u8s8(d2, a0, a1, a2, a3, b2[0], b2[1]);
        const float sx0 = t0 < ntok ? S[t0 * L::kCh + cl] * (1.f / 256.f) : 0.f, sum0 = t0 < ntok ? S[(8 + t0) * L::kCh + cl] : 0.f;
        const float sx1 = t1 < ntok ? S[t1 * L::kCh + cl] * (1.f / 256.f) : 0.f, sum1 = t1 < ntok ? S[(8 + t1) * L::kCh + cl] : 0.f;
        acc[0] += sc[0] * sx0 * float(256 * d1[0] + d2[0]) + sc[1] * sum0;
        acc[1] += sc[0] * sx1 * float(256 * d1[1] + d2[1]) + sc[1] * sum1;
        acc[2] += sc[2] * sx0 * float(256 * d1[2] + d2[2]) + sc[3] * sum0;
        acc[3] += sc[2] * sx1 * float(256 * d1[3] + d2[3]) + sc[3] * sum1;
      }
    }
    __syncwarp();  // the stage is read before the next round's copies land in it
  }
#pragma unroll
  for (int k = 0; k < 4; ++k) red[warp][lane][k] = acc[k];
  __syncthreads();
  if (warp != 0) return;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    float v = red[0][lane][k];
#pragma unroll
    for (int i = 1; i < kMmaWarps; ++i) v += red[i][lane][k];
    const int t = k & 1 ? t1 : t0;
    const int64_t r = rbase + g + (k >= 2 ? 8 : 0);
    if (t < nt && r < R) y[t * ys + r] = v;
  }
}

template <int BITS>
void launch_mma(Ctx* c, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2, int32_t nt) {
  if (!smem_opt_in<k_gemv_q_mma<BITS>>(c, MmaRound<BITS>::kBytes, "gemv_mma smem")) return;
  launch_pdl(c, k_gemv_q_mma<BITS>, dim3(unsigned(grp.first[grp.n])), dim3(32 * kMmaWarps), MmaRound<BITS>::kBytes, grp,
             xq, xs, xsum, lvl2, nt);
}

}  // namespace

bool gemv_q_mma(Ctx* c, int bits, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2,
                int32_t nt) {
  grp.first[0] = 0;
  for (int g = 0; g < grp.n; ++g) grp.first[g + 1] = grp.first[g] + int32_t(blocks_for(grp.w[g].rows, kMmaRows));
  if (bits == 4) launch_mma<4>(c, grp, xq, xs, xsum, lvl2, nt);
  else launch_mma<8>(c, grp, xq, xs, xsum, lvl2, nt);
  return true;
}

}  // namespace splash::cuda
