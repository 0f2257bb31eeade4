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

// y[t][c] = silu(Σ_j w[c][j] · window_t[j][c]) over the window of the K − 1 inputs before t (state, then x) and x[t];
// channels innermost (vectorised), no copy of the window: rows before the chunk come from the state.
SPLASH_CLONES void conv1d_silu_ref(const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y) {
  const int32_t P = K - 1;
  auto at = [&](int32_t r) { return r < P ? state + size_t(r) * C : x + size_t(r - P) * C; };  // window row r of the chunk
  for (int32_t t = 0; t < nt; ++t) {
    float* yt = y + int64_t(t) * C;
    const float* r0 = at(t);
#pragma omp simd
    for (int32_t c = 0; c < C; ++c) yt[c] = w[int64_t(c) * K] * r0[c];
    for (int32_t j = 1; j < K; ++j) {
      const float* rj = at(t + j);
#pragma omp simd
      for (int32_t c = 0; c < C; ++c) yt[c] += w[int64_t(c) * K + j] * rj[c];
    }
#pragma omp simd
    for (int32_t c = 0; c < C; ++c) yt[c] = silu(yt[c]);
  }
  // the new state: the last K − 1 rows of (state, x)
  if (nt >= P) {
    std::memcpy(state, x + size_t(nt - P) * C, size_t(P) * C * sizeof(float));
  } else {
    std::memmove(state, state + size_t(nt) * C, size_t(P - nt) * C * sizeof(float));
    std::memcpy(state + size_t(P - nt) * C, x, size_t(nt) * C * sizeof(float));
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
    // a verify keeps the state after every token (the rollback's slots): written in the same pass as the update
    float* kept = a->states ? a->states + t * a->states_stride + int64_t(h) * dk * dv : nullptr;
    for (int32_t i = 0; i < dk; ++i) {
      float* Si = S + int64_t(i) * dv;
      const float ki = kn[i];
      if (kept) {
        float* Ki = kept + int64_t(i) * dv;
        for (int32_t j = 0; j < dv; ++j) Ki[j] = Si[j] = decay * Si[j] + ki * u[j];
      } else {
        for (int32_t j = 0; j < dv; ++j) Si[j] = decay * Si[j] + ki * u[j];
      }
    }
  }
}

namespace {

// A dot product in sixteen independent lanes, summed in a fixed order at the end: vectorised on every target,
// where a single running sum is a chain of dependent adds (the chunked GDN's L²/2 key and query dots).
[[gnu::always_inline]] inline float dot16(const float* __restrict x, const float* __restrict y, int32_t n) {
  float acc[16] = {};
  int32_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; ++l) acc[l] += x[i + l] * y[i + l];
  float s = 0.f;
  for (; i < n; ++i) s += x[i] * y[i];
  for (int l = 0; l < 16; ++l) s += acc[l];
  return s;
}

// C[M×N] += A[M×K]·B[K×N], row-major with the given row strides. Four rows of C by 64 columns stay in registers
// while k runs, so each B row segment loaded serves four rows (a row at a time, every multiply-add also loads and
// stores its C element). Every element sums its products in k order, as the row-at-a-time loop did.
[[gnu::always_inline]] inline void gemm_acc(int32_t M, int32_t N, int32_t K, const float* A, int64_t lda, const float* B,
                                            int64_t ldb, float* C, int64_t ldc) {
  int32_t i = 0;
  for (; i + 4 <= M; i += 4) {
    int32_t y0 = 0;
    for (; y0 + 64 <= N; y0 += 64) {
      float acc[4][64];
      for (int r = 0; r < 4; ++r)
        for (int y = 0; y < 64; ++y) acc[r][y] = C[(i + r) * ldc + y0 + y];
      for (int32_t k = 0; k < K; ++k) {
        const float* __restrict b = B + k * ldb + y0;
        const float a0 = A[i * lda + k], a1 = A[(i + 1) * lda + k], a2 = A[(i + 2) * lda + k], a3 = A[(i + 3) * lda + k];
        for (int y = 0; y < 64; ++y) {
          acc[0][y] += a0 * b[y];
          acc[1][y] += a1 * b[y];
          acc[2][y] += a2 * b[y];
          acc[3][y] += a3 * b[y];
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int y = 0; y < 64; ++y) C[(i + r) * ldc + y0 + y] = acc[r][y];
    }
    for (int r = 0; r < 4 && y0 < N; ++r)
      for (int32_t k = 0; k < K; ++k) {
        const float ak = A[(i + r) * lda + k];
        for (int32_t y = y0; y < N; ++y) C[(i + r) * ldc + y] += ak * B[k * ldb + y];
      }
  }
  for (; i < M; ++i)
    for (int32_t k = 0; k < K; ++k) {
      const float ak = A[i * lda + k];
      float* __restrict c = C + i * ldc;
      const float* __restrict b = B + k * ldb;
      for (int32_t y = 0; y < N; ++y) c[y] += ak * b[y];
    }
}

}  // namespace

