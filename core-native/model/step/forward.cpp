// The batched forward step. Tokens of all items are flattened into one [N, H] activation block so
// every projection streams its weights once per step; sequence mixers (GDN, attention) then run
// per item against that item's state. Activations are fp32 backend buffers; every op goes through the
// backend table, and the only transfer back to the host is the logits, once per step.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/gdn_args.h"
#include "model/hybrid_model.h"
#include "runtime/error.h"

namespace splash {

void HybridModel::matmul(const splash_weight& w, const float* x, int n, float* y) const {
  be_->iface->matmul(be_->ctx, &w, x, n, y, w.rows);
}

float* HybridModel::buf(Buf b, size_t floats) {
  if (bufs_.size() != size_t(kNumBufs)) bufs_.assign(kNumBufs, {nullptr, 0});
  auto& [p, cap] = bufs_[b];
  if (floats > cap) {
    if (p) be_->iface->buffer_free(be_->ctx, p);
    const size_t n = std::max(floats, cap + cap / 2);
    p = static_cast<float*>(be_->iface->buffer_alloc(be_->ctx, n * 4));
    ++bufs_gen_;
    if (!p) {
      cap = 0;
      throw Error("out_of_memory", "cannot allocate " + std::to_string(n * 4) + " bytes of activations");
    }
    cap = n;
  }
  return p;
}

HybridModel::FetchedRows HybridModel::fetch_rows(float* logits, const std::vector<size_t>& off, const std::vector<char>& mode,
                                     const SampleDescs& sd) {
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const size_t V = size_t(cfg_.V), R = off.back();
  bool any_pick = false, any_rows = false, any_sampled = false;
  for (size_t i = 0; i + 1 < off.size(); ++i)
    if (off[i + 1] > off[i]) (mode[i] == kRowsArgmax ? any_pick : mode[i] == kRowsSampled ? any_sampled : any_rows) = true;
  FetchedRows f;
  if (any_pick || any_sampled) {
    auto* d = reinterpret_cast<int32_t*>(buf(kPick, R));
    if (any_pick) be->argmax_rows(bc, logits, int32_t(R), int64_t(V), d);
    if (any_sampled)  // after the argmax: its rows are the sampler's own, which it may change (penalties)
      be->sample_rows(bc, logits, int64_t(V), sd.descs.data(), int32_t(sd.descs.size()), sd.ints.data(),
                      int64_t(sd.ints.size()), d);
    pick_host_.resize(R);
    be->copy_to_host(bc, pick_host_.data(), d, R * 4);
    f.ids = pick_host_.data();
  }
  if (any_rows) {
    f.rows = host_logits(R * V);
    for (size_t i = 0; i + 1 < off.size(); ++i)
      if (mode[i] == kRowsHost && off[i + 1] > off[i])
        be->copy_to_host(bc, f.rows + off[i] * V, logits + off[i] * V, (off[i + 1] - off[i]) * V * 4);
  }
  if (!any_pick && !any_sampled && !any_rows) be->synchronize(bc);
  return f;
}

float* HybridModel::host_logits(size_t floats) {
  auto* gpa = be_->iface->get_proc_address;
  auto halloc = gpa ? reinterpret_cast<void* (*)(void*, size_t)>(gpa(be_->ctx, "splash_host_alloc")) : nullptr;
  auto hfree = gpa ? reinterpret_cast<void (*)(void*, void*)>(gpa(be_->ctx, "splash_host_free")) : nullptr;
  if (!halloc || !hfree) {
    logits_host_.resize(floats);
    return logits_host_.data();
  }
  if (floats > logits_pinned_cap_) {
    hfree(be_->ctx, logits_pinned_);
    logits_pinned_cap_ = 0;
    logits_pinned_ = static_cast<float*>(halloc(be_->ctx, floats * 4));
    if (!logits_pinned_) throw Error("out_of_memory", "cannot allocate " + std::to_string(floats * 4) + " bytes of pinned host memory");
    logits_pinned_cap_ = floats;
  }
  return logits_pinned_;
}

void HybridModel::check_item(const StepItem& it) const {
  if (!it.seq) throw Error("invalid_argument", "a step item has no sequence");
  if (it.tokens.empty()) throw Error("invalid_argument", "a step item has no tokens");
  const Sequence* s = it.seq;
  const int64_t n = int64_t(it.tokens.size());
  if (int64_t(s->len) + n > s->max_len)
    throw Error("too_long", std::to_string(s->len) + " + " + std::to_string(n) + " tokens exceed the sequence's maxLength " +
                                std::to_string(s->max_len));
  for (size_t j = 0; j < it.snaps.size(); ++j) {
    const int32_t L = it.snaps[j];
    if (it.verify || L <= s->len || L >= s->len + n || (j > 0 && L <= it.snaps[j - 1]))
      throw Error("invalid_argument", "kept lengths (snapshots) must ascend inside the step (" + std::to_string(s->len) +
                                          ", " + std::to_string(s->len + n) + "), and not in a verify pass");
  }
}

void HybridModel::step(std::vector<StepItem>& items, std::vector<std::vector<float>>& out) {
  // The addon checks each item as it parses it, so that a refused step leaves its sequences usable; this covers the
  // engine's other callers (the benches, the GPU tests), for which an overlong step would write past the KV planes.
  for (const auto& it : items) check_item(it);
  std::lock_guard<std::mutex> lock(compute_mu_);
  forward(items, out);
}

void HybridModel::check_backend() {
  auto* gpa = be_->iface->get_proc_address;
  if (!gpa) return;
  auto last = reinterpret_cast<const char* (*)(void*)>(gpa(be_->ctx, "splash_last_error"));
  if (!last) return;
  if (const char* e = last(be_->ctx)) throw Error("backend_error", std::string(be_->iface->name) + " backend: " + e);
}

void HybridModel::linear_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int64_t C = c.conv_ch(), Dv = c.Dv();
  float* qkv = buf(kQKV, size_t(N) * C);
  float* z = buf(kZ, size_t(N) * Dv);
  float* bb = buf(kB, size_t(N) * c.nv);
  float* aa = buf(kA, size_t(N) * c.nv);
  float* conv = buf(kConv, size_t(N) * C);
  float* o = buf(kO, size_t(N) * Dv);
  matmul(l.qkv, x, N, qkv);
  matmul(l.z, x, N, z);
  matmul(l.b, x, N, bb);
  matmul(l.a, x, N, aa);
  be->gdn_gates(bc, bb, aa, l.A_log, l.dt_bias, N, c.nv);
  int64_t off = 0;
  for (auto& it : items) {
    const int n = int(it.tokens.size());
    float* st = it.seq->gdn;
    auto args = [&](int64_t t, int nt) {
      return gdn_call(nt, c.nk, c.nv, c.dk, c.dv, conv + t * C, C, bb + t * c.nv, aa + t * c.nv, st + l.ssm_off,
                      o + t * Dv);
    };
    if (it.verify) {
      // one call each, with a decode's arithmetic per token (stepwise); the state after each token goes to its
      // slot, or (replay) the tokens' conv inputs and gates to the tape
      Sequence* s = it.seq;
      be->conv1d_silu(bc, qkv + off * C, n, int(C), c.conv_k, l.conv, st + l.conv_off, conv + off * C);
      splash_gdn_args g = args(off, n);
      g.stepwise = 1;
      if (!replay_) {
        g.states = s->slots + gdn_floats_ + l.ssm_off;
        g.states_stride = gdn_floats_;
        keep_conv_states(l, s, qkv + off * C, n);
      }
      be->gdn_recurrent(bc, &g);
      if (replay_) keep_replay_inputs(l, s, qkv, bb, aa, off, n);
      off += n;
      continue;
    }
    // one segment per kept state (StepItem::snaps) and one after the last: the calls, and so the bits, of steps
    // that ended at those lengths; after each segment but the last the layer's conv and GDN state is kept
    const Sequence* s = it.seq;
    int done = 0;
    for (size_t j = 0; j <= it.snaps.size(); ++j) {
      const int end = j < it.snaps.size() ? it.snaps[j] - s->len : n, m = end - done;
      be->conv1d_silu(bc, qkv + (off + done) * C, m, int(C), c.conv_k, l.conv, st + l.conv_off, conv + (off + done) * C);
      splash_gdn_args g = args(off + done, m);
      if (m > 1 && splash_backend_supports_op(be_, SPLASH_OP_GDN_CHUNKED)) be->gdn_chunked(bc, &g);
      else be->gdn_recurrent(bc, &g);
      if (j < it.snaps.size() && s->snaps[j].second) {
        const size_t floats = size_t(int64_t(c.conv_k - 1) * C + int64_t(c.nv) * c.dk * c.dv);
        be->copy2d(bc, s->snaps[j].second + l.conv_off, 0, st + l.conv_off, 0, floats * 4, 1);
      }
      done = end;
    }
    off += n;
  }
  be->gated_rmsnorm(bc, o, z, l.gnorm, N * c.nv, c.dv, c.eps, o);
  matmul(l.out, o, N, y);
}

