// The DFlash draft forward (tools/train/draft.py): context features of the
// committed positions not yet seen by the draft are projected into every draft layer's K/V cache (a ring for a
// sliding-window layer: draft_kv.cpp); the block [anchor, mask×(B−1)] at positions len..len+B−1 attends to the
// cached context (within the window for a sliding layer) and to the whole block; the
// target's embedding and lm_head are reused. Matmuls of all items are batched; every op goes through the
// backend table and the logits come back to the host once. DFlash 2 (model/config.h DraftConfig): sliding-window and
// causal layers attend row by row, the conv wraps both sublayers (draft_conv.cpp), and the candidate selector
// picks the drafts (draft_selector.cpp).
#include <cmath>
#include <algorithm>
#include <cstring>

#include "model/hybrid_model.h"
#include "runtime/error.h"

namespace splash {

void HybridModel::draft(std::vector<DraftItem>& items, std::vector<std::vector<float>>& out) {
  std::lock_guard<std::mutex> lock(compute_mu_);
  const DraftConfig& d = dcfg_;
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int H = d.H, K = int(d.taps.size());
  const int64_t qw = int64_t(d.nh) * d.hd, kvw = int64_t(d.nkv) * d.hd;
  const size_t frow = size_t(K) * c.H;
  // context rows (pending features) and block rows of every item
  int Nc = 0;
  std::vector<int> coff(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence* s = items[i].seq;
    const int n = s->len - s->draft_len;
    // (sliding layers: the window before the block must be held; truncate_sequence keeps this true)
    if (s->draft_len < 0 || n < 0 || s->feat_rows != n || std::min(s->draft_len, s->len - draft_keep(s->len)) < s->draft_lo)
      throw Error("invalid_argument", "sequence " + std::to_string(s->id) + " has no complete draft context");
    coff[i] = Nc;
    Nc += n;
  }
  coff[items.size()] = Nc;
  // items with n = 0 only take in their pending context (the prefix cache saves rows that carry it)
  bool any = false, all = true;
  for (const DraftItem& it : items) any |= it.n > 0, all &= it.n > 0;
  if (any && !all) throw Error("invalid_argument", "draft: context-only items (n = 0) cannot share a call with drafting ones");
  const bool block = all;
  // the block runs as many rows as the longest draft asks for (anchor + n masks): the rows after them would
  // only be attended to, and dropping them costs little acceptance for much less work
  int Bb = 0;
  for (const DraftItem& it : items) Bb = std::max(Bb, it.n + 1);
  const int Nb = block ? int(items.size()) * Bb : 0;
  float* feats = buf(kDFeat, size_t(Nc) * frow);
  float* ctx = buf(kDCtx, size_t(Nc) * H);
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].seq->feat_rows > 0)
      be->copy2d(bc, feats + size_t(coff[i]) * frow, 0, items[i].seq->feat, 0, size_t(items[i].seq->feat_rows) * frow * 4, 1);
  if (Nc > 0) {
    be->matmul(bc, &dfc_, feats, Nc, ctx, H);
    be->rmsnorm(bc, ctx, dhnorm_, Nc, H, d.eps, ctx);
  }
  float* h = buf(kDH, size_t(Nb) * H);
  float* x = buf(kDX, size_t(Nb) * H);
  float* y = buf(kDY, size_t(Nb) * H);
  if (block) {
    std::vector<int32_t> toks;
    for (size_t i = 0; i < items.size(); ++i)
      for (int j = 0; j < Bb; ++j) toks.push_back(j == 0 ? items[i].anchor : d.mask);
    be->embed(bc, &embed_, toks.data(), Nb, h);
  }
  float* ck = buf(kDCk, size_t(Nc) * kvw);
  float* cv = buf(kDCv, size_t(Nc) * kvw);
  float* q = buf(kDQ, size_t(Nb) * qw);
  float* bk = buf(kDBk, size_t(Nb) * kvw);
  float* bv = buf(kDBv, size_t(Nb) * kvw);
  float* o = buf(kDO, size_t(Nb) * qw);
  float* I1 = buf(kDI1, size_t(Nb) * d.I);
  float* I2 = buf(kDI2, size_t(Nb) * d.I);
  float* qp = buf(kDQp, size_t(Bb) * qw);  // one block's queries / outputs ordered by KV head
  float* op = buf(kDOp, size_t(Bb) * qw);
  const int G = d.nh / d.nkv;
  const int64_t NbH = int64_t(Nb) * H;
  const bool conv = d.conv_k > 0;
  for (int li = 0; li < d.L; ++li) {
    const DraftLayer& l = dlayers_[li];
    const bool sliding = !d.sliding.empty() && d.sliding[li], causal = !d.causal.empty() && d.causal[li];
    // context K/V into the cache
    if (Nc > 0) {
      be->matmul(bc, &l.k, ctx, Nc, ck, kvw);
      be->matmul(bc, &l.v, ctx, Nc, cv, kvw);
      be->rmsnorm(bc, ck, l.k_norm, Nc * d.nkv, d.hd, d.eps, ck);
    }
    for (size_t i = 0; i < items.size(); ++i) {
      Sequence* s = items[i].seq;
      const DraftPlanes p = draft_planes(*s, li);
      const int nc = coff[i + 1] - coff[i];
      // a ring keeps only its last M positions: the rows before them are not written (nor rotated)
      const int skip = p.ring && nc > p.ring ? nc - p.ring : 0;
      if (nc > skip) {
        float* kr = ck + size_t(coff[i] + skip) * kvw;
        be->rope_seq(bc, kr, nc - skip, kvw, d.nkv, d.hd, d.hd, d.hd, s->draft_len + skip, nullptr, d.theta);
        draft_put(p, s->draft_len + skip, kr, cv + size_t(coff[i] + skip) * kvw, nc - skip);
      }
    }
    if (!block) continue;
    be->rmsnorm(bc, h, l.in_norm, Nb, H, d.eps, x);
    if (conv) draft_conv(l, 0, true, x, Nb, Bb);
    be->matmul(bc, &l.q, x, Nb, q, qw);
    be->matmul(bc, &l.k, x, Nb, bk, kvw);
    be->matmul(bc, &l.v, x, Nb, bv, kvw);
    be->rmsnorm(bc, q, l.q_norm, Nb * d.nh, d.hd, d.eps, q);
    be->rmsnorm(bc, bk, l.k_norm, Nb * d.nkv, d.hd, d.eps, bk);
    for (size_t i = 0; i < items.size(); ++i) {
      Sequence* s = items[i].seq;
      const DraftPlanes p = draft_planes(*s, li);
      float* qr = q + i * Bb * size_t(qw);
      float* kr = bk + i * Bb * size_t(kvw);
      be->rope_seq(bc, qr, Bb, qw, d.nh, d.hd, d.hd, d.hd, s->len, nullptr, d.theta);
      be->rope_seq(bc, kr, Bb, kvw, d.nkv, d.hd, d.hd, d.hd, s->len, nullptr, d.theta);
      draft_put(p, s->len, kr, bv + i * Bb * size_t(kvw), Bb);
      float* orow = o + i * Bb * size_t(qw);
      const float scale = 1.f / std::sqrt(float(d.hd));
      if (causal || (sliding && s->len + Bb > d.window)) {
        draft_attention_rows(qr, orow, p, s->len, Bb, sliding, causal, scale);
        continue;
      }
      // every block query sees the context and the whole block (for a sliding layer: all of it lies in the window,
      // positions below M, so a ring's rows are the positions too): the block's B queries become the query heads of
      // one token whose window ends at the end of the block, ordered by KV head ([kv head][row][head in group]) so
      // that GQA maps each onto its own KV head; one call per item and layer
      const size_t gw = size_t(G) * d.hd;  // one row's query heads of one KV head
      for (int kh = 0; kh < d.nkv; ++kh)
        be->copy2d(bc, qp + kh * Bb * gw, gw * 4, qr + kh * gw, size_t(qw) * 4, gw * 4, size_t(Bb));
      splash_attn_args a{};
      a.n_tokens = 1;
      a.n_heads = Bb * d.nh;
      a.n_kv_heads = d.nkv;
      a.head_dim = d.hd;
      a.start = s->len + Bb - 1;
      a.q = qp;
      a.q_stride = int64_t(Bb) * qw;
      a.k_cache = p.k;
      a.v_cache = p.v;
      a.out = op;
      a.scale = scale;
      be->attention(bc, &a);
      for (int kh = 0; kh < d.nkv; ++kh)
        be->copy2d(bc, orow + kh * gw, size_t(qw) * 4, op + kh * Bb * gw, gw * 4, gw * 4, size_t(Bb));
    }
    be->matmul(bc, &l.o, o, Nb, y, H);
    if (conv) draft_conv(l, 0, false, y, Nb, Bb);
    be->add(bc, h, y, NbH);
    be->rmsnorm(bc, h, l.post_norm, Nb, H, d.eps, x);
    if (conv) draft_conv(l, 1, true, x, Nb, Bb);
    be->matmul(bc, &l.gate, x, Nb, I1, d.I);
    be->matmul(bc, &l.up, x, Nb, I2, d.I);
    be->swiglu(bc, I1, I2, int64_t(Nb) * d.I, I1);
    be->matmul(bc, &l.down, I1, Nb, y, H);
    if (conv) draft_conv(l, 1, false, y, Nb, Bb);
    be->add(bc, h, y, NbH);
  }
  if (!block) {
    check_backend();
    out.assign(items.size(), {});
    std::lock_guard<std::mutex> l2(seq_mu_);
    for (DraftItem& it : items) draft_done(it.seq, it.seq->len);
    return;
  }
  // rows 1..n of every block → final norm → the target's head (the whole block still runs: it attends
  // bidirectionally, as in training)
  std::vector<size_t> roff(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i) roff[i + 1] = roff[i] + size_t(items[i].n);
  const int R = int(roff.back());
  float* sel = buf(kSel, size_t(R) * H);
  float* logits = buf(kLogits, size_t(R) * c.V);
  for (size_t i = 0; i < items.size(); ++i)
    be->copy2d(bc, sel + roff[i] * H, 0, h + (i * Bb + 1) * size_t(H), 0, size_t(items[i].n) * H * 4, 1);
  be->rmsnorm(bc, sel, dnorm_, R, H, d.eps, sel);
  splash_weight head = lm_head_;  // the target's head, with the draft's activations
  head.flags |= SPLASH_WEIGHT_FAST;
  be->matmul(bc, &head, sel, R, logits, c.V);
  const bool selector = d.sel_k > 0, transform = d.out_mul != 1.f || d.softcap > 0.f;
  // greedy-only items (no selector, no transform of the rows) get their ids from the backend, and so do those
  // its sampler takes, keeping their distributions there for the verify pass (not with penalties: a row's
  // penalties count the tokens drafted before it, chosen in the same pass); the others' rows come back whole
  std::vector<char> mode(items.size(), kRowsHost);
  SampleDescs sd;
  for (size_t i = 0; i < items.size(); ++i) {
    DraftItem& it = items[i];
    if (selector || transform || it.n <= 0 || !it.sample || it.logits || it.sample->rows.size() > size_t(it.n)) continue;
    if (pick_on_backend_ && greedy_only(*it.sample)) {
      mode[i] = kRowsArgmax;
    } else if (sample_on_backend_ && backend_samples(*it.sample) && !it.sample->params.penalized()) {
      mode[i] = kRowsSampled;
      sd.add(*it.sample, int64_t(roff[i]), nullptr, 0, nullptr, draft_q_rows(it.seq, int(it.sample->rows.size())), c.V);
    }
  }
  const FetchedRows fetched = fetch_rows(logits, roff, mode, sd);
  const int32_t* ids = fetched.ids;
  float* lh = fetched.rows;
  check_backend();
  out.assign(items.size(), {});
  {
    std::lock_guard<std::mutex> l2(seq_mu_);
    for (DraftItem& it : items) draft_done(it.seq, it.seq->len + Bb);
  }
  bool any_sample = false;
  for (DraftItem& it : items) {
    it.seq->draft_tokens.clear();
    it.seq->draft_q.clear();
    it.seq->draft_qd_rows = 0;
    it.seq->draft_at = -1;
    any_sample |= bool(it.sample);
    if (it.sample && it.sample->rows.size() > size_t(it.n))
      throw Error("invalid_argument", "draft: more sampled rows than drafted positions");
  }
  // the selector reads the raw logits (its top-k) and the normed rows; without it, the rows are transformed here
  if (selector && any_sample) {
    std::vector<DraftItem> sub;
    std::vector<size_t> soff;
    for (size_t i = 0; i < items.size(); ++i)
      if (items[i].sample) sub.push_back(items[i]), soff.push_back(roff[i]);
    draft_select(sub, soff, sel, lh);
    for (size_t j = 0, i = 0; i < items.size(); ++i)
      if (items[i].sample) items[i].sampled = std::move(sub[j++].sampled);
  } else if (transform) {
    draft2::transform_logits(lh, size_t(R) * c.V, d.out_mul, d.softcap);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    auto& it = items[i];
    Sequence* s = it.seq;
    if (mode[i] != kRowsHost) {  // what sample_draft gives: each row's argmax at T = 0, else its draw from q
      if (mode[i] == kRowsArgmax) take_ids(ids + roff[i], it.sample->rows.size(), it.sampled);
      else take_sampled(ids + roff[i], *it.sample, false, it.sampled), s->draft_qd_rows = int32_t(it.sampled.size());
      for (const auto& x : it.sampled) s->draft_tokens.push_back(x.token);
      s->draft_at = s->len;
      s->draft_V = c.V;
      continue;
    }
    const float* rows = lh + roff[i] * c.V;
    if (it.sample) {
      // sampled drafts keep their distributions for the verify pass (sampler/speculative.cpp)
      if (!selector) sampler::sample_draft(rows, c.V, *it.sample, it.sampled, s->draft_q);
      for (const auto& x : it.sampled) s->draft_tokens.push_back(x.token);
      s->draft_at = s->len;
      s->draft_V = c.V;
    }
    if (it.logits) {
      out[i].assign(rows, rows + size_t(it.n) * c.V);
      if (selector && transform) draft2::transform_logits(out[i].data(), out[i].size(), d.out_mul, d.softcap);
    }
  }
}

