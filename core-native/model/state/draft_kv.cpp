// The draft's per-sequence KV layout (model.h Sequence::dkv). A full-attention draft layer keeps the context K/V of
// every position, rows cap + B (the block's rows follow the context as scratch). A sliding-window layer only ever
// reads keys within its window of the block (draft.cpp draft_attention_rows: at most window − 1 context positions
// and the block's B rows), so it keeps a ring of M = window + B positions instead, stored twice: position p at rows
// p mod M and p mod M + M. Any M consecutive positions are then contiguous rows, and the backend's attention slot
// (keys from a base pointer) reads a window as it reads the linear layout. A ring is used only when its 2M rows
// are fewer than the linear layout's (a short sequence keeps the linear rows), so the draft KV of a sequence is
// never larger than before, and a sliding layer's share no longer grows with its length.
#include <algorithm>

#include "model/hybrid_model.h"

namespace splash {

namespace {

bool any_sliding(const DraftConfig& d) {
  return d.window > 0 && std::any_of(d.sliding.begin(), d.sliding.end(), [](bool x) { return x; });
}

}  // namespace

int32_t HybridModel::draft_ring(int64_t cap) const {
  const DraftConfig& d = dcfg_;
  if (!any_sliding(d)) return 0;
  const int64_t M = int64_t(d.window) + d.B;
  return 2 * M < cap + d.B ? int32_t(M) : 0;
}

int64_t HybridModel::draft_plane_rows(int li, int64_t cap) const {
  const DraftConfig& d = dcfg_;
  const bool sliding = !d.sliding.empty() && d.sliding[li];
  const int32_t ring = sliding ? draft_ring(cap) : 0;
  return ring ? 2 * int64_t(ring) : cap + d.B;
}

uint64_t HybridModel::draft_bytes(int64_t max_len) const {
  if (!has_draft()) return 0;
  const DraftConfig& d = dcfg_;
  uint64_t rows = 0;
  for (int li = 0; li < d.L; ++li) rows += uint64_t(draft_plane_rows(li, max_len));
  return 2 * rows * uint64_t(d.nkv) * d.hd * 4;
}

int64_t HybridModel::draft_cap(size_t bytes, int64_t hi) const {
  // draft_bytes grows with cap (a ring, once taken, stays fixed): the largest cap that fits, by bisection
  int64_t lo = 0;
  if (draft_bytes(hi) <= bytes) return hi;
  while (lo + 1 < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    (draft_bytes(mid) <= bytes ? lo : hi) = mid;
  }
  return lo;
}

HybridModel::DraftPlanes HybridModel::draft_planes(const Sequence& s, int li) const {
  const int64_t kvw = int64_t(dcfg_.nkv) * dcfg_.hd;
  int64_t off = 0;
  for (int l = 0; l < li; ++l) off += 2 * draft_plane_rows(l, s.cap) * kvw;
  const int64_t rows = draft_plane_rows(li, s.cap);
  const bool sliding = !dcfg_.sliding.empty() && dcfg_.sliding[li];
  DraftPlanes p;
  p.k = s.dkv + off;
  p.v = p.k + rows * kvw;
  p.ring = sliding ? draft_ring(s.cap) : 0;
  return p;
}

int32_t HybridModel::draft_keep(int32_t len) const {
  // the first block row (position len) sees keys from len − window + 1 on; later rows and causal rows no earlier
  const DraftConfig& d = dcfg_;
  return any_sliding(d) ? std::min(len, d.window - 1) : 0;
}

void HybridModel::draft_put(const DraftPlanes& p, int64_t pos, const float* k, const float* v, int n) {
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int64_t kvw = int64_t(dcfg_.nkv) * dcfg_.hd;
  auto rows = [&](int64_t row, int64_t from, int64_t count) {
    be->copy2d(bc, p.k + row * kvw, 0, k + from * kvw, 0, size_t(count * kvw) * 4, 1);
    be->copy2d(bc, p.v + row * kvw, 0, v + from * kvw, 0, size_t(count * kvw) * 4, 1);
  };
  if (n <= 0) return;
  if (!p.ring) return rows(pos, 0, n);
  // both copies of each position; a run that passes the ring's end continues at its start
  const int64_t M = p.ring, r = pos % M, a = std::min<int64_t>(n, M - r);
  rows(r, 0, a);
  rows(r + M, 0, a);
  if (n > a) {
    rows(0, a, n - a);
    rows(M, a, n - a);
  }
}

}  // namespace splash