void HybridModel::full_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int64_t qw = int64_t(c.nh) * c.hd * (c.attn_gate ? 2 : 1), kvw = int64_t(c.nkv) * c.hd, ow = int64_t(c.nh) * c.hd;
  const int64_t hstride = c.attn_gate ? 2 * c.hd : c.hd;
  float* qg = buf(kQG, size_t(N) * qw);
  float* k = buf(kK, size_t(N) * kvw);
  float* v = buf(kV, size_t(N) * kvw);
  float* q = buf(kQ, size_t(N) * ow);
  float* o = buf(kO, size_t(N) * ow);
  matmul(l.q, x, N, qg);
  matmul(l.k, x, N, k);
  matmul(l.v, x, N, v);
  // the query heads out of the (query, gate) interleave, then per-head norms
  be->copy2d(bc, q, size_t(c.hd) * 4, qg, size_t(hstride) * 4, size_t(c.hd) * 4, size_t(N) * c.nh);
  be->rmsnorm(bc, q, l.q_norm, N * c.nh, c.hd, c.eps, q);
  be->rmsnorm(bc, k, l.k_norm, N * c.nkv, c.hd, c.eps, k);
  const int32_t* sec = c.mrope.empty() ? nullptr : c.mrope.data();
  int64_t off = 0;
  const int64_t plane = kvw;
  for (size_t i = 0; i < items.size(); ++i) {
    auto& it = items[i];
    const int n = int(it.tokens.size());
    Sequence* s = it.seq;
    float* kc = s->kv + size_t(l.kv_index) * 2 * s->cap * plane;
    float* vc = kc + size_t(s->cap) * plane;
    if (gv_) {  // a graph's step (recorded or not): the length is read on the device (gv_[N + i])
      const int32_t* len = gv_ + N + i;
      be->rope_seq_dev(bc, q + off * ow, n, ow, c.nh, c.hd, c.hd, c.rot_dim, len, sec, c.rope_theta);
      be->rope_seq_dev(bc, k + off * kvw, n, kvw, c.nkv, c.hd, c.hd, c.rot_dim, len, sec, c.rope_theta);
      be->rows_at(bc, kc, k + off * kvw, n, kvw, len);
      be->rows_at(bc, vc, v + off * kvw, n, kvw, len);
    } else if (it.positions.empty()) {
      be->rope_seq(bc, q + off * ow, n, ow, c.nh, c.hd, c.hd, c.rot_dim, s->len, sec, c.rope_theta);
      be->rope_seq(bc, k + off * kvw, n, kvw, c.nkv, c.hd, c.hd, c.rot_dim, s->len, sec, c.rope_theta);
    } else {  // explicit (T, H, W) positions (image tokens)
      for (int i = 0; i < n; ++i) {
        const int32_t* pos = it.positions.data() + 3 * i;
        be->rope(bc, q + (off + i) * ow, c.nh, c.hd, c.hd, c.rot_dim, pos, sec, c.rope_theta);
        be->rope(bc, k + (off + i) * kvw, c.nkv, c.hd, c.hd, c.rot_dim, pos, sec, c.rope_theta);
      }
    }
    if (!gv_) {
      be->copy2d(bc, kc + size_t(s->len) * plane, 0, k + off * kvw, 0, size_t(n) * kvw * 4, 1);
      be->copy2d(bc, vc + size_t(s->len) * plane, 0, v + off * kvw, 0, size_t(n) * kvw * 4, 1);
    }
    splash_attn_args a{};
    a.n_tokens = n;
    a.n_heads = c.nh;
    a.n_kv_heads = c.nkv;
    a.head_dim = c.hd;
    a.start = s->len;
    a.q = q + off * ow;
    a.q_stride = ow;
    a.k_cache = kc;
    a.v_cache = vc;
    a.out = o + off * ow;
    a.scale = 1.f / std::sqrt(float(c.hd));
    if (gv_) a.start_dev = gv_ + N + i, a.cap = graph_cap(s, n);
    be->attention(bc, &a);
    off += n;
  }
  if (c.attn_gate) be->sigmoid_gate(bc, o, c.hd, qg + c.hd, hstride, N * c.nh, c.hd);
  matmul(l.o, o, N, y);
}

