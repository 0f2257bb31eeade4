// ARM64 NEON row kernels with the dot-product extension (this file is compiled with
// -march=armv8.2-a+dotprod; chosen at run time only where the CPU has it). The int8 q4 path is a tile of
// 4 rows × up to 4 tokens (weights unpacked once per tile, sdot); every other path is the scalar one.
// Batch invariance as on x86: each (row, token) owns its accumulator and the same instruction sequence.
#include <arm_neon.h>

#include <algorithm>
#include <cmath>

#include "backend/cpu/isa.h"

namespace splash::cpu {
namespace {

constexpr int kTileT = 4;

// q4, 4 rows × T tokens; see tiles_x86_i8.inc for the arguments. One group per step: 32 packed bytes,
// low nibbles against the group's even activations, high nibbles against the odd ones.
template <bool TWO, int T>
void q4_tile_i8(const uint8_t* const* row, const uint16_t* const* sc, const int8_t* xq, const int8_t* x2,
                const float* xs, int64_t xstride, int64_t G, float* out) {
  const uint8x16_t m4 = vdupq_n_u8(0x0F);
  float32x4_t acc[4][T];
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < T; ++t) acc[i][t] = vdupq_n_f32(0.f);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t ge = q4_even_at(g), go = q4_odd_at(g, G);
    for (int i = 0; i < 4; ++i) {
      const uint8x16_t b0 = vld1q_u8(row[i] + g * 32), b1 = vld1q_u8(row[i] + g * 32 + 16);
      const int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(b0, m4)), lo1 = vreinterpretq_s8_u8(vandq_u8(b1, m4));
      const int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)), hi1 = vreinterpretq_s8_u8(vshrq_n_u8(b1, 4));
      const float s_i = bf16_to_f32(sc[i][g]);
      for (int t = 0; t < T; ++t) {
        const int8_t* xt = xq + t * xstride;
        int32x4_t s = vdotq_s32(vdupq_n_s32(0), lo0, vld1q_s8(xt + ge));
        s = vdotq_s32(s, lo1, vld1q_s8(xt + ge + 16));
        s = vdotq_s32(s, hi0, vld1q_s8(xt + go));
        s = vdotq_s32(s, hi1, vld1q_s8(xt + go + 16));
        if constexpr (TWO) {  // 256·Σq·xq + Σq·xq2 (both levels folded, as on x86)
          const int8_t* yt = x2 + t * xstride;
          s = vshlq_n_s32(s, 8);
          s = vdotq_s32(s, lo0, vld1q_s8(yt + ge));
          s = vdotq_s32(s, lo1, vld1q_s8(yt + ge + 16));
          s = vdotq_s32(s, hi0, vld1q_s8(yt + go));
          s = vdotq_s32(s, hi1, vld1q_s8(yt + go + 16));
        }
        acc[i][t] = vfmaq_n_f32(acc[i][t], vcvtq_f32_s32(s), s_i * xs[t * G + g]);
      }
    }
  }
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < T; ++t) out[i * T + t] = vaddvq_f32(acc[i][t]);
}

template <bool TWO>
void q4_tiles(const uint8_t* const* rows, const uint16_t* const* sc, const Act& a, int32_t t, int T, int64_t G, float* o) {
  const int8_t* xq = a.xq + t * a.cols;
  const int8_t* x2 = TWO ? a.xq2 + t * a.cols : nullptr;
  const float* xs = (TWO ? a.xs2 : a.xs) + t * G;
  switch (T) {
    case 1: q4_tile_i8<TWO, 1>(rows, sc, xq, x2, xs, a.cols, G, o); break;
    case 2: q4_tile_i8<TWO, 2>(rows, sc, xq, x2, xs, a.cols, G, o); break;
    case 3: q4_tile_i8<TWO, 3>(rows, sc, xq, x2, xs, a.cols, G, o); break;
    default: q4_tile_i8<TWO, 4>(rows, sc, xq, x2, xs, a.cols, G, o); break;
  }
}

// Σ_g bias_g · xsum_g, in a fixed order
float bias_dot(const uint16_t* bi, const float* xsum, int64_t G) {
  float s = 0.f;
  for (int64_t g = 0; g < G; ++g) s = std::fma(bf16_to_f32(bi[g]), xsum[g], s);
  return s;
}

void rows_neon(const splash_weight* w, const Act& a, int64_t r0, int64_t r1, float* y, int64_t ys) {
  if (w->dtype != SPLASH_Q4 || !a.i8) {
    isa_scalar()->rows(w, a, r0, r1, y, ys);
    return;
  }
  const int64_t C = w->cols, G = C / 64, rb = C / 2;
  const uint8_t* W = static_cast<const uint8_t*>(w->data);
  const bool two = a.xq2 != nullptr;
  // token blocks whose int8 activations fit in ~256 KiB; rows in tiles of four inside a block
  const int64_t bytes = C * (two ? 2 : 1);
  const int32_t TB = int32_t(std::max<int64_t>(kTileT, (int64_t(256) << 10) / bytes / kTileT * kTileT));
  for (int32_t tb = 0; tb < a.nt; tb += TB) {
    const int32_t te = std::min(a.nt, tb + TB);
    for (int64_t r = r0; r < r1; r += 4) {
      const uint8_t* rows[4];
      const uint16_t* sc[4];
      for (int i = 0; i < 4; ++i) {
        const int64_t ri = std::min(r + i, r1 - 1);  // a short tail repeats its last row
        rows[i] = W + ri * rb;
        sc[i] = w->scales + ri * G;
      }
      for (int32_t t0 = tb; t0 < te; t0 += kTileT) {
        const int T = int(std::min<int32_t>(kTileT, te - t0));
        float o[4 * kTileT];
        if (two) q4_tiles<true>(rows, sc, a, t0, T, G, o);
        else q4_tiles<false>(rows, sc, a, t0, T, G, o);
        for (int i = 0; i < 4 && r + i < r1; ++i)
          for (int t = 0; t < T; ++t)
            y[(t0 + t) * ys + r + i] = o[i * T + t] + bias_dot(w->biases + (r + i) * G, a.xsum + (t0 + t) * G, G);
      }
    }
  }
}

const IsaKernels kNeon{"neon-dotprod", rows_neon};

}  // namespace

const IsaKernels* isa_neon_dotprod() { return &kNeon; }

}  // namespace splash::cpu
