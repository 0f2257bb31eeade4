#include "backend/cpu/cpu_graph.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "sampler/sampler.h"

namespace splash::cpu {

void copy_to_device(void*, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }
void copy_to_host(void*, void* dst, const void* src, size_t bytes) { std::memcpy(dst, src, bytes); }

void argmax_rows(void*, const float* x, int32_t rows, int64_t width, int32_t* out) {
  for (int32_t r = 0; r < rows; ++r) out[r] = sampler::argmax(x + r * width, int(width));  // the host sampler's rule
}

void sample_rows(void*, float* x, int64_t width, const splash_sample_desc* rows, int32_t n, const int32_t* ints, int64_t,
                 int32_t* out) {
  // the host sampler itself, row by row (what the model does without this slot)
  sampler::Scratch s;
  const int V = int(width);
  for (int32_t j = 0; j < n; ++j) {
    const splash_sample_desc& d = rows[j];
    sampler::Request req;
    req.params.temperature = d.temperature;
    req.params.top_k = d.top_k;
    req.params.top_p = d.top_p;
    req.params.min_p = d.min_p;
    req.params.repetition = d.repetition;
    req.params.frequency = d.frequency;
    req.params.presence = d.presence;
    for (int32_t k = 0; k < d.n_penalized; ++k) {
      req.penalties.ids.push_back(ints[2 * (d.pen_at + k)]);
      req.penalties.counts.push_back(ints[2 * (d.pen_at + k) + 1]);
    }
    sampler::Row row;
    if (d.mask_at >= 0) {
      const auto* w = reinterpret_cast<const uint32_t*>(ints + d.mask_at);
      row.allowed.assign(w, w + (width + 31) / 32);
    }
    row.uniform = d.uniform;
    if (d.mask_after && d.mask_at >= 0) row.retry = d.retry;
    row.draft = d.draft;
    row.accept = d.accept;
    const float* v = x + d.row * width;
    int32_t token = -1;
    try {
      if (d.draft >= 0 && d.temperature > 0.f) {
        token = sampler::verify_row(v, V, req, row, d.q, s, nullptr, 0).token;
      } else if (d.q_out && d.temperature > 0.f) {
        const float* a = sampler::adjust(v, V, req, row, s);
        const int32_t best = sampler::argmax(a, V);
        if (best >= 0) {
          sampler::distribution(a, V, best, req.params, s, s.probs);
          std::memcpy(d.q_out, s.probs.data(), size_t(V) * 4);
          token = sampler::draw_probs(d.q_out, V, d.uniform);
        }
      } else {
        token = sampler::sample_row(v, V, req, row, s).token;
      }
    } catch (const std::exception&) {
      token = -1;  // nothing above −inf
    }
    out[d.row] = token;
  }
}

void copy2d(void*, void* dst, size_t dp, const void* src, size_t sp, size_t width, size_t height) {
  for (size_t r = 0; r < height; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dp, static_cast<const char*>(src) + r * sp, width);
}

void memset_zero(void*, void* dst, size_t bytes) { std::memset(dst, 0, bytes); }

void embed(void*, const splash_weight* w, const int32_t* tokens, int32_t n, float* out) {
  for (int32_t i = 0; i < n; ++i) dequant_row_ref(w, tokens[i], out + int64_t(i) * w->cols);
}

void add(void*, float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void gdn_gates(void*, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv) {
  for (int64_t t = 0; t < n; ++t)
    for (int h = 0; h < nv; ++h) {
      const int64_t i = t * nv + h;
      b[i] = sigmoid(b[i]);
      const float s = a[i] + dt_bias[h];
      const float sp = s > 20.f ? s : std::log1p(std::exp(s));
      a[i] = -std::exp(A_log[h]) * sp;
    }
}

void sigmoid_gate(void*, float* x, int64_t xp, const float* g, int64_t gp, int32_t rows, int32_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * xp;
    const float* gr = g + r * gp;
    for (int32_t d = 0; d < width; ++d) xr[d] *= sigmoid(gr[d]);
  }
}

void gated_add(void*, float* y, const float* x, const float* gate, int32_t n, int32_t dim) {
  for (int64_t t = 0; t < n; ++t) {
    const float s = sigmoid(gate[t]);
    for (int32_t d = 0; d < dim; ++d) y[t * dim + d] += s * x[t * dim + d];
  }
}

void rope_seq(void*, float* x, int32_t nt, int64_t rs, int32_t nh, int64_t hs, int32_t hd, int32_t rd, int32_t start,
              const int32_t* section, float theta) {
  for (int32_t t = 0; t < nt; ++t) {
    const int32_t p = start + t;
    const int32_t pos[3] = {p, p, p};
    rope_ref(x + t * rs, nh, hs, hd, rd, pos, section, theta);
  }
}

void moe_grouped(void* ctx, const splash_moe_args* a, MatmulFn matmul, SwigluFn swiglu) {
  const int N = a->n_tokens, E = a->n_experts, K = a->top_k;
  const int64_t H = a->down->rows, I = a->gate->rows, C = a->gate->cols;
  // per expert: (token, weight)
  std::vector<std::vector<std::pair<int, float>>> routed(E);
  std::vector<int> idx(E);
  for (int t = 0; t < N; ++t) {
    float* p = a->logits + int64_t(t) * E;
    const float mx = *std::max_element(p, p + E);
    float den = 0.f;
    for (int e = 0; e < E; ++e) den += (p[e] = std::exp(p[e] - mx));
    for (int e = 0; e < E; ++e) p[e] /= den;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                      [&](int x, int y) { return p[x] > p[y] || (p[x] == p[y] && x < y); });
    float sum = 0.f;
    for (int j = 0; j < K; ++j) sum += p[idx[j]];
    for (int j = 0; j < K; ++j) routed[idx[j]].push_back({t, a->renorm ? p[idx[j]] / sum : p[idx[j]]});
  }
  std::fill(a->out, a->out + int64_t(N) * H, 0.f);
  std::vector<float> xe, ye, gb, ub;
  for (int e = 0; e < E; ++e) {
    const auto& r = routed[e];
    if (r.empty()) continue;
    const int n = int(r.size());
    xe.resize(size_t(n) * C);
    ye.resize(size_t(n) * H);
    gb.resize(size_t(n) * I);
    ub.resize(size_t(n) * I);
    for (int i = 0; i < n; ++i) std::memcpy(xe.data() + size_t(i) * C, a->x + size_t(r[i].first) * C, C * 4);
    const splash_weight g = splash_weight_expert(a->gate, e), u = splash_weight_expert(a->up, e),
                        d = splash_weight_expert(a->down, e);
    matmul(ctx, &g, xe.data(), n, gb.data(), I);
    matmul(ctx, &u, xe.data(), n, ub.data(), I);
    swiglu(ctx, gb.data(), ub.data(), int64_t(n) * I, gb.data());
    matmul(ctx, &d, gb.data(), n, ye.data(), H);
    for (int i = 0; i < n; ++i) {
      float* yo = a->out + size_t(r[i].first) * H;
      const float w = r[i].second;
      for (int64_t k = 0; k < H; ++k) yo[k] += w * ye[size_t(i) * H + k];
    }
  }
  if (a->sh_down) {
    swiglu(ctx, a->sh_g, a->sh_u, int64_t(N) * a->sh_down->cols, a->sh_g);
    matmul(ctx, a->sh_down, a->sh_g, N, a->sh_out, H);
    gated_add(ctx, a->out, a->sh_out, a->sh_gate, N, int32_t(H));
  }
}

}  // namespace splash::cpu