void HybridModel::mlp(const Layer& l, const float* x, int N, float* y) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  auto swiglu_mlp = [&](const splash_weight& g, const splash_weight& u, const splash_weight& d, const float* xi, int n,
                        float* yo) {
    const int64_t I = g.rows;
    float* gb = buf(kG, size_t(n) * I);
    float* ub = buf(kU, size_t(n) * I);
    matmul(g, xi, n, gb);
    matmul(u, xi, n, ub);
    be->swiglu(bc, gb, ub, n * I, gb);
    matmul(d, gb, n, yo);
  };
  if (!l.moe) {
    swiglu_mlp(l.gate, l.up, l.down, x, N, y);
    return;
  }
  float* logits = buf(kRouter, size_t(N) * c.E);
  // the shared expert's gate/up, its gate and the router all read x: issued together (one launch on a GPU, where
  // few-row matmuls ride in the q4 GEMV's launch); the backend's moe runs the rest of the shared expert
  float *sh = nullptr, *gate = nullptr, *sgb = nullptr, *sub = nullptr;
  if (l.shared) {
    sh = buf(kSh, size_t(N) * c.H);
    gate = buf(kGate, size_t(N));
    sgb = buf(kG, size_t(N) * l.sg.rows);
    sub = buf(kU, size_t(N) * l.sg.rows);
    matmul(l.sg, x, N, sgb);
    matmul(l.su, x, N, sub);
    matmul(l.sgate, x, N, gate);
  }
  matmul(l.router, x, N, logits);
  splash_moe_args m{};
  m.n_tokens = N;
  m.n_experts = c.E;
  m.top_k = c.topk;
  m.renorm = c.renorm_topk ? 1 : 0;
  m.x = x;
  m.logits = logits;
  m.gate = &l.eg.base;
  m.up = &l.eu.base;
  m.down = &l.ed.base;
  m.out = y;
  if (l.shared) m.sh_g = sgb, m.sh_u = sub, m.sh_down = &l.sd, m.sh_gate = gate, m.sh_out = sh;
  be->moe(bc, &m);
}

