#include "backend/cpu/cpu_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/isa.h"

namespace splash::cpu {

void dequant_row_ref(const splash_weight* w, int64_t r, float* out) {
  const int64_t C = w->cols;
  switch (w->dtype) {
    case SPLASH_F32: std::memcpy(out, static_cast<const float*>(w->data) + r * C, C * sizeof(float)); return;
    case SPLASH_BF16: {
      const uint16_t* p = static_cast<const uint16_t*>(w->data) + r * C;
      for (int64_t c = 0; c < C; ++c) out[c] = bf16_to_f32(p[c]);
      return;
    }
    default: {
      const int bits = w->dtype == SPLASH_Q4 ? 4 : 8;
      const int64_t G = C / 64;
      const uint32_t* words = static_cast<const uint32_t*>(w->data) + r * (C * bits / 32);
      const uint32_t mask = (1u << bits) - 1;
      const int per = 32 / bits;
      for (int64_t c = 0; c < C; ++c) {
        uint32_t q = (words[c / per] >> (bits * (c % per))) & mask;
        out[c] = bf16_to_f32(w->scales[r * G + c / 64]) * float(q) + bf16_to_f32(w->biases[r * G + c / 64]);
      }
    }
  }
}

double matmul_ref_dot(const splash_weight* w, int64_t r, const float* x) {
  std::vector<float> row(w->cols);
  dequant_row_ref(w, r, row.data());
  double s = 0;
  for (int64_t c = 0; c < w->cols; ++c) s += double(row[c]) * double(x[c]);
  return s;
}

SPLASH_CLONES void rmsnorm_ref(const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  for (int32_t i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * dim;
    float* yi = y + int64_t(i) * dim;
    const float ss = dotf(xi, xi, dim);
    const float inv = 1.f / std::sqrt(ss / float(dim) + eps);
    for (int32_t c = 0; c < dim; ++c) yi[c] = xi[c] * inv * w[c];
  }
}

SPLASH_CLONES void gated_rmsnorm_ref(const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  for (int32_t i = 0; i < n; ++i) {
    const float* xi = x + int64_t(i) * dim;
    const float* zi = z + int64_t(i) * dim;
    float* yi = y + int64_t(i) * dim;
    const float ss = dotf(xi, xi, dim);
    const float inv = 1.f / std::sqrt(ss / float(dim) + eps);
    for (int32_t c = 0; c < dim; ++c) yi[c] = xi[c] * inv * w[c] * silu(zi[c]);
  }
}

void rope_ref(float* x, int32_t n_heads, int64_t hs, int32_t hd, int32_t rd, const int32_t pos[3],
              const int32_t* sec, float theta) {
  (void)hd;
  const int32_t half = rd / 2;
  float cs[256], sn[256];
  for (int32_t i = 0; i < half && i < 256; ++i) {
    int32_t p = pos[0];
    if (sec) {
      if (i % 3 == 1 && i < 3 * sec[1]) p = pos[1];
      else if (i % 3 == 2 && i < 3 * sec[2]) p = pos[2];
    }
    const float inv_freq = float(1.0 / std::pow(double(theta), double(2 * i) / double(rd)));
    const float ang = float(p) * inv_freq;
    cs[i] = std::cos(ang);
    sn[i] = std::sin(ang);
  }
  for (int32_t h = 0; h < n_heads; ++h) {
    float* v = x + h * hs;
    for (int32_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cs[i] - b * sn[i];
      v[i + half] = b * cs[i] + a * sn[i];
    }
  }
}

void swiglu_ref(const float* g, const float* u, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu(g[i]) * u[i];
}

SPLASH_CLONES void conv1d_silu_ref(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y) {
  const int32_t P = K - 1;
  std::vector<float> buf(size_t(P + nt) * C);
  std::memcpy(buf.data(), state, size_t(P) * C * sizeof(float));
  std::memcpy(buf.data() + size_t(P) * C, x, size_t(nt) * C * sizeof(float));
  for (int32_t t = 0; t < nt; ++t)
    for (int32_t c = 0; c < C; ++c) {
      float s = 0.f;
      for (int32_t j = 0; j < K; ++j) s += w[int64_t(c) * K + j] * buf[size_t(t + j) * C + c];
      y[int64_t(t) * C + c] = silu(s);
    }
  std::memcpy(state, buf.data() + size_t(nt) * C, size_t(P) * C * sizeof(float));
}

// Causal attention, tiled for long prompts: a task is one KV head and a block of query tokens, i.e. every query
// head that shares that KV head. Keys are visited in blocks of kAttnKeyBlock absolute positions with an online
// softmax, so each K/V block is read once per task and reused by all its rows while it sits in cache (reading the
// whole cache per query head made a 32K prefill memory-bound). Each query row does exactly the same arithmetic in
// the same order whatever else shares its task, so a token's output does not depend on how a step was batched
// (a verify row equals a single decode bit for bit).
SPLASH_CLONES void attention_tile(const splash_attn_args* a, int32_t kvh, int32_t t0, int32_t t1) {
  const int32_t hd = a->head_dim, G = a->n_heads / a->n_kv_heads;
  const int64_t kvs = int64_t(a->n_kv_heads) * hd;
  const int32_t rows = (t1 - t0) * G;
  static thread_local std::vector<float> acc, mx, den;
  float sc[kAttnKeyBlock];
  acc.assign(size_t(rows) * hd, 0.f);
  mx.assign(rows, -INFINITY);
  den.assign(rows, 0.f);
  const int32_t end = a->start + t1;  // the last token sees keys [0, end)
  for (int32_t p0 = 0; p0 < end; p0 += kAttnKeyBlock) {
    for (int32_t t = t0; t < t1; ++t) {
      const int32_t npos = a->start + t + 1;
      if (p0 >= npos) continue;
      const int32_t p1 = std::min(p0 + kAttnKeyBlock, npos);
      for (int32_t g = 0; g < G; ++g) {
        const int32_t r = (t - t0) * G + g;
        const float* q = a->q + t * a->q_stride + int64_t(kvh * G + g) * hd;
        float m = mx[r];
        for (int32_t p = p0; p < p1; ++p) {
          const float s = dotf(q, a->k_cache + p * kvs + int64_t(kvh) * hd, hd) * a->scale;
          sc[p - p0] = s;
          m = std::max(m, s);
        }
        const float corr = std::exp(mx[r] - m);  // 0 on the first block (mx = -inf), 1 when the max holds
        float* o = &acc[size_t(r) * hd];
        float sum = den[r] * corr;
        for (int32_t d = 0; d < hd; ++d) o[d] *= corr;
        for (int32_t p = p0; p < p1; ++p) {
          const float w = std::exp(sc[p - p0] - m);
          sum += w;
          const float* v = a->v_cache + p * kvs + int64_t(kvh) * hd;
          for (int32_t d = 0; d < hd; ++d) o[d] += w * v[d];
        }
        mx[r] = m;
        den[r] = sum;
      }
    }
  }
  for (int32_t t = t0; t < t1; ++t)
    for (int32_t g = 0; g < G; ++g) {
      const int32_t r = (t - t0) * G + g;
      const float inv = 1.f / den[r];
      float* out = a->out + int64_t(t) * a->n_heads * hd + int64_t(kvh * G + g) * hd;
      for (int32_t d = 0; d < hd; ++d) out[d] = acc[size_t(r) * hd + d] * inv;
    }
}

namespace {

// q̂ = q·rsqrt(Σq²+1e-6)·scale
void l2norm(const float* x, int32_t n, float scale, float* out) {
  const float inv = scale / std::sqrt(dotf(x, x, n) + 1e-6f);
  for (int32_t i = 0; i < n; ++i) out[i] = x[i] * inv;
}

}  // namespace

// One read pass (Sᵀk̂ and Sᵀq̂ from the old state) and one read-write pass (the update):
//   u = e^g·Sᵀk̂,  δ = (v − u)·β,  o = e^g·Sᵀq̂ + (k̂·q̂)·δ,  S ← e^g·S + k̂ ⊗ δ
// which equals "decay, read u, update, read o after the update" of the reference recurrence.
SPLASH_CLONES void gdn_recurrent_head(const splash_gdn_args* a, int32_t h) {
  const int32_t dk = a->dk, dv = a->dv, kh = h / (a->nv / a->nk);
  float* S = a->state + int64_t(h) * dk * dv;
  std::vector<float> qn(dk), kn(dk), u(dv), w(dv);
  const float qscale = 1.f / std::sqrt(float(dk));
  for (int32_t t = 0; t < a->n_tokens; ++t) {
    l2norm(a->q + t * a->qk_stride + int64_t(kh) * dk, dk, qscale, qn.data());
    l2norm(a->k + t * a->qk_stride + int64_t(kh) * dk, dk, 1.f, kn.data());
    const float* v = a->v + t * a->v_stride + int64_t(h) * dv;
    const float beta = a->beta[int64_t(t) * a->nv + h];
    const float decay = std::exp(a->g[int64_t(t) * a->nv + h]);
    std::fill(u.begin(), u.end(), 0.f);
    std::fill(w.begin(), w.end(), 0.f);
    const float kq = dotf(kn.data(), qn.data(), dk);
    for (int32_t i = 0; i < dk; ++i) {
      const float* Si = S + int64_t(i) * dv;
      const float ki = kn[i], qi = qn[i];
      for (int32_t j = 0; j < dv; ++j) {
        u[j] += Si[j] * ki;
        w[j] += Si[j] * qi;
      }
    }
    float* o = a->out + int64_t(t) * a->nv * dv + int64_t(h) * dv;
    for (int32_t j = 0; j < dv; ++j) {
      u[j] = (v[j] - decay * u[j]) * beta;  // δ
      o[j] = decay * w[j] + kq * u[j];
    }
    for (int32_t i = 0; i < dk; ++i) {
      float* Si = S + int64_t(i) * dv;
      const float ki = kn[i];
      for (int32_t j = 0; j < dv; ++j) Si[j] = decay * Si[j] + ki * u[j];
    }
  }
}

SPLASH_CLONES void gdn_chunked_head(const splash_gdn_args* a, int32_t h) {
  constexpr int32_t CH = 64;
  const int32_t dk = a->dk, dv = a->dv, kh = h / (a->nv / a->nk);
  float* S = a->state + int64_t(h) * dk * dv;
  const float qscale = 1.f / std::sqrt(float(dk));
  std::vector<float> Q(CH * dk), Kn(CH * dk), U(CH * dv), W(CH * dk), A(CH * CH), gam(CH), beta(CH), Vn(CH * dv);
  for (int32_t c0 = 0; c0 < a->n_tokens; c0 += CH) {
    const int32_t L = std::min(CH, a->n_tokens - c0);
    float cum = 0.f;
    for (int32_t i = 0; i < L; ++i) {
      const int32_t t = c0 + i;
      l2norm(a->q + t * a->qk_stride + int64_t(kh) * dk, dk, qscale, &Q[i * dk]);
      l2norm(a->k + t * a->qk_stride + int64_t(kh) * dk, dk, 1.f, &Kn[i * dk]);
      beta[i] = a->beta[int64_t(t) * a->nv + h];
      cum += a->g[int64_t(t) * a->nv + h];
      gam[i] = cum;
    }
    // A_ij = β_i (k̂_i·k̂_j) e^{γ_i−γ_j}, j < i
    for (int32_t i = 0; i < L; ++i)
      for (int32_t j = 0; j < i; ++j) {
        const float d = dotf(&Kn[i * dk], &Kn[j * dk], dk);
        A[i * CH + j] = beta[i] * d * std::exp(gam[i] - gam[j]);
      }
    // U = L⁻¹(β⊙V), W = L⁻¹(β⊙e^γ⊙K̂) by forward substitution
    for (int32_t i = 0; i < L; ++i) {
      const float* v = a->v + (c0 + i) * a->v_stride + int64_t(h) * dv;
      float* __restrict Ui = &U[i * dv];
      float* __restrict Wi = &W[i * dk];
      const float eg = std::exp(gam[i]);
      for (int32_t y = 0; y < dv; ++y) Ui[y] = beta[i] * v[y];
      for (int32_t x = 0; x < dk; ++x) Wi[x] = beta[i] * eg * Kn[i * dk + x];
      for (int32_t j = 0; j < i; ++j) {
        const float aij = A[i * CH + j];
        const float* __restrict Uj = &U[j * dv];
        const float* __restrict Wj = &W[j * dk];
        for (int32_t y = 0; y < dv; ++y) Ui[y] -= aij * Uj[y];
        for (int32_t x = 0; x < dk; ++x) Wi[x] -= aij * Wj[x];
      }
    }
    // Vn = U − W S
    for (int32_t i = 0; i < L; ++i) {
      float* __restrict vn = &Vn[i * dv];
      for (int32_t y = 0; y < dv; ++y) vn[y] = U[i * dv + y];
      for (int32_t x = 0; x < dk; ++x) {
        const float wx = W[i * dk + x];
        const float* __restrict Sx = S + int64_t(x) * dv;
        for (int32_t y = 0; y < dv; ++y) vn[y] -= wx * Sx[y];
      }
    }
    // O_i = e^{γ_i} (q̂_i S) + Σ_{j≤i} (q̂_i·k̂_j) e^{γ_i−γ_j} Vn_j
    for (int32_t i = 0; i < L; ++i) {
      float* __restrict o = a->out + int64_t(c0 + i) * a->nv * dv + int64_t(h) * dv;
      std::fill(o, o + dv, 0.f);
      const float eg = std::exp(gam[i]);
      for (int32_t x = 0; x < dk; ++x) {
        const float qx = Q[i * dk + x] * eg;
        const float* __restrict Sx = S + int64_t(x) * dv;
        for (int32_t y = 0; y < dv; ++y) o[y] += qx * Sx[y];
      }
      for (int32_t j = 0; j <= i; ++j) {
        const float p = dotf(&Q[i * dk], &Kn[j * dk], dk) * std::exp(gam[i] - gam[j]);
        const float* __restrict vj = &Vn[j * dv];
        for (int32_t y = 0; y < dv; ++y) o[y] += p * vj[y];
      }
    }
    // S = e^{γ_last} S + Σ_j e^{γ_last−γ_j} k̂_j ⊗ Vn_j
    const float gl = gam[L - 1];
    const float el = std::exp(gl);
    for (int64_t i = 0; i < int64_t(dk) * dv; ++i) S[i] *= el;
    for (int32_t j = 0; j < L; ++j) {
      const float f = std::exp(gl - gam[j]);
      for (int32_t x = 0; x < dk; ++x) {
        const float kx = Kn[j * dk + x] * f;
        float* __restrict Sx = S + int64_t(x) * dv;
        const float* __restrict vj = &Vn[j * dv];
        for (int32_t y = 0; y < dv; ++y) Sx[y] += kx * vj[y];
      }
    }
  }
}

}  // namespace splash::cpu
