// Causal attention on the CPU, tiled for long prompts and shaped for decode. A task is one KV head and a block of
// query tokens, i.e. every query head that shares that KV head. Keys are visited in blocks of kAttnKeyBlock absolute
// positions with an online softmax, so each K/V block is read once per task and reused by all its rows while it sits
// in cache (reading the whole cache per query head made a 32K prefill memory-bound).
//
// Per block the task transposes its keys once ([d][key], kt), so a row's scores are kAttnKeyBlock lanes that one
// broadcast of q[d] and one multiply-add per 16 keys advance: no horizontal sum per key. The weights are
// sampler/fast_exp.h's exp over those lanes, and a row's output stays in registers (head_dim 64, 128 or 256) while
// the block's values are added to it.
//
// Each query row does the same arithmetic in the same order whatever else shares its task (lane j of a row's scores
// sums over d in order; a row reads only the lanes of the keys it sees), so a token's output does not depend on how
// a step was batched (a verify row equals a single decode bit for bit; a prompt prefilled in chunks equals it decoded).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "sampler/fast_exp.h"

namespace splash::cpu {

namespace {

constexpr int32_t kB = kAttnKeyBlock;

// dst[d·ds + i] = src[i·ss + d] for a 16 × 16 block, in registers: four butterfly stages, each swapping bit s of the
// row and column index (GCC vector extensions, so every clone gets its own instructions).
typedef float v16 __attribute__((vector_size(64)));

template <int S>
[[gnu::always_inline]] inline void butterfly(v16* r) {
  for (int i = 0; i < 16; ++i) {
    if (i & S) continue;
    const v16 a = r[i], b = r[i + S];
    if constexpr (S == 1) {
      r[i] = __builtin_shufflevector(a, b, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
      r[i + S] = __builtin_shufflevector(a, b, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
    } else if constexpr (S == 2) {
      r[i] = __builtin_shufflevector(a, b, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29);
      r[i + S] = __builtin_shufflevector(a, b, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
    } else if constexpr (S == 4) {
      r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 16, 17, 18, 19, 8, 9, 10, 11, 24, 25, 26, 27);
      r[i + S] = __builtin_shufflevector(a, b, 4, 5, 6, 7, 20, 21, 22, 23, 12, 13, 14, 15, 28, 29, 30, 31);
    } else {
      r[i] = __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
      r[i + S] = __builtin_shufflevector(a, b, 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29, 30, 31);
    }
  }
}

[[gnu::always_inline]] inline void transpose16(const float* src, int64_t ss, float* dst, int64_t ds) {
  v16 r[16];
  for (int i = 0; i < 16; ++i) std::memcpy(&r[i], src + i * ss, sizeof(v16));
  butterfly<1>(r);
  butterfly<2>(r);
  butterfly<4>(r);
  butterfly<8>(r);
  for (int i = 0; i < 16; ++i) std::memcpy(dst + i * ds, &r[i], sizeof(v16));
}

// kt[d·kB + j] = kb[j·kvs + d] for keys j < nb and d < hd: 16 × 16 blocks in registers, the edges one by one.
[[gnu::always_inline]] inline void transpose_keys(const float* kb, int64_t kvs, int32_t nb, int32_t hd, float* kt) {
  const int32_t jb = nb / 16 * 16, db = hd / 16 * 16;
  for (int32_t j = 0; j < jb; j += 16)
    for (int32_t d = 0; d < db; d += 16) transpose16(kb + int64_t(j) * kvs + d, kvs, kt + int64_t(d) * kB + j, kB);
  for (int32_t j = 0; j < nb; ++j)
    for (int32_t d = j < jb ? db : 0; d < hd; ++d) kt[int64_t(d) * kB + j] = kb[int64_t(j) * kvs + d];
}

struct RowState {
  float* acc;  // [hd] the unnormalised output
  float* mx;   // the running maximum score
  float* den;  // the running sum of weights
};

// One query row over keys [p0, p0 + n) of a block: kt holds the block's keys transposed ([d][kB]), v the values
// (row stride kvs, already offset to the KV head). HD > 0: the head dimension as a constant (the output in
// registers); 0: `hd` at run time.
template <int32_t HD>
[[gnu::always_inline]] inline void row_block(const float* __restrict q, const float* __restrict kt,
                                             const float* __restrict v, int64_t kvs, int32_t n, int32_t hd,
                                             float scale, const RowState& st) {
  const int32_t D = HD > 0 ? HD : hd;
  float s[kB];
  for (int32_t j = 0; j < kB; ++j) s[j] = 0.f;
  for (int32_t d = 0; d < D; ++d) {
    const float qd = q[d];
    const float* k = kt + int64_t(d) * kB;
#pragma omp simd
    for (int32_t j = 0; j < kB; ++j) s[j] += qd * k[j];
  }
  float m = *st.mx;
  for (int32_t j = 0; j < n; ++j) {
    s[j] *= scale;
    m = std::max(m, s[j]);
  }
  float w[kB];
#pragma omp simd
  for (int32_t j = 0; j < kB; ++j) w[j] = sampler::fast_exp(s[j] - m);
  const float corr = sampler::fast_exp(*st.mx - m);  // 0 on the first block (mx = −inf), 1 when the max holds
  float sum = *st.den * corr;
  for (int32_t j = 0; j < n; ++j) sum += w[j];
  if constexpr (HD > 0) {
    float o[HD];
#pragma omp simd
    for (int32_t d = 0; d < HD; ++d) o[d] = st.acc[d] * corr;
    for (int32_t j = 0; j < n; ++j) {
      const float wj = w[j];
      const float* vj = v + int64_t(j) * kvs;
#pragma omp simd
      for (int32_t d = 0; d < HD; ++d) o[d] += wj * vj[d];
    }
#pragma omp simd
    for (int32_t d = 0; d < HD; ++d) st.acc[d] = o[d];
  } else {
    float* o = st.acc;
    for (int32_t d = 0; d < D; ++d) o[d] *= corr;
    for (int32_t j = 0; j < n; ++j) {
      const float wj = w[j];
      const float* vj = v + int64_t(j) * kvs;
#pragma omp simd
      for (int32_t d = 0; d < D; ++d) o[d] += wj * vj[d];
    }
  }
  *st.mx = m;
  *st.den = sum;
}

// inlined into each clone of attention_tile, so every ISA gets its own copy
template <int32_t HD>
[[gnu::always_inline]] inline void tile(const splash_attn_args* a, int32_t kvh, int32_t t0, int32_t t1) {
  const int32_t hd = a->head_dim, G = a->n_heads / a->n_kv_heads;
  const int64_t kvs = int64_t(a->n_kv_heads) * hd;
  const int32_t rows = (t1 - t0) * G;
  static thread_local std::vector<float> acc, mx, den, kt;
  acc.assign(size_t(rows) * hd, 0.f);
  mx.assign(size_t(rows), -INFINITY);
  den.assign(size_t(rows), 0.f);
  kt.resize(size_t(hd) * kB);
  const int32_t end = a->start + t1;  // the last token sees keys [0, end)
  for (int32_t p0 = 0; p0 < end; p0 += kB) {
    // the block's keys, transposed; lanes past the last key any row sees are zero
    const int32_t nb = std::min(kB, end - p0);
    const float* kb = a->k_cache + int64_t(p0) * kvs + int64_t(kvh) * hd;
    transpose_keys(kb, kvs, nb, hd, kt.data());
    if (nb < kB)
      for (int32_t d = 0; d < hd; ++d) std::fill_n(kt.data() + size_t(d) * kB + nb, kB - nb, 0.f);
    const float* vb = a->v_cache + int64_t(p0) * kvs + int64_t(kvh) * hd;
    for (int32_t t = t0; t < t1; ++t) {
      const int32_t npos = a->start + t + 1;
      if (p0 >= npos) continue;
      const int32_t n = std::min(kB, npos - p0);
      for (int32_t g = 0; g < G; ++g) {
        const int32_t r = (t - t0) * G + g;
        const float* q = a->q + t * a->q_stride + int64_t(kvh * G + g) * hd;
        row_block<HD>(q, kt.data(), vb, kvs, n, hd, a->scale, {&acc[size_t(r) * hd], &mx[size_t(r)], &den[size_t(r)]});
      }
    }
  }
  for (int32_t t = t0; t < t1; ++t)
    for (int32_t g = 0; g < G; ++g) {
      const int32_t r = (t - t0) * G + g;
      const float inv = 1.f / den[size_t(r)];
      float* out = a->out + int64_t(t) * a->n_heads * hd + int64_t(kvh * G + g) * hd;
      for (int32_t d = 0; d < hd; ++d) out[d] = acc[size_t(r) * hd + d] * inv;
    }
}

}  // namespace

SPLASH_CLONES void attention_tile(const splash_attn_args* a, int32_t kvh, int32_t t0, int32_t t1) {
  switch (a->head_dim) {
    case 64: return tile<64>(a, kvh, t0, t1);
    case 128: return tile<128>(a, kvh, t0, t1);
    case 256: return tile<256>(a, kvh, t0, t1);
    default: return tile<0>(a, kvh, t0, t1);
  }
}

}  // namespace splash::cpu
