#include "model/state/state_sizes.h"

namespace splash {

StateLayout state_layout(const ModelConfig& c) {
  StateLayout s;
  int64_t gdn = 0;
  for (bool lin : c.linear) {
    if (lin) {
      ++s.n_linear;
      gdn += int64_t(c.conv_k - 1) * c.conv_ch() + int64_t(c.nv) * c.dk * c.dv;
    } else {
      ++s.n_full;
    }
  }
  s.gdn_floats = (gdn + 15) / 16 * 16;
  s.kv_floats_per_token = 2 * s.n_full * int64_t(c.nkv) * c.hd;
  return s;
}

bool rollback_replay_by_size(const ModelConfig& c) {
  // Measured: with a recurrent state of 1 MiB or more per linear layer (0.8B and up), skipping the B + 1 state
  // copies saves a verify more CPU than replaying the few tokens a pass typically keeps costs the rollback, and
  // replay keeps a fraction of the memory; below that the replay's per-op dispatch costs about what the small
  // copies do.
  return int64_t(c.nv) * c.dk * c.dv * 4 >= (int64_t(1) << 20);
}

size_t rollback_floats(const ModelConfig& c, const StateLayout& s, bool replay, int32_t tokens) {
  if (!replay) return size_t(tokens + 1) * size_t(s.gdn_floats);
  return size_t(s.gdn_floats) + size_t(tokens) * size_t(s.n_linear) * size_t(replay_row_floats(c));
}

PlanSizes plan_sizes(const ModelConfig& c, const DraftConfig* d, int elem_bytes, bool replay) {
  const StateLayout s = state_layout(c);
  PlanSizes p;
  const double e = elem_bytes;
  const double conv = double(c.conv_k - 1) * c.conv_ch(), ssm = double(c.nv) * c.dk * c.dv;
  // the block's bytes, rounded up as state_layout rounds its floats (16 floats = 64 bytes)
  const double raw = double(s.n_linear) * (ssm * 4 + conv * e);
  p.recurrent = double((int64_t(raw) + 63) / 64 * 64);
  p.kv_per_token = double(s.n_full) * 2 * c.nkv * c.hd * e;
  if (d && d->B > 0) {
    int sliding = 0;
    if (d->window > 0)
      for (bool x : d->sliding) sliding += x;
    const double row = 2.0 * d->nkv * d->hd * e;  // K and V of one position, one draft layer
    p.kv_per_token += double(d->L - sliding) * row;
    p.draft_window = sliding > 0 ? double(sliding) * row * 2 * (d->window + d->B) : 0;
    if (p.recurrent > 0) {
      const double per_token = double(s.n_linear) * double(replay_row_floats(c)) * 4;
      p.speculative = replay ? p.recurrent + d->B * per_token : double(d->B + 1) * p.recurrent;
    }
    p.draft_rows = d->B > 1 ? double(d->B - 1) * c.V * 4 : 0;
  }
  return p;
}

}  // namespace splash
