// The batched forward step. Tokens of all items are flattened into one [N, H] activation block so
// every projection streams its weights once per step; sequence mixers (GDN, attention) then run
// per item against that item's state. Activations are fp32.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cpu/cpu_ops.h"
#include "model/model.h"
#include "runtime/error.h"

namespace splash {

using cpu::sigmoid;

void Model::matmul(const splash_weight& w, const float* x, int n, float* y) const {
  be_->iface->matmul(be_->ctx, &w, x, n, y, w.rows);
}

void Model::step(std::vector<StepItem>& items, std::vector<std::vector<float>>& out) {
  std::lock_guard<std::mutex> lock(compute_mu_);
  forward(items, out);
}

void Model::linear_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  const int64_t C = c.conv_ch(), Dk = c.Dk(), Dv = c.Dv();
  std::vector<float> qkv(N * C), z(N * Dv), bb(N * c.nv), aa(N * c.nv), conv(N * C), o(N * Dv);
  matmul(l.qkv, x, N, qkv.data());
  matmul(l.z, x, N, z.data());
  matmul(l.b, x, N, bb.data());
  matmul(l.a, x, N, aa.data());
  for (int64_t t = 0; t < N; ++t)
    for (int h = 0; h < c.nv; ++h) {
      const int64_t i = t * c.nv + h;
      bb[i] = sigmoid(bb[i]);
      const float s = aa[i] + l.dt_bias[h];
      const float sp = s > 20.f ? s : std::log1p(std::exp(s));
      aa[i] = -std::exp(l.A_log[h]) * sp;
    }
  int64_t off = 0;
  for (auto& it : items) {
    const int n = int(it.tokens.size());
    float* st = it.seq->gdn;
    if (it.verify) {
      // token by token, exactly as single-token decodes; the state after each token goes to its slot
      Sequence* s = it.seq;
      const size_t convn = size_t(c.conv_k - 1) * C, ssmn = size_t(c.nv) * c.dk * c.dv;
      for (int i = 0; i < n; ++i) {
        const int64_t t = off + i;
        be->conv1d_silu(be_->ctx, qkv.data() + t * C, 1, int(C), c.conv_k, l.conv, st + l.conv_off, conv.data() + t * C);
        splash_gdn_args g{};
        g.n_tokens = 1;
        g.nk = c.nk;
        g.nv = c.nv;
        g.dk = c.dk;
        g.dv = c.dv;
        g.q = conv.data() + t * C;
        g.k = g.q + Dk;
        g.v = g.q + 2 * Dk;
        g.qk_stride = C;
        g.v_stride = C;
        g.beta = bb.data() + t * c.nv;
        g.g = aa.data() + t * c.nv;
        g.state = st + l.ssm_off;
        g.out = o.data() + t * Dv;
        be->gdn_recurrent(be_->ctx, &g);
        float* slot = s->slots.data() + size_t(i + 1) * gdn_floats_;
        std::memcpy(slot + l.conv_off, st + l.conv_off, convn * 4);
        std::memcpy(slot + l.ssm_off, st + l.ssm_off, ssmn * 4);
      }
      off += n;
      continue;
    }
    be->conv1d_silu(be_->ctx, qkv.data() + off * C, n, int(C), c.conv_k, l.conv, st + l.conv_off, conv.data() + off * C);
    splash_gdn_args g{};
    g.n_tokens = n;
    g.nk = c.nk;
    g.nv = c.nv;
    g.dk = c.dk;
    g.dv = c.dv;
    g.q = conv.data() + off * C;
    g.k = g.q + Dk;
    g.v = g.q + 2 * Dk;
    g.qk_stride = C;
    g.v_stride = C;
    g.beta = bb.data() + off * c.nv;
    g.g = aa.data() + off * c.nv;
    g.state = st + l.ssm_off;
    g.out = o.data() + off * Dv;
    if (n > 1 && be->gdn_chunked) be->gdn_chunked(be_->ctx, &g);
    else be->gdn_recurrent(be_->ctx, &g);
    off += n;
  }
  be->gated_rmsnorm(be_->ctx, o.data(), z.data(), l.gnorm, N * c.nv, c.dv, c.eps, o.data());
  matmul(l.out, o.data(), N, y);
}

