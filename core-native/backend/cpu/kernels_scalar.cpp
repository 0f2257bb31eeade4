// Portable reference row kernels (also the ARM64 path). Compiled with baseline flags.
#include <cstring>

#include "backend/cpu/isa.h"

namespace splash::cpu {
namespace {

inline float ldw(const splash_weight* w, int64_t r, int64_t c) {
  if (w->dtype == SPLASH_F32) return static_cast<const float*>(w->data)[r * w->cols + c];
  return bf16_to_f32(static_cast<const uint16_t*>(w->data)[r * w->cols + c]);
}

// Σ q·x over group g (integer, exact); x: the token's int8 activations in kernel layout (isa.h).
inline int32_t idot(const uint8_t* row, const int8_t* x, int64_t g, int64_t G, bool q4) {
  int32_t d = 0;
  if (q4) {
    const uint8_t* b = row + g * 32;
    const int8_t* xe = x + q4_even_at(g);
    const int8_t* xo = x + q4_odd_at(g, G);
    for (int j = 0; j < 32; ++j) d += int32_t(b[j] & 15) * xe[j] + int32_t(b[j] >> 4) * xo[j];
  } else {
    const uint8_t* b = row + g * 64;
    for (int j = 0; j < 64; ++j) d += int32_t(b[j]) * x[g * 64 + j];
  }
  return d;
}

// Each (row, token) is computed on its own: the result cannot depend on the batch or the row split.
void rows_scalar(const splash_weight* w, const Act& a, int64_t r0, int64_t r1, float* y, int64_t ys) {
  const int64_t C = w->cols;
  const int64_t G = C / 64;
  for (int64_t r = r0; r < r1; ++r) {
    for (int32_t t = 0; t < a.nt; ++t) {
      float acc = 0.f;
      if (w->dtype == SPLASH_F32 || w->dtype == SPLASH_BF16) {
        const float* x = a.xf + t * C;
        for (int64_t c = 0; c < C; ++c) acc += ldw(w, r, c) * x[c];
      } else {
        const bool q4 = w->dtype == SPLASH_Q4;
        const uint8_t* row = static_cast<const uint8_t*>(w->data) + r * (q4 ? C / 2 : C);
        for (int64_t g = 0; g < G; ++g) {
          const float s = bf16_to_f32(w->scales[r * G + g]);
          const float bi = bf16_to_f32(w->biases[r * G + g]);
          const int64_t tg = t * G + g;
          if (a.i8) {
            acc += s * a.xs[tg] * float(idot(row, a.xq + t * C, g, G, q4)) + bi * a.xsum[tg];
            if (a.xq2) acc += s * a.xs2[tg] * float(idot(row, a.xq2 + t * C, g, G, q4));
          } else {
            const float* x = a.xf + t * C + g * 64;
            float d = 0.f;
            if (q4) {
              const uint8_t* b = row + g * 32;
              for (int j = 0; j < 32; ++j) d += float(b[j] & 15) * x[j] + float(b[j] >> 4) * x[32 + j];
            } else {
              const uint8_t* b = row + g * 64;
              for (int j = 0; j < 64; ++j) d += float(b[j]) * x[j];
            }
            acc += s * d + bi * a.xsum[tg];
          }
        }
      }
      y[t * ys + r] = acc;
    }
  }
}

const IsaKernels kScalar{"scalar", rows_scalar};

}  // namespace

const IsaKernels* isa_scalar() { return &kScalar; }

}  // namespace splash::cpu
