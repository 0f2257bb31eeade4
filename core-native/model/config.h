// A package's model and draft configuration as the native core reads it from splash.json (model/load/weights.cpp), and
// the parse that checks it.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/json.h"

namespace splash {

struct ModelConfig {
  std::string family;
  int H = 0, L = 0, V = 0;
  std::vector<bool> linear;  // per layer: linear_attention?
  float eps = 1e-6f;
  int nh = 0, nkv = 0, hd = 0;
  bool attn_gate = false;
  float rope_theta = 10000.f;
  int rot_dim = 0;
  std::vector<int32_t> mrope;  // empty = 1-D RoPE
  int nk = 0, nv = 0, dk = 0, dv = 0, conv_k = 4;
  int I = 0, E = 0, topk = 0, Im = 0, Is = 0;
  bool renorm_topk = false;
  bool tie = false;
  int max_pos = 0;
  int Dk() const { return nk * dk; }
  int Dv() const { return nv * dv; }
  int conv_ch() const { return 2 * nk * dk + nv * dv; }
};

// DFlash draft (tools/train/draft.py): fc over the concatenated outputs of the tapped target
// layers → hidden_norm = context features; per draft layer (Qwen3 decoder layer) K/V of context positions
// come from those features (cached per sequence), the block [anchor, mask×(B−1)] attends to the context and
// bidirectionally to itself; logits through the target's lm_head.
// DFlash 2 (tools/reference/dflash2_reference.py) adds, when the config asks: sliding-window layers (a block row at position p sees keys
// (p − window, p + window) ∩ its causal range), the grouped dynamic causal conv around both sublayers of every
// layer (model/step/draft_conv.cpp) and the candidate selector over the top-k of each drafted row
// (model/step/draft_selector.cpp); the draft's logits are scaled by out_mul and soft-capped at softcap.
struct DraftConfig {
  int B = 0, mask = 0, L = 0, H = 0, I = 0, nh = 0, nkv = 0, hd = 0;
  float theta = 10000.f, eps = 1e-6f;
  std::vector<int> taps;  // target decoder layers whose outputs are tapped
  int window = 0;              // sliding window (0: none)
  std::vector<bool> sliding;   // per layer: sliding_attention
  std::vector<bool> causal;    // per layer: block rows attend causally to each other
  int conv_k = 0, conv_g = 0;  // grouped dynamic conv: taps, channels per group (0: no conv)
  int sel_rank = 0, sel_k = 0; // candidate selector: codebook rank, candidates per row (0: no selector)
  float out_mul = 1.f, softcap = 0.f;
};

// splash.json's `config` (with its `family`) and `draft.config`, checked (model/load/weights.cpp); throw bad_package or
// unsupported.
ModelConfig parse_model_config(const Json& manifest);
DraftConfig parse_draft_config(const Json& draft_config, const ModelConfig& target);

}  // namespace splash