void Model::full_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  const int64_t qw = int64_t(c.nh) * c.hd * (c.attn_gate ? 2 : 1), kvw = int64_t(c.nkv) * c.hd, ow = int64_t(c.nh) * c.hd;
  const int64_t hstride = c.attn_gate ? 2 * c.hd : c.hd;
  std::vector<float> qg(N * qw), k(N * kvw), v(N * kvw), q(N * ow), o(N * ow);
  matmul(l.q, x, N, qg.data());
  matmul(l.k, x, N, k.data());
  matmul(l.v, x, N, v.data());
  const int32_t* sec = c.mrope.empty() ? nullptr : c.mrope.data();
  int64_t off = 0;
  const int64_t plane = kvw;
  for (auto& it : items) {
    const int n = int(it.tokens.size());
    Sequence* s = it.seq;
    float* kc = s->kv + size_t(l.kv_index) * 2 * s->max_len * plane;
    float* vc = kc + size_t(s->max_len) * plane;
    for (int i = 0; i < n; ++i) {
      const int64_t t = off + i;
      const int32_t p = s->len + i;
      const int32_t* mp = it.positions.empty() ? nullptr : it.positions.data() + 3 * i;
      const int32_t pos[3] = {mp ? mp[0] : p, mp ? mp[1] : p, mp ? mp[2] : p};
      float* qh = q.data() + t * ow;
      for (int h = 0; h < c.nh; ++h) std::memcpy(qh + h * c.hd, qg.data() + t * qw + h * hstride, c.hd * 4);
      be->rmsnorm(be_->ctx, qh, l.q_norm, c.nh, c.hd, c.eps, qh);
      be->rmsnorm(be_->ctx, k.data() + t * kvw, l.k_norm, c.nkv, c.hd, c.eps, k.data() + t * kvw);
      be->rope(be_->ctx, qh, c.nh, c.hd, c.hd, c.rot_dim, pos, sec, c.rope_theta);
      be->rope(be_->ctx, k.data() + t * kvw, c.nkv, c.hd, c.hd, c.rot_dim, pos, sec, c.rope_theta);
      std::memcpy(kc + size_t(p) * plane, k.data() + t * kvw, kvw * 4);
      std::memcpy(vc + size_t(p) * plane, v.data() + t * kvw, kvw * 4);
    }
    splash_attn_args a{};
    a.n_tokens = n;
    a.n_heads = c.nh;
    a.n_kv_heads = c.nkv;
    a.head_dim = c.hd;
    a.start = s->len;
    a.q = q.data() + off * ow;
    a.q_stride = ow;
    a.k_cache = kc;
    a.v_cache = vc;
    a.out = o.data() + off * ow;
    a.scale = 1.f / std::sqrt(float(c.hd));
    be->attention(be_->ctx, &a);
    off += n;
  }
  if (c.attn_gate)
    for (int64_t t = 0; t < N; ++t)
      for (int h = 0; h < c.nh; ++h) {
        float* oh = o.data() + t * ow + h * c.hd;
        const float* gh = qg.data() + t * qw + h * hstride + c.hd;
        for (int d = 0; d < c.hd; ++d) oh[d] *= sigmoid(gh[d]);
      }
  matmul(l.o, o.data(), N, y);
}

void Model::mlp(const Layer& l, const float* x, int N, float* y) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  auto swiglu_mlp = [&](const splash_weight& g, const splash_weight& u, const splash_weight& d, const float* xi, int n,
                        float* yo) {
    const int64_t I = g.rows;
    std::vector<float> gb(n * I), ub(n * I);
    matmul(g, xi, n, gb.data());
    matmul(u, xi, n, ub.data());
    be->swiglu(be_->ctx, gb.data(), ub.data(), n * I, gb.data());
    matmul(d, gb.data(), n, yo);
  };
  if (!l.moe) {
    swiglu_mlp(l.gate, l.up, l.down, x, N, y);
    return;
  }
  const int E = c.E, K = c.topk, H = c.H;
  std::vector<float> logits(N * E);
  matmul(l.router, x, N, logits.data());
  // per expert: (token, weight)
  std::vector<std::vector<std::pair<int, float>>> routed(E);
  std::vector<int> idx(E);
  for (int t = 0; t < N; ++t) {
    float* p = logits.data() + t * E;
    const float mx = *std::max_element(p, p + E);
    float den = 0.f;
    for (int e = 0; e < E; ++e) den += (p[e] = std::exp(p[e] - mx));
    for (int e = 0; e < E; ++e) p[e] /= den;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + K, idx.end(),
                      [&](int a, int b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0.f;
    for (int j = 0; j < K; ++j) sum += p[idx[j]];
    for (int j = 0; j < K; ++j) routed[idx[j]].push_back({t, c.renorm_topk ? p[idx[j]] / sum : p[idx[j]]});
  }
  std::fill(y, y + int64_t(N) * H, 0.f);
  std::vector<float> xe, ye;
  for (int e = 0; e < E; ++e) {
    const auto& r = routed[e];
    if (r.empty()) continue;
    const int n = int(r.size());
    xe.resize(size_t(n) * H);
    ye.resize(size_t(n) * H);
    for (int i = 0; i < n; ++i) std::memcpy(xe.data() + size_t(i) * H, x + size_t(r[i].first) * H, H * 4);
    swiglu_mlp(l.eg.expert(e), l.eu.expert(e), l.ed.expert(e), xe.data(), n, ye.data());
    for (int i = 0; i < n; ++i) {
      float* yo = y + size_t(r[i].first) * H;
      const float w = r[i].second;
      for (int d = 0; d < H; ++d) yo[d] += w * ye[size_t(i) * H + d];
    }
  }
  if (l.shared) {
    std::vector<float> sh(size_t(N) * H), gate(N);
    swiglu_mlp(l.sg, l.su, l.sd, x, N, sh.data());
    matmul(l.sgate, x, N, gate.data());
    for (int t = 0; t < N; ++t) {
      const float s = sigmoid(gate[t]);
      for (int d = 0; d < H; ++d) y[size_t(t) * H + d] += s * sh[size_t(t) * H + d];
    }
  }
}

