#include "backend/cpu/cpu_vision.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace splash::cpu {
namespace {

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;  // sqrt(2/pi)
  return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
}
float gelu_erf(float x) { return 0.5f * x * (1.f + std::erf(x * 0.7071067811865476f)); }

}  // namespace

void layer_norm(void*, const float* x, const float* w, const float* b, int32_t n, int32_t dim, float eps, float* y) {
  for (int32_t t = 0; t < n; ++t) {
    const float* xr = x + int64_t(t) * dim;
    float* yr = y + int64_t(t) * dim;
    float mean = 0.f;
    for (int d = 0; d < dim; ++d) mean += xr[d];
    mean /= float(dim);
    float var = 0.f;
    for (int d = 0; d < dim; ++d) var += (xr[d] - mean) * (xr[d] - mean);
    const float inv = 1.f / std::sqrt(var / float(dim) + eps);
    for (int d = 0; d < dim; ++d) yr[d] = (xr[d] - mean) * inv * w[d] + b[d];
  }
}

void add_bias(void*, float* y, const float* b, int32_t n, int32_t dim) {
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < dim; ++r) y[t * dim + r] += b[r];
}

void gelu(void*, float* x, int64_t n, int32_t tanh_approx) {
  if (tanh_approx)
    for (int64_t i = 0; i < n; ++i) x[i] = gelu_tanh(x[i]);
  else
    for (int64_t i = 0; i < n; ++i) x[i] = gelu_erf(x[i]);
}

void rope_table(void*, float* x, int32_t nt, int64_t row_stride, int32_t nh, int64_t head_stride, int32_t hd,
                const float* cos, const float* sin) {
  const int half = hd / 2;
  for (int32_t i = 0; i < nt; ++i)
    for (int32_t h = 0; h < nh; ++h) {
      float* v = x + int64_t(i) * row_stride + int64_t(h) * head_stride;
      const float* cr = cos + int64_t(i) * hd;
      const float* sr = sin + int64_t(i) * hd;
      for (int j = 0; j < half; ++j) {
        const float a = v[j], b = v[j + half];
        v[j] = a * cr[j] - b * sr[j];
        v[j + half] = b * cr[j + half] + a * sr[j + half];
      }
    }
}

void seg_attention_on(ThreadPool& pool, const splash_seg_attn_args* a) {
  const int nh = a->n_heads, hd = a->head_dim, seg = a->segment;
  const int64_t st = a->stride, ow = int64_t(nh) * hd;
  pool.parallel_tasks(int64_t(a->n_tokens) * nh, [&](int64_t task) {
    const int i = int(task / nh), h = int(task % nh);
    const int f0 = (i / seg) * seg, len = std::min(seg, a->n_tokens - f0);
    const float* q = a->q + int64_t(i) * st + int64_t(h) * hd;
    std::vector<float> p(len);
    float mx = -INFINITY;
    for (int j = 0; j < len; ++j) {
      const float* k = a->k + int64_t(f0 + j) * st + int64_t(h) * hd;
      float s = 0.f;
      for (int d = 0; d < hd; ++d) s += q[d] * k[d];
      p[j] = s * a->scale;
      mx = std::max(mx, p[j]);
    }
    float den = 0.f;
    for (int j = 0; j < len; ++j) den += (p[j] = std::exp(p[j] - mx));
    float* out = a->out + int64_t(i) * ow + int64_t(h) * hd;
    std::fill(out, out + hd, 0.f);
    for (int j = 0; j < len; ++j) {
      const float* vv = a->v + int64_t(f0 + j) * st + int64_t(h) * hd;
      const float wgt = p[j] / den;
      for (int d = 0; d < hd; ++d) out[d] += wgt * vv[d];
    }
  });
}

}  // namespace splash::cpu