void HybridModel::queue_step(std::vector<StepItem>& items, int N, const StepBufs& b) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int H = c.H;
  float *h = b.h, *x = b.x, *y = b.y;
  if (gv_) {
    be->embed_dev(bc, &embed_, gv_, N, h);
  } else {
    std::vector<int32_t> toks;
    toks.reserve(N);
    for (auto& it : items) toks.insert(toks.end(), it.tokens.begin(), it.tokens.end());
    be->embed(bc, &embed_, toks.data(), N, h);
    size_t base = 0;
    for (auto& it : items) {
      for (size_t j = 0; j < it.embed_at.size(); ++j)  // image embeddings replace their pad tokens' rows
        be->copy_to_device(bc, h + (base + it.embed_at[j]) * H, it.embeds.data() + j * H, size_t(H) * 4);
      base += it.tokens.size();
    }
  }
  const int64_t NH = int64_t(N) * H;
  const int K = b.taps ? int(dcfg_.taps.size()) : 0;
  const bool fused = splash_backend_supports_op(be_, SPLASH_OP_ADD_RMSNORM);  // residual add + the next norm in one pass
  for (size_t i = 0; i < layers_.size(); ++i) {
    const Layer& l = layers_[i];
    if (!fused || i == 0) be->rmsnorm(bc, h, l.in_norm, N, H, c.eps, x);
    if (l.linear) linear_attention(l, items, x, N, y);
    else full_attention(l, items, x, N, y);
    if (fused) {
      be->add_rmsnorm(bc, h, y, l.post_norm, N, H, c.eps, x);
    } else {
      be->add(bc, h, y, NH);
      be->rmsnorm(bc, h, l.post_norm, N, H, c.eps, x);
    }
    mlp(l, x, N, y);
    if (fused && i + 1 < layers_.size()) be->add_rmsnorm(bc, h, y, layers_[i + 1].in_norm, N, H, c.eps, x);
    else be->add(bc, h, y, NH);
    if (K > 0) {
      const int j = tap_slot_[i];
      if (j >= 0) be->copy2d(bc, b.taps + size_t(j) * H, size_t(K) * H * 4, h, size_t(H) * 4, size_t(H) * 4, N);
    }
  }
  // logits only for the rows asked for (runs of consecutive rows are copied together)
  if (!b.logits) return;
  int r = 0;
  for (auto [first, n] : b.runs) {
    be->copy2d(bc, b.sel + size_t(r) * H, 0, h + size_t(first) * H, 0, size_t(n) * H * 4, 1);
    r += n;
  }
  be->rmsnorm(bc, b.sel, norm_, r, H, c.eps, b.sel);
  matmul(lm_head_, b.sel, r, b.logits);
}