float* HybridModel::draft_q_rows(Sequence* s, int rows) {
  if (rows > s->draft_qd_cap) {
    pool_.give(s->draft_qd);
    s->draft_qd = nullptr, s->draft_qd_cap = 0, s->draft_qd_rows = 0;
    size_t got = 0;
    s->draft_qd = static_cast<float*>(pool_.take(size_t(rows) * size_t(cfg_.V) * 4, &got));
    if (!s->draft_qd) throw Error("out_of_memory", "cannot allocate the draft's distributions");
    s->draft_qd_cap = int32_t(got / (size_t(cfg_.V) * 4));
  }
  return s->draft_qd;
}

void HybridModel::draft_q_to_host(Sequence* s) {
  if (!s->draft_q.empty() || s->draft_qd_rows <= 0) return;
  s->draft_q.resize(size_t(s->draft_qd_rows) * size_t(cfg_.V));
  be_->iface->copy_to_host(be_->ctx, s->draft_q.data(), s->draft_qd, s->draft_q.size() * 4);
}

void HybridModel::draft_done(Sequence* s, int32_t written) {
  s->draft_len = s->len;
  s->feat_rows = 0;
  // a ring's writes up to `written` overwrote the positions M before them
  if (const int32_t M = draft_ring(s->cap)) s->draft_lo = std::max(s->draft_lo, written - M);
}

