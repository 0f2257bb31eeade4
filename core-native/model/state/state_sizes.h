// Per-sequence state sizes, the one place they are computed: the model lays out and allocates a sequence's state
// by them (model/load/weights.cpp, model/state/sequences.cpp), and the memory plan asks for them before any model opens
// (the addon's stateSizes, which src/serving/memory-plan.ts calls).
#pragma once
#include <cstddef>
#include <cstdint>

#include "model/config.h"

namespace splash {

// A sequence's target state, in floats.
struct StateLayout {
  int64_t gdn_floats = 0;           // conv + recurrent state of every linear layer, one block (rounded up to 16)
  int64_t kv_floats_per_token = 0;  // K and V of every full-attention layer
  int64_t n_full = 0, n_linear = 0;
};
StateLayout state_layout(const ModelConfig& c);

// How a verify step's GDN/conv state rolls back (model/state/rollback.cpp) when nothing forces it: replay from the block's
// start state when one linear layer's recurrent state is 1 MiB or more, else keep the state after every position.
bool rollback_replay_by_size(const ModelConfig& c);
// Replay inputs of one linear layer and one token (conv input row and the two gates), floats.
inline int64_t replay_row_floats(const ModelConfig& c) { return c.conv_ch() + 2 * int64_t(c.nv); }
// Floats a verify step of `tokens` tokens keeps for the rollback.
size_t rollback_floats(const ModelConfig& c, const StateLayout& s, bool replay, int32_t tokens);

// What the memory plan counts per sequence, in bytes, with KV and conv state of `elem_bytes` per value (the
// recurrent state is fp32 always; the engine keeps everything fp32 today, elem_bytes 4).
struct PlanSizes {
  double recurrent = 0;     // conv + recurrent state of every linear layer
  double kv_per_token = 0;  // target K/V and the draft's full-attention layers, per token
  double draft_window = 0;  // the draft's sliding layers: a ring of window + block positions stored twice
  double speculative = 0;   // what a verify step of one block keeps for the rollback (0 without a draft)
  double draft_rows = 0;    // a sampled draft pass's distributions (block − 1 rows of the vocabulary, fp32)
};
PlanSizes plan_sizes(const ModelConfig& c, const DraftConfig* d, int elem_bytes, bool replay);

}  // namespace splash
