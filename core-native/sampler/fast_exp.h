// exp for the sampler's weight sums: Cody–Waite reduction and a degree-6 polynomial, ~2e-7 relative error,
// written so that compilers vectorise loops over it. Arguments below −87 give 0 (−inf included).
#pragma once
#include <cstdint>
#include <cstring>

namespace splash::sampler {

inline float fast_exp(float x) {
  const bool zero = !(x >= -87.f);  // also NaN
  x = x < -87.f ? -87.f : (x > 88.f ? 88.f : x);
  const float t = x * 1.44269504088896341f;
  const float n = (t + 12582912.f) - 12582912.f;  // round to nearest (|t| < 2^22)
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187045e-06f;
  float p = 1.f / 720.f;
  p = p * r + 1.f / 120.f;
  p = p * r + 1.f / 24.f;
  p = p * r + 1.f / 6.f;
  p = p * r + 0.5f;
  p = p * r + 1.f;
  p = p * r + 1.f;
  const int32_t bits = (int32_t(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return zero ? 0.f : p * scale;
}

// Σ fast_exp((v[i] − m) · inv) over [0, n), accumulated in blocks (float inside a block, double across).
// Terms below `floor` (min-p) are left out (sampler/weights.cpp).
double exp_sum(const float* v, int n, float m, float inv, float floor = 0.f);
// The same weights stored in w[0, n) (0 below `floor`); returns their sum.
double exp_weights(const float* v, int n, float m, float inv, float floor, float* w);
// Per 32-token word of the mask `allowed` (bit (id & 31) of word id >> 5), the sum of the weights w its set bits
// select, in ws[word] (float, summed inside the word); returns the sum over the words (double).
double allowed_word_sums(const float* w, const uint32_t* allowed, int n, float* ws);
// Zeroes the weights of the elements after `cut` in candidate order (value descending, id ascending): v[i] < cut_v,
// or v[i] == cut_v with i > cut_id.
void zero_after_cut(const float* v, int n, float cut_v, int32_t cut_id, float* w);

}  // namespace splash::sampler
