// Saved pieces of sequence state for the prefix cache. Attention KV can be
// cut anywhere, so it is saved as ranges of rows (the cache keeps them as fixed blocks shared by every
// snapshot of the same prefix), in the memory the sequences' KV lives in (device memory on a device backend);
// GDN and conv state cannot be sliced, so a whole state is saved at one length (in the same memory). Restoring copies
// blocks and a state into a fresh sequence, which then continues as if it had computed that prefix itself: the rows and the state are the very values the first sequence computed.
#include <algorithm>
#include <cstring>

#include "model/hybrid_model.h"
#include "runtime/error.h"

namespace splash {

namespace {

bool is_sliding(const DraftConfig& d, int li) { return !d.sliding.empty() && d.sliding[li]; }

int count_sliding(const DraftConfig& d) {
  int n = 0;
  for (int li = 0; li < d.L; ++li) n += is_sliding(d, li);
  return n;
}

// `count` planes of `width` bytes, dst_pitch / src_pitch bytes apart: one 2-D copy (a restore of a 32K prefix on
// the 27B shape made ~9K copies, 63 ms on the H200, one per block and plane), per plane past a pitch of 1 GiB
// (the limit of 2-D copies on some backends is 2 GiB)
void copy_planes(const splash_backend* be, float* dst, size_t dst_pitch, const float* src, size_t src_pitch,
                 size_t width, int64_t count) {
  constexpr size_t kMaxPitch = size_t(1) << 30;
  if (count <= 0 || width == 0) return;
  if (dst_pitch <= kMaxPitch && src_pitch <= kMaxPitch) {
    be->iface->copy2d(be->ctx, dst, dst_pitch, src, src_pitch, width, size_t(count));
    return;
  }
  for (int64_t p = 0; p < count; ++p)
    be->iface->copy2d(be->ctx, reinterpret_cast<char*>(dst) + p * dst_pitch, 0,
                      reinterpret_cast<const char*>(src) + p * src_pitch, 0, width, 1);
}

}  // namespace

Sequence* HybridModel::idle_sequence(int32_t id) {
  Sequence* s = find(id);
  if (!s) throw Error("unknown_sequence", "unknown sequence " + std::to_string(id));
  if (s->busy) throw Error("sequence_busy", "sequence " + std::to_string(id) + " is part of a running step");
  return s;
}

int64_t HybridModel::save_rows(int32_t id, int32_t start, int32_t n) {
  auto lock = saved_lock();
  Sequence* s = idle_sequence(id);
  if (start < 0 || n <= 0 || start + n > s->len)
    throw Error("invalid_argument", "rows [" + std::to_string(start) + ", " + std::to_string(start + n) +
                                        ") are not computed (length " + std::to_string(s->len) + ")");
  SavedRows r;
  r.n = n;
  const int64_t w = int64_t(cfg_.nkv) * cfg_.hd;
  // the draft's context rows (full-attention layers: a sliding layer's window travels with the state) are kept
  // only when the draft has seen all of them
  r.draft = has_draft() && s->draft_len >= start + n;
  const int64_t dw = has_draft() ? int64_t(dcfg_.nkv) * dcfg_.hd : 0;
  const int dfull = has_draft() ? dcfg_.L - count_sliding(dcfg_) : 0;
  r.floats = size_t(2 * n_full_ * w + (r.draft ? 2 * dfull * dw : 0)) * size_t(n);
  r.data = std::unique_ptr<float[], SavedFree>(static_cast<float*>(alloc_state(r.floats * 4, false)), SavedFree{this});
  if (!r.data) throw Error("out_of_memory", "cannot allocate " + std::to_string(r.floats * 4) + " bytes for saved rows");
  float* out = r.data.get();
  // on the CPU backend copy2d is a memcpy; on a device one a copy queued inside the device
  copy_planes(be_, out, size_t(n) * w * 4, s->kv + int64_t(start) * w, size_t(s->cap) * w * 4, size_t(n) * w * 4, 2 * n_full_);
  out += size_t(2 * n_full_) * n * w;
  if (r.draft) {
    for (int li = 0; li < dcfg_.L; ++li) {
      if (is_sliding(dcfg_, li)) continue;
      const DraftPlanes dp = draft_planes(*s, li);
      for (const float* plane : {dp.k, dp.v}) {
        be_->iface->copy2d(be_->ctx, out, 0, plane + int64_t(start) * dw, 0, size_t(n) * dw * 4, 1);
        out += size_t(n) * dw;
      }
    }
  }
  const int64_t key = next_saved_++;
  saved_rows_.emplace(key, std::move(r));
  return key;
}

void HybridModel::drop_snaps(Sequence* s, int32_t length) {
  auto& v = s->snaps;
  for (auto& [len, p] : v)
    if (len > length) free_state(p), p = nullptr;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const auto& k) { return k.first > length; }), v.end());
}

