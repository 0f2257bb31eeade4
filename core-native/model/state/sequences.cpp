// The sequence table: per-sequence state allocated from the pool, created, found, freed and truncated.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "model/hybrid_model.h"
#include "runtime/error.h"

namespace splash {

void* HybridModel::alloc_state(size_t bytes, bool zero) {
  if (host_memory_ && !zero) return host_state_alloc(bytes);
  return be_->iface->buffer_alloc(be_->ctx, bytes);
}

int32_t HybridModel::kv_capacity(int32_t max_len) const {
  // Device memory is committed at allocation: exactly what was asked. Host memory is only address space
  // until touched, so rows are rounded up (a quarter more, to 4096) and a conversation that grows turn by
  // turn keeps fitting the buffer its previous turn gave back to the pool.
  if (!host_memory_) return max_len;
  int64_t cap = (int64_t(max_len) + max_len / 4 + 4095) / 4096 * 4096;
  if (cfg_.max_pos > 0) cap = std::min<int64_t>(cap, cfg_.max_pos);
  return int32_t(std::max<int64_t>(cap, max_len));
}

void HybridModel::free_state(void* p) {
  if (!p) return;
  if (host_memory_) std::free(p);  // the CPU backend's buffers are aligned_alloc'd too
  else be_->iface->buffer_free(be_->ctx, p);
}

void HybridModel::ensure_feat(Sequence* s, int64_t rows) {
  if (rows <= s->feat_cap) return;
  const size_t row = dcfg_.taps.size() * size_t(cfg_.H);
  size_t got = 0;
  float* p = static_cast<float*>(pool_.take(size_t(std::max<int64_t>(rows, s->feat_cap * 2)) * row * 4, &got));
  if (!p) throw Error("out_of_memory", "cannot allocate draft features");
  if (s->feat_rows > 0) be_->iface->copy2d(be_->ctx, p, 0, s->feat, 0, size_t(s->feat_rows) * row * 4, 1);
  pool_.give(s->feat);
  s->feat = p;
  s->feat_cap = int64_t(got / (row * 4));
}

void HybridModel::ensure_slots(Sequence* s, int32_t n) {
  if (n <= s->slots_cap) return;
  pool_.give(s->slots);
  s->slots = nullptr;
  s->slots_cap = 0;
  size_t got = 0;
  s->slots = static_cast<float*>(pool_.take(rollback_floats(n) * 4, &got));
  if (!s->slots) throw Error("out_of_memory", "cannot allocate verification states");
  s->slots_cap = n;
}

int32_t HybridModel::create_sequence(int32_t max_len) {
  if (max_len <= 0) throw Error("invalid_argument", "maxLength must be a positive integer");
  if (cfg_.max_pos > 0 && max_len > cfg_.max_pos)
    throw Error("invalid_argument", "maxLength " + std::to_string(max_len) + " exceeds max_position_embeddings " +
                                        std::to_string(cfg_.max_pos));
  std::lock_guard<std::mutex> lock(seq_mu_);
  Sequence s;
  s.max_len = max_len;
  const size_t gb = size_t(gdn_floats_) * 4;
  if (gb) {
    if (!gdn_pool_.empty()) {
      s.gdn = gdn_pool_.back();
      gdn_pool_.pop_back();
      be_->iface->memset_zero(be_->ctx, s.gdn, gb);
    } else {
      s.gdn = static_cast<float*>(alloc_state(gb, true));
    }
    if (!s.gdn) throw Error("out_of_memory", "cannot allocate sequence state");
  }
  // KV is not zeroed: rows are written before they are read. A recycled buffer that holds max_len rows
  // serves, even when it was made for more; the planes are laid out for the rows both buffers hold.
  const int32_t want = kv_capacity(max_len);
  int64_t cap = INT32_MAX;
  const size_t row = size_t(kv_floats_per_token_) * 4;
  if (row) {
    size_t got = 0;
    s.kv = static_cast<float*>(pool_.take(row * size_t(max_len), row * size_t(want), &got));
    if (!s.kv) {
      if (s.gdn) gdn_pool_.push_back(s.gdn);
      throw Error("out_of_memory", "cannot allocate a KV cache of " + std::to_string(row * size_t(want)) + " bytes");
    }
    cap = std::min<int64_t>(cap, int64_t(got / row));
  }
  if (has_draft()) {
    size_t got = 0;
    s.dkv = static_cast<float*>(pool_.take(draft_bytes(max_len), draft_bytes(std::min<int64_t>(cap, want)), &got));
    if (!s.dkv) {
      if (s.gdn) gdn_pool_.push_back(s.gdn);
      pool_.give(s.kv);
      throw Error("out_of_memory", "cannot allocate a draft KV cache");
    }
    // the rows the buffer holds for every layer (a sliding layer's ring does not grow with them)
    cap = draft_cap(got, cap < INT32_MAX ? cap : std::max<int64_t>(want, max_len));
  }
  s.cap = int32_t(cap < INT32_MAX ? cap : max_len);
  s.id = next_id_++;
  seqs_.emplace(s.id, std::move(s));
  return s.id;
}

Sequence* HybridModel::find(int32_t id) {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? nullptr : &it->second;
}

void HybridModel::free_sequence(int32_t id) {
  std::lock_guard<std::mutex> lock(seq_mu_);
  Sequence* s = find(id);
  if (!s) throw Error("unknown_sequence", "unknown sequence " + std::to_string(id));
  if (s->busy) throw Error("sequence_busy", "sequence " + std::to_string(id) + " is part of a running step");
  if (s->gdn) gdn_pool_.push_back(s->gdn);
  drop_snaps(s, -1);
  pool_.give(s->kv);
  pool_.give(s->dkv);
  pool_.give(s->feat);
  pool_.give(s->slots);
  pool_.give(s->draft_qd);
  seqs_.erase(id);
}

void HybridModel::truncate_sequence(int32_t id, int32_t len) {
  // a rollback by replay runs GDN steps on the backend, which a running step also uses
  std::unique_lock<std::mutex> device(compute_mu_, std::defer_lock);
  if (replay_) device.lock();
  std::lock_guard<std::mutex> lock(seq_mu_);
  Sequence* s = find(id);
  if (!s) throw Error("unknown_sequence", "unknown sequence " + std::to_string(id));
  if (s->busy) throw Error("sequence_busy", "sequence " + std::to_string(id) + " is part of a running step");
  if (len < 0 || len > s->len)
    throw Error("invalid_argument", "cannot truncate to " + std::to_string(len) + " (length is " + std::to_string(s->len) + ")");
  if (len == s->len) return;
  // draft context: pending features beyond len are dropped; cached context rows beyond len are stale. Sliding
  // layers hold positions [draft_lo, draft_len) only: when the window before len is no longer among them (the ring
  // moved past it), the context has a gap, as after a step without capture
  auto cut_draft = [&] {
    if (!has_draft()) return;
    if (len == 0) {
      s->draft_len = 0, s->draft_lo = 0, s->feat_rows = 0;
      return;
    }
    if (s->draft_len < 0) return;  // the draft context had a gap; only a reset repairs it
    if (len < s->draft_len) {
      s->draft_len = len;
      s->feat_rows = 0;
      if (len - draft_keep(len) < s->draft_lo) s->draft_len = -1;
    } else {
      s->feat_rows = len - s->draft_len;
    }
  };
  if (len == 0) {
    if (s->gdn) be_->iface->memset_zero(be_->ctx, s->gdn, size_t(gdn_floats_) * 4);
    drop_snaps(s, 0);
    s->len = 0;
    s->broken = false;
    s->spec_n = 0;
    cut_draft();
    return;
  }
  if (gdn_floats_ > 0) {
    // speculative rollback: the last verify step kept what restores the GDN state of any length it covered
    if (s->spec_n == 0 || len < s->spec_base || len >= s->spec_base + s->spec_n)
      throw Error("state_not_truncatable",
                  "linear-attention state cannot be rolled back to " + std::to_string(len) +
                      "; truncate to 0, to the current length, or within the last verify step");
    roll_back(s, len);
  }
  drop_snaps(s, len);
  s->len = len;
  s->spec_n = 0;
  cut_draft();
}

}  // namespace splash