SPLASH_CLONES void gdn_chunked_head(const splash_gdn_args* a, int32_t h) {
  constexpr int32_t CH = 64;
  const int32_t dk = a->dk, dv = a->dv, kh = h / (a->nv / a->nk);
  float* S = a->state + int64_t(h) * dk * dv;
  const float qscale = 1.f / std::sqrt(float(dk));
  std::vector<float> Q(CH * dk), Kn(CH * dk), U(CH * dv), W(CH * dk), A(CH * CH), gam(CH), beta(CH), Vn(CH * dv);
  std::vector<float> P(CH * CH), KT(size_t(dk) * CH);
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
        const float d = dot16(&Kn[i * dk], &Kn[j * dk], dk);
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
    // Vn = U − W S (W negated in place: it is not needed after this)
    std::copy(U.begin(), U.begin() + size_t(L) * dv, Vn.begin());
    for (int32_t i = 0; i < L * dk; ++i) W[i] = -W[i];
    gemm_acc(L, dv, dk, W.data(), dk, S, dv, Vn.data(), dv);
    // O_i = e^{γ_i} (q̂_i S) + Σ_{j≤i} (q̂_i·k̂_j) e^{γ_i−γ_j} Vn_j: two products, Q scaled by e^{γ_i} against S, then
    // P (zero above the diagonal) against Vn; W holds the scaled queries
    float* o0 = a->out + int64_t(c0) * a->nv * dv + int64_t(h) * dv;
    const int64_t ostride = int64_t(a->nv) * dv;
    for (int32_t i = 0; i < L; ++i) {
      std::fill(o0 + i * ostride, o0 + i * ostride + dv, 0.f);
      const float eg = std::exp(gam[i]);
      for (int32_t x = 0; x < dk; ++x) W[i * dk + x] = Q[i * dk + x] * eg;
      for (int32_t j = 0; j < L; ++j) P[i * CH + j] = j <= i ? dot16(&Q[i * dk], &Kn[j * dk], dk) * std::exp(gam[i] - gam[j]) : 0.f;
    }
    gemm_acc(L, dv, dk, W.data(), dk, S, dv, o0, ostride);
    gemm_acc(L, dv, L, P.data(), CH, Vn.data(), dv, o0, ostride);
    // S = e^{γ_last} S + Σ_j e^{γ_last−γ_j} k̂_j ⊗ Vn_j, the sum as one product: S += KT·Vn, KT[x][j] = e^{γ_last−γ_j} k̂_j[x]
    const float gl = gam[L - 1];
    const float el = std::exp(gl);
    for (int64_t i = 0; i < int64_t(dk) * dv; ++i) S[i] *= el;
    for (int32_t j = 0; j < L; ++j) {
      const float f = std::exp(gl - gam[j]);
      for (int32_t x = 0; x < dk; ++x) KT[size_t(x) * CH + j] = Kn[j * dk + x] * f;
    }
    gemm_acc(dk, dv, L, KT.data(), CH, Vn.data(), dv, S, dv);
  }
}

}  // namespace splash::cpu