void HybridModel::open_snaps(const StepItem& it) {  // the lengths were checked by step() (check_item)
  Sequence* s = it.seq;
  drop_snaps(s, -1);
  for (const int32_t L : it.snaps) {
    // memory the plan does not count (it becomes a saved state's, which the cache's budget does): a state that does
    // not fit is not kept, and its save fails, not the step
    float* p = gdn_floats_ > 0 ? static_cast<float*>(alloc_state(size_t(gdn_floats_) * 4, false)) : nullptr;
    s->snaps.emplace_back(L, p);
  }
}

int64_t HybridModel::save_state(int32_t id, int32_t length) {
  auto lock = saved_lock();
  Sequence* s = idle_sequence(id);
  if (s->broken) throw Error("sequence_broken", "sequence " + std::to_string(id) + " failed earlier");
  SavedState st;
  st.gdn = std::unique_ptr<float[], SavedFree>(nullptr, SavedFree{this});  // deleters set before any assignment
  st.win = std::unique_ptr<float[], SavedFree>(nullptr, SavedFree{this});
  st.len = length < 0 ? s->len : length;
  st.floats = size_t(gdn_floats_);
  auto kept = std::find_if(s->snaps.begin(), s->snaps.end(), [&](const auto& k) { return k.first == st.len; });
  if (st.len != s->len && kept == s->snaps.end())
    throw Error("invalid_argument", "sequence " + std::to_string(id) + " has no state at length " + std::to_string(st.len) +
                                        " (its length is " + std::to_string(s->len) +
                                        "; a step keeps states only at the lengths its item asks for)");
  if (st.len != s->len && st.floats > 0 && !kept->second)
    throw Error("out_of_memory", "the state at length " + std::to_string(st.len) + " could not be kept (no memory for it)");
  if (st.len != s->len) {  // the kept state becomes the saved one
    st.gdn = std::unique_ptr<float[], SavedFree>(kept->second, SavedFree{this});
    s->snaps.erase(kept);
  } else if (st.floats > 0) {
    st.gdn = std::unique_ptr<float[], SavedFree>(static_cast<float*>(alloc_state(st.floats * 4, false)), SavedFree{this});
    if (!st.gdn) throw Error("out_of_memory", "cannot allocate " + std::to_string(st.floats * 4) + " bytes for a saved state");
    be_->iface->copy2d(be_->ctx, st.gdn.get(), 0, s->gdn, 0, st.floats * 4, 1);
  }
  // the draft context travels with the state only when the draft has consumed every position up to it and, for
  // sliding layers, still holds the window before it (saved here: the window before the next block)
  int32_t keep = 0;
  st.draft = has_draft() && s->draft_len >= st.len;
  if (st.draft) {
    keep = draft_keep(st.len);
    if (keep > 0 && st.len - keep < s->draft_lo) st.draft = false, keep = 0;
  }
  if (keep > 0) {
    const int64_t dw = int64_t(dcfg_.nkv) * dcfg_.hd;
    st.win_n = keep;
    st.win_floats = size_t(2 * count_sliding(dcfg_) * dw) * size_t(keep);
    st.win = std::unique_ptr<float[], SavedFree>(static_cast<float*>(alloc_state(st.win_floats * 4, false)), SavedFree{this});
    if (!st.win) throw Error("out_of_memory", "cannot allocate " + std::to_string(st.win_floats * 4) + " bytes for a saved draft window");
    float* out = st.win.get();
    for (int li = 0; li < dcfg_.L; ++li) {
      if (!is_sliding(dcfg_, li)) continue;
      // ≤ window − 1 positions: contiguous rows in a ring too
      const DraftPlanes dp = draft_planes(*s, li);
      const int64_t row = dp.ring ? (st.len - keep) % dp.ring : st.len - keep;
      for (const float* plane : {dp.k, dp.v}) {
        be_->iface->copy2d(be_->ctx, out, 0, plane + row * dw, 0, size_t(keep) * dw * 4, 1);
        out += size_t(keep) * dw;
      }
    }
  }
  const int64_t key = next_saved_++;
  saved_states_.emplace(key, std::move(st));
  return key;
}