void HybridModel::draft_attention_rows(const float* q, float* o, const DraftPlanes& kv, int len, int Bb, bool sliding,
                                 bool causal, float scale) {
  const DraftConfig& d = dcfg_;
  const int64_t qw = int64_t(d.nh) * d.hd, kvw = int64_t(d.nkv) * d.hd;
  for (int j = 0; j < Bb; ++j) {
    // keys [lo, hi) of the row at position p: its window (p − W, p + W) and, when causal, none after p
    const int p = len + j;
    int lo = 0, hi = causal ? p + 1 : len + Bb;
    if (sliding) {
      lo = std::max(0, p - d.window + 1);
      hi = std::min(hi, p + d.window);
    }
    splash_attn_args a{};
    a.n_tokens = 1;
    a.n_heads = d.nh;
    a.n_kv_heads = d.nkv;
    a.head_dim = d.hd;
    a.start = hi - 1 - lo;
    a.q = q + j * qw;
    a.q_stride = qw;
    // a ring holds the ≤ M positions [lo, hi) as contiguous rows from lo mod M
    const int64_t row = kv.ring ? lo % kv.ring : lo;
    a.k_cache = kv.k + row * kvw;
    a.v_cache = kv.v + row * kvw;
    a.out = o + j * qw;
    a.scale = scale;
    be_->iface->attention(be_->ctx, &a);
  }
}

}  // namespace splash
