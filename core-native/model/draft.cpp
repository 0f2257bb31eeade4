// The DFlash draft forward (speculative-and-cache.md §1.1, tools/train/draft.py): context features of the
// committed positions not yet seen by the draft are projected into every draft layer's K/V cache; the block
// [anchor, mask×(B−1)] at positions len..len+B−1 attends to all cached context and to the whole block; the
// target's embedding and lm_head are reused. Matmuls of all items are batched.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_ops.h"
#include "model/model.h"
#include "runtime/error.h"

namespace splash {

void Model::draft(std::vector<DraftItem>& items, std::vector<std::vector<float>>& out) {
  std::lock_guard<std::mutex> lock(compute_mu_);
  const DraftConfig& d = dcfg_;
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  const int B = d.B, H = d.H, K = int(d.taps.size());
  const int64_t qw = int64_t(d.nh) * d.hd, kvw = int64_t(d.nkv) * d.hd;
  const size_t frow = size_t(K) * c.H;
  // context rows (pending features) and block rows of every item
  int Nc = 0;
  std::vector<int> coff(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence* s = items[i].seq;
    const int n = s->len - s->draft_len;
    if (s->draft_len < 0 || n < 0 || s->feat.size() != size_t(n) * frow)
      throw Error("invalid_argument", "sequence " + std::to_string(s->id) + " has no complete draft context");
    coff[i] = Nc;
    Nc += n;
  }
  coff[items.size()] = Nc;
  const int Nb = int(items.size()) * B;
  std::vector<float> feats(size_t(Nc) * frow), ctx(size_t(Nc) * H);
  for (size_t i = 0; i < items.size(); ++i)
    if (!items[i].seq->feat.empty()) std::memcpy(&feats[size_t(coff[i]) * frow], items[i].seq->feat.data(), items[i].seq->feat.size() * 4);
  if (Nc > 0) {
    be->matmul(be_->ctx, &dfc_, feats.data(), Nc, ctx.data(), H);
    be->rmsnorm(be_->ctx, ctx.data(), dhnorm_, Nc, H, d.eps, ctx.data());
  }
  std::vector<float> h(size_t(Nb) * H), x(size_t(Nb) * H), y(size_t(Nb) * H);
  for (size_t i = 0; i < items.size(); ++i)
    for (int j = 0; j < B; ++j)
      be->dequant_row(be_->ctx, &embed_, j == 0 ? items[i].anchor : d.mask, &h[(i * B + j) * size_t(H)]);
  std::vector<float> ck(size_t(Nc) * kvw), cv(size_t(Nc) * kvw), q(size_t(Nb) * qw), bk(size_t(Nb) * kvw),
      bv(size_t(Nb) * kvw), o(size_t(Nb) * qw);
  std::vector<float> I1, I2;
  for (int li = 0; li < d.L; ++li) {
    const DraftLayer& l = dlayers_[li];
    // context K/V into the cache
    if (Nc > 0) {
      be->matmul(be_->ctx, &l.k, ctx.data(), Nc, ck.data(), kvw);
      be->matmul(be_->ctx, &l.v, ctx.data(), Nc, cv.data(), kvw);
    }
    be->rmsnorm(be_->ctx, h.data(), l.in_norm, Nb, H, d.eps, x.data());
    be->matmul(be_->ctx, &l.q, x.data(), Nb, q.data(), qw);
    be->matmul(be_->ctx, &l.k, x.data(), Nb, bk.data(), kvw);
    be->matmul(be_->ctx, &l.v, x.data(), Nb, bv.data(), kvw);
    for (size_t i = 0; i < items.size(); ++i) {
      Sequence* s = items[i].seq;
      const size_t plane = size_t(s->max_len + B) * kvw;
      float* kc = s->dkv + size_t(li) * 2 * plane;
      float* vc = kc + plane;
      for (int r = 0; r < coff[i + 1] - coff[i]; ++r) {
        const int32_t p = s->draft_len + r;
        const int32_t pos[3] = {p, p, p};
        float* kr = &ck[size_t(coff[i] + r) * kvw];
        be->rmsnorm(be_->ctx, kr, l.k_norm, d.nkv, d.hd, d.eps, kr);
        be->rope(be_->ctx, kr, d.nkv, d.hd, d.hd, d.hd, pos, nullptr, d.theta);
        std::memcpy(kc + size_t(p) * kvw, kr, kvw * 4);
        std::memcpy(vc + size_t(p) * kvw, &cv[size_t(coff[i] + r) * kvw], kvw * 4);
      }
      for (int j = 0; j < B; ++j) {
        const int32_t p = s->len + j;
        const int32_t pos[3] = {p, p, p};
        float* qr = &q[(i * B + j) * size_t(qw)];
        float* kr = &bk[(i * B + j) * size_t(kvw)];
        be->rmsnorm(be_->ctx, qr, l.q_norm, d.nh, d.hd, d.eps, qr);
        be->rmsnorm(be_->ctx, kr, l.k_norm, d.nkv, d.hd, d.eps, kr);
        be->rope(be_->ctx, qr, d.nh, d.hd, d.hd, d.hd, pos, nullptr, d.theta);
        be->rope(be_->ctx, kr, d.nkv, d.hd, d.hd, d.hd, pos, nullptr, d.theta);
        std::memcpy(kc + size_t(p) * kvw, kr, kvw * 4);
        std::memcpy(vc + size_t(p) * kvw, &bv[(i * B + j) * size_t(kvw)], kvw * 4);
      }
      // every block query sees the context and the whole block: one causal call per query whose "start"
      // puts the end of the block inside its window
      for (int j = 0; j < B; ++j) {
        splash_attn_args a{};
        a.n_tokens = 1;
        a.n_heads = d.nh;
        a.n_kv_heads = d.nkv;
        a.head_dim = d.hd;
        a.start = s->len + B - 1;
        a.q = &q[(i * B + j) * size_t(qw)];
        a.q_stride = qw;
        a.k_cache = kc;
        a.v_cache = vc;
        a.out = &o[(i * B + j) * size_t(qw)];
        a.scale = 1.f / std::sqrt(float(d.hd));
        be->attention(be_->ctx, &a);
      }
    }
    be->matmul(be_->ctx, &l.o, o.data(), Nb, y.data(), H);
    for (size_t k = 0; k < h.size(); ++k) h[k] += y[k];
    be->rmsnorm(be_->ctx, h.data(), l.post_norm, Nb, H, d.eps, x.data());
    I1.resize(size_t(Nb) * d.I);
    I2.resize(size_t(Nb) * d.I);
    be->matmul(be_->ctx, &l.gate, x.data(), Nb, I1.data(), d.I);
    be->matmul(be_->ctx, &l.up, x.data(), Nb, I2.data(), d.I);
    be->swiglu(be_->ctx, I1.data(), I2.data(), int64_t(Nb) * d.I, I1.data());
    be->matmul(be_->ctx, &l.down, I1.data(), Nb, y.data(), H);
    for (size_t k = 0; k < h.size(); ++k) h[k] += y[k];
  }
  // rows 1..n of every block → final norm → the target's head (the whole block still runs: it attends
  // bidirectionally, as in training)
  std::vector<size_t> roff(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) roff[i + 1] = roff[i] + size_t(items[i].n);
  const int R = int(roff.back());
  std::vector<float> sel(size_t(R) * H), logits(size_t(R) * c.V);
  for (size_t i = 0; i < items.size(); ++i)
    std::memcpy(&sel[roff[i] * H], &h[(i * B + 1) * size_t(H)], size_t(items[i].n) * H * 4);
  be->rmsnorm(be_->ctx, sel.data(), dnorm_, R, H, d.eps, sel.data());
  be->matmul(be_->ctx, &lm_head_, sel.data(), R, logits.data(), c.V);
  out.assign(items.size(), {});
  std::lock_guard<std::mutex> l2(seq_mu_);
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence* s = items[i].seq;
    s->draft_len = s->len;
    s->feat.clear();
    out[i].assign(logits.begin() + roff[i] * c.V, logits.begin() + roff[i + 1] * c.V);
  }
}

}  // namespace splash