void Model::forward(std::vector<StepItem>& items, std::vector<std::vector<float>>& out) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  const int H = c.H;
  int N = 0;
  for (auto& it : items) N += int(it.tokens.size());
  std::vector<float> h(size_t(N) * H), x(size_t(N) * H), y(size_t(N) * H);
  for (auto& it : items) {
    Sequence* s = it.seq;
    s->spec_n = 0;
    if (it.verify && gdn_floats_ > 0) {
      s->slots.resize(size_t(it.tokens.size() + 1) * gdn_floats_);
      std::memcpy(s->slots.data(), s->gdn, size_t(gdn_floats_) * 4);
    }
  }
  const int K = has_draft() ? int(dcfg_.taps.size()) : 0;
  bool any_capture = false;
  for (auto& it : items) any_capture |= it.capture && K > 0;
  std::vector<float> taps(any_capture ? size_t(N) * K * H : 0);
  {
    int t = 0;
    for (auto& it : items) {
      for (int32_t tok : it.tokens) be->dequant_row(be_->ctx, &embed_, tok, h.data() + size_t(t++) * H);
      const size_t base = size_t(t) - it.tokens.size();
      for (size_t j = 0; j < it.embed_at.size(); ++j)  // image embeddings replace their pad tokens' rows
        std::memcpy(h.data() + (base + it.embed_at[j]) * H, it.embeds.data() + j * H, size_t(H) * 4);
    }
  }
  for (const Layer& l : layers_) {
    be->rmsnorm(be_->ctx, h.data(), l.in_norm, N, H, c.eps, x.data());
    if (l.linear) linear_attention(l, items, x.data(), N, y.data());
    else full_attention(l, items, x.data(), N, y.data());
    for (size_t i = 0; i < h.size(); ++i) h[i] += y[i];
    be->rmsnorm(be_->ctx, h.data(), l.post_norm, N, H, c.eps, x.data());
    mlp(l, x.data(), N, y.data());
    for (size_t i = 0; i < h.size(); ++i) h[i] += y[i];
    if (any_capture) {
      const int j = tap_slot_[&l - layers_.data()];
      if (j >= 0)
        for (int t = 0; t < N; ++t) std::memcpy(&taps[(size_t(t) * K + j) * H], &h[size_t(t) * H], H * 4);
    }
  }
  // logits only for the rows asked for
  std::vector<int> rows;
  {
    int off = 0;
    for (auto& it : items) {
      const int n = int(it.tokens.size());
      if (it.logits == 1) rows.push_back(off + n - 1);
      else if (it.logits == 2)
        for (int i = 0; i < n; ++i) rows.push_back(off + i);
      off += n;
    }
  }
  out.assign(items.size(), {});
  std::vector<float> logits;
  if (!rows.empty()) {
    std::vector<float> sel(rows.size() * size_t(H));
    for (size_t i = 0; i < rows.size(); ++i) std::memcpy(&sel[i * H], &h[size_t(rows[i]) * H], H * 4);
    be->rmsnorm(be_->ctx, sel.data(), norm_, int(rows.size()), H, c.eps, sel.data());
    logits.resize(rows.size() * size_t(c.V));
    matmul(lm_head_, sel.data(), int(rows.size()), logits.data());
  }
  {
    std::lock_guard<std::mutex> lock(seq_mu_);  // lengths are read from the JS thread
    int off = 0;
    for (auto& it : items) {
      Sequence* s = it.seq;
      const int n = int(it.tokens.size());
      if (it.verify && gdn_floats_ > 0) {
        s->spec_base = s->len;
        s->spec_n = n + 1;
      }
      if (K > 0) {
        const size_t row = size_t(K) * H;
        if (it.capture && s->feat.size() == size_t(s->len - s->draft_len) * row)
          s->feat.insert(s->feat.end(), taps.begin() + off * row, taps.begin() + (off + n) * row);
        else
          s->feat.clear(), s->draft_len = -1;  // context gap: the draft cannot run on this sequence any more
      }
      s->len += n;
      off += n;
    }
  }
  size_t r = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    auto& it = items[i];
    if (it.logits == 0) continue;
    const size_t n = it.logits == 1 ? 1 : it.tokens.size();
    out[i].assign(logits.begin() + r * c.V, logits.begin() + (r + n) * c.V);
    r += n;
  }
}

}  // namespace splash
