// The sampler's passes over the whole vocabulary (weights and their sum). x86-64 builds carry an AVX2+FMA
// clone besides the baseline, chosen when the library loads (GCC function multiversioning).
#include "sampler/fast_exp.h"

namespace splash::sampler {

#if defined(__x86_64__) && defined(__GNUC__)
#define SPLASH_VOCAB_PASS __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define SPLASH_VOCAB_PASS
#endif

SPLASH_VOCAB_PASS double exp_sum(const float* v, int n, float m, float inv, float floor) {
  double total = 0;
  for (int b = 0; b < n; b += 512) {
    const int e = n - b < 512 ? n : b + 512;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int i = b; i < e; ++i) {
      const float w = fast_exp((v[i] - m) * inv);
      s += w >= floor ? w : 0.f;
    }
    total += s;
  }
  return total;
}

SPLASH_VOCAB_PASS double exp_weights(const float* v, int n, float m, float inv, float floor, float* w) {
  double total = 0;
  for (int b = 0; b < n; b += 512) {
    const int e = n - b < 512 ? n : b + 512;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int i = b; i < e; ++i) {
      const float x = fast_exp((v[i] - m) * inv);
      w[i] = x >= floor ? x : 0.f;
      s += w[i];
    }
    total += s;
  }
  return total;
}

SPLASH_VOCAB_PASS double allowed_word_sums(const float* w, const uint32_t* allowed, int n, float* ws) {
  double total = 0;
  const int full = n / 32;
  for (int word = 0; word < full; ++word) {
    const uint32_t bits = allowed[word];
    float s = 0.f;
    if (bits != 0) {
      const float* x = w + size_t(word) * 32;
#pragma omp simd reduction(+ : s)
      for (int j = 0; j < 32; ++j) s += (bits >> j) & 1u ? x[j] : 0.f;
    }
    ws[word] = s;
    total += s;
  }
  if (full * 32 < n) {
    const uint32_t bits = allowed[full];
    float s = 0.f;
    for (int i = full * 32; i < n; ++i) s += (bits >> (i & 31)) & 1u ? w[i] : 0.f;
    ws[full] = s;
    total += s;
  }
  return total;
}

SPLASH_VOCAB_PASS void zero_after_cut(const float* v, int n, float cut_v, int32_t cut_id, float* w) {
#pragma omp simd
  for (int i = 0; i < n; ++i) w[i] = v[i] < cut_v || (v[i] == cut_v && i > cut_id) ? 0.f : w[i];
}

}  // namespace splash::sampler
