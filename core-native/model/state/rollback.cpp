// Rolling a sequence's GDN and conv state back to the accepted prefix of a verify step. Two methods, one chosen
// per model at open:
// - states: the verify step keeps the whole state after every verified position; rollback copies one back.
// - replay: the verify step keeps the state at the block's start and, per linear layer and token, the conv
//   input row and the two gates; rollback restores the start state and re-runs the accepted tokens through the
//   conv and recurrence with a decode's arithmetic per token (stepwise), so the result is bit-identical to
//   decoding them.
// Both go through the backend table only (copy2d, conv1d_silu, gdn_recurrent), so every backend runs them.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "backend/gdn_args.h"
#include "model/hybrid_model.h"
#include "model/state/state_sizes.h"
#include "runtime/error.h"

namespace splash {

void HybridModel::choose_rollback() {
  replay_ = false;
  if (n_linear_ == 0) return;
  if (const std::string& e = opts_.gdn_rollback; !e.empty()) {
    if (e == "replay") replay_ = true;
    else if (e != "states") throw Error("invalid_argument", "SPLASH_GDN_ROLLBACK must be replay or states, not " + e);
    return;
  }
  replay_ = rollback_replay_by_size(cfg_);
}

size_t HybridModel::rollback_floats(int32_t tokens) const {
  const StateLayout layout{gdn_floats_, kv_floats_per_token_, n_full_, n_linear_};
  return splash::rollback_floats(cfg_, layout, replay_, tokens);
}

// Row j of slot i+1's conv state (the last K−1 inputs up to token i) is row i+1+j of [start state (K−1 rows);
// the block's inputs]: per row j, the first slots take start-state rows, the rest input rows, two strided copies.
void HybridModel::keep_conv_states(const Layer& l, Sequence* s, const float* x, int n) {
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int64_t C = cfg_.conv_ch();
  const int P = cfg_.conv_k - 1;
  const size_t row = size_t(C) * 4, pitch = size_t(gdn_floats_) * 4;
  float* dst = s->slots + gdn_floats_ + l.conv_off;
  const float* start = s->slots + l.conv_off;
  for (int j = 0; j < P; ++j) {
    const int from_start = std::min(n, P - 1 - j);  // slots i+1 with i+1+j < P
    float* d = dst + size_t(j) * C;
    if (from_start > 0) be->copy2d(bc, d, pitch, start + size_t(j + 1) * C, row, row, size_t(from_start));
    if (n > from_start) be->copy2d(bc, d + size_t(from_start) * gdn_floats_, pitch, x, row, row, size_t(n - from_start));
  }
}

// Tape layout after the start state: [linear layer][token (slots_cap)][conv input C | beta nv | g nv].
void HybridModel::keep_replay_inputs(const Layer& l, Sequence* s, const float* qkv, const float* beta, const float* g,
                               int64_t off, int n) {
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int64_t C = cfg_.conv_ch(), nv = cfg_.nv, W = tape_row();
  float* row = s->slots + gdn_floats_ + size_t(l.gdn_index) * s->slots_cap * W;
  be->copy2d(bc, row, size_t(W) * 4, qkv + off * C, size_t(C) * 4, size_t(C) * 4, size_t(n));
  be->copy2d(bc, row + C, size_t(W) * 4, beta + off * nv, size_t(nv) * 4, size_t(nv) * 4, size_t(n));
  be->copy2d(bc, row + C + nv, size_t(W) * 4, g + off * nv, size_t(nv) * 4, size_t(nv) * 4, size_t(n));
}

void HybridModel::roll_back(Sequence* s, int32_t len) {
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  const int32_t n = len - s->spec_base;
  if (!replay_) {
    be->copy2d(bc, s->gdn, 0, s->slots + size_t(n) * gdn_floats_, 0, size_t(gdn_floats_) * 4, 1);
    return;
  }
  be->copy2d(bc, s->gdn, 0, s->slots, 0, size_t(gdn_floats_) * 4, 1);
  if (n == 0) return;
  const ModelConfig& c = cfg_;
  const int64_t C = c.conv_ch(), W = tape_row(), nv = c.nv;
  float* conv = buf(kConv, size_t(n) * C);
  float* o = buf(kO, size_t(n) * c.Dv());
  for (const Layer& l : layers_) {
    if (!l.linear) continue;
    // the kept tokens' inputs as the calls take them (rows of C, of nv, of nv); one token reads the tape in place
    const float* tape = s->slots + gdn_floats_ + size_t(l.gdn_index) * s->slots_cap * W;
    const float *x = tape, *beta = tape + C, *g = tape + C + nv;
    if (n > 1) {
      float* xr = buf(kQKV, size_t(n) * C);
      float* br = buf(kB, size_t(n) * nv);
      float* gr = buf(kA, size_t(n) * nv);
      be->copy2d(bc, xr, size_t(C) * 4, x, size_t(W) * 4, size_t(C) * 4, size_t(n));
      be->copy2d(bc, br, size_t(nv) * 4, beta, size_t(W) * 4, size_t(nv) * 4, size_t(n));
      be->copy2d(bc, gr, size_t(nv) * 4, g, size_t(W) * 4, size_t(nv) * 4, size_t(n));
      x = xr, beta = br, g = gr;
    }
    // one call each, with a decode's arithmetic per token (stepwise): the bits of decoding them
    be->conv1d_silu(bc, x, n, int(C), c.conv_k, l.conv, s->gdn + l.conv_off, conv);
    splash_gdn_args a = gdn_call(n, c.nk, c.nv, c.dk, c.dv, conv, C, beta, g, s->gdn + l.ssm_off, o);
    a.stepwise = 1;
    be->gdn_recurrent(bc, &a);
  }
  be->synchronize(bc);
  check_backend();
}

}  // namespace splash