bool HybridModel::restore(int32_t id, const std::vector<int64_t>& rows, int64_t state) {
  auto lock = saved_lock();
  Sequence* s = idle_sequence(id);
  auto st = saved_states_.find(state);
  if (st == saved_states_.end()) throw Error("invalid_argument", "unknown saved state " + std::to_string(state));
  std::vector<const SavedRows*> parts;
  int64_t total = 0;
  bool draft = st->second.draft;
  for (int64_t k : rows) {
    auto it = saved_rows_.find(k);
    if (it == saved_rows_.end()) throw Error("invalid_argument", "unknown saved rows " + std::to_string(k));
    parts.push_back(&it->second);
    total += it->second.n;
    draft = draft && it->second.draft;
  }
  const int32_t len = st->second.len;
  if (total != len)
    throw Error("invalid_argument", "saved rows cover " + std::to_string(total) + " positions but the state is at " +
                                        std::to_string(len));
  if (len > s->max_len)
    throw Error("too_long", "a saved prefix of " + std::to_string(len) + " tokens does not fit a sequence of " +
                                std::to_string(s->max_len));
  const int64_t w = int64_t(cfg_.nkv) * cfg_.hd;
  const int64_t dw = has_draft() ? int64_t(dcfg_.nkv) * dcfg_.hd : 0;
  int64_t at = 0;
  for (const SavedRows* r : parts) {
    const float* in = r->data.get();
    copy_planes(be_, s->kv + at * w, size_t(s->cap) * w * 4, in, size_t(r->n) * w * 4, size_t(r->n) * w * 4, 2 * n_full_);
    in += size_t(2 * n_full_) * r->n * w;
    if (draft) {
      for (int li = 0; li < dcfg_.L; ++li) {
        if (is_sliding(dcfg_, li)) continue;
        const DraftPlanes dp = draft_planes(*s, li);
        draft_put(dp, at, in, in + size_t(r->n) * dw, r->n);
        in += 2 * size_t(r->n) * dw;
      }
    }
    at += r->n;
  }
  // the sliding layers' window, at its positions (in a ring: both copies)
  const SavedState& ss = st->second;
  if (draft && ss.win_n > 0) {
    const float* in = ss.win.get();
    for (int li = 0; li < dcfg_.L; ++li) {
      if (!is_sliding(dcfg_, li)) continue;
      draft_put(draft_planes(*s, li), len - ss.win_n, in, in + size_t(ss.win_n) * dw, ss.win_n);
      in += 2 * size_t(ss.win_n) * dw;
    }
  }
  if (st->second.floats > 0) be_->iface->copy2d(be_->ctx, s->gdn, 0, st->second.gdn.get(), 0, st->second.floats * 4, 1);
  drop_snaps(s, -1);
  s->len = len;
  s->broken = false;
  s->spec_n = 0;
  s->feat_rows = 0;
  // without the draft's context for every position the draft cannot run on this sequence
  s->draft_len = has_draft() ? (draft ? len : -1) : 0;
  s->draft_lo = draft && count_sliding(dcfg_) > 0 ? len - ss.win_n : 0;
  return draft;
}

void HybridModel::free_saved(int64_t key) {
  auto lock = saved_lock();
  if (saved_rows_.erase(key) == 0 && saved_states_.erase(key) == 0)
    throw Error("invalid_argument", "unknown saved rows or state " + std::to_string(key));
}

HybridModel::SavedStats HybridModel::saved_stats() {
  std::lock_guard<std::mutex> lock(seq_mu_);
  SavedStats st;
  st.sequences = seqs_.size();
  st.rows = saved_rows_.size();
  st.states = saved_states_.size();
  for (auto& [k, r] : saved_rows_) st.bytes += r.floats * 4;
  for (auto& [k, r] : saved_states_) st.bytes += (r.floats + r.win_floats) * 4;
  st.pooled = pool_.stats().idle;
  return st;
}

}  // namespace splash