void HybridModel::forward(std::vector<StepItem>& items, std::vector<std::vector<float>>& out) {
  const ModelConfig& c = cfg_;
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int H = c.H;
  int N = 0;
  for (auto& it : items) N += int(it.tokens.size());
  StepBufs b{};
  b.h = buf(kH, size_t(N) * H);
  b.x = buf(kX, size_t(N) * H);
  b.y = buf(kY, size_t(N) * H);
  for (auto& it : items) {
    Sequence* s = it.seq;
    s->spec_n = 0;
    open_snaps(it);
    if (it.verify && gdn_floats_ > 0) {  // both methods start from the state before the block
      ensure_slots(s, int32_t(it.tokens.size()));
      be->copy2d(bc, s->slots, 0, s->gdn, 0, size_t(gdn_floats_) * 4, 1);
    }
  }
  const int K = has_draft() ? int(dcfg_.taps.size()) : 0;
  bool any_capture = false;
  for (auto& it : items) any_capture |= it.capture && K > 0;
  b.taps = any_capture ? buf(kTaps, size_t(N) * K * H) : nullptr;
  int R = 0;
  {
    int off = 0;
    for (auto& it : items) {
      const int n = int(it.tokens.size());
      const int hr = it.head_rows();
      if (hr > 0) b.runs.push_back({off + n - hr, hr}), R += hr;
      off += n;
    }
  }
  if (R > 0) {
    b.sel = buf(kSel, size_t(R) * H);
    b.logits = buf(kLogits, size_t(R) * c.V);
  }
  if (!graph_step(items, N, b)) queue_step(items, N, b);
  out.assign(items.size(), {});
  // greedy-only items get their ids from the backend, and so do the others its sampler takes; the rest come
  // back whole
  std::vector<char> mode(items.size(), kRowsHost);
  std::vector<size_t> off(items.size() + 1, 0);
  SampleDescs sd;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& it = items[i];
    const size_t n = size_t(it.head_rows());
    off[i + 1] = off[i] + n;
    if (!it.sample || it.logit_rows() > 0 || n == 0) continue;
    if (pick_on_backend_ && greedy_only(*it.sample)) {
      mode[i] = kRowsArgmax;
    } else if (sample_on_backend_ && backend_samples(*it.sample)) {
      // a verify row with a draft at T > 0 needs the draft's distribution where the backend's sampler is
      const int S = int(it.sample->rows.size()), first = int(it.tokens.size()) - S;
      bool q_there = true;
      for (int k = 0; k < S && it.verify && it.sample->params.temperature > 0.f; ++k)
        if (it.sample->rows[size_t(k)].draft >= 0) q_there = q_there && it.seq->draft_qd_rows > first + k;
      if (!q_there) continue;
      mode[i] = kRowsSampled;
      sd.add(*it.sample, int64_t(off[i] + n) - S, it.verify ? it.tokens.data() + 1 : nullptr, it.verify ? first : 0,
             it.verify ? it.seq->draft_qd : nullptr, nullptr, c.V);
    }
  }
  keep_rows(items, b.logits, off);
  const FetchedRows fetched = fetch_rows(b.logits, off, mode, sd);
  const int32_t* ids = fetched.ids;
  float* lh = fetched.rows;
  check_backend();
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
        if (it.capture && s->draft_len >= 0 && s->feat_rows == int64_t(s->len - s->draft_len)) {
          ensure_feat(s, s->feat_rows + n);
          be->copy2d(bc, s->feat + size_t(s->feat_rows) * row, 0, b.taps + size_t(off) * row, 0, size_t(n) * row * 4, 1);
          s->feat_rows += n;
        } else {
          s->feat_rows = 0, s->draft_len = -1;  // context gap: the draft cannot run on this sequence any more
        }
      }
      s->len += n;
      off += n;
    }
  }
  size_t r = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    auto& it = items[i];
    const int n = it.head_rows();
    if (mode[i] != kRowsHost) {  // the backend chose (greedy: every row is its argmax, and a verify pass at T = 0
                                 // rejects nothing; sampled: rows after a rejected draft are left out)
      const int32_t* t = ids + r + size_t(n) - it.sample->rows.size();
      if (mode[i] == kRowsArgmax) take_ids(t, it.sample->rows.size(), it.sampled);
      else take_sampled(t, *it.sample, it.verify, it.sampled);
      r += size_t(n);
      continue;
    }
    const float* rows = lh + r * c.V;
    if (it.verify && it.sample) {
      // row r follows the drafts before it (penalties) and may verify its draft against the kept q
      const int S = int(it.sample->rows.size());
      sampler::Speculative spec;
      spec.extra = it.tokens.data() + 1;
      spec.first = int(it.tokens.size()) - S;
      draft_q_to_host(it.seq);
      spec.q = it.seq->draft_q.data();
      spec.q_rows = int(it.seq->draft_tokens.size());
      sampler::sample_rows(rows + size_t(n - S) * c.V, c.V, *it.sample, it.sampled, &spec);
      if (it.logit_rows() > 0) out[i].assign(rows + size_t(n - it.logit_rows()) * c.V, rows + size_t(n) * c.V);
    } else {
      take_rows(rows, n, c.V, it.logit_rows(), it.sample.get(), out[i], it.sampled);
    }
    r += size_t(n);
  }
}

}  // namespace splash
