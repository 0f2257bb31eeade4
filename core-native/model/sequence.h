// What a caller of the model builds and reads: a sequence's state (owned by the model, found by id), and the items
// of a step and of a draft pass.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "sampler/sampler.h"
#include "splash/backend.h"

namespace splash {

struct Sequence {
  int32_t id = 0;
  int32_t max_len = 0;   // tokens the sequence may hold (checked by every step)
  int32_t cap = 0;       // rows its KV planes have room for (≥ max_len: a recycled buffer may be larger)
  int32_t len = 0;
  bool busy = false;    // part of an in-flight step
  bool broken = false;  // a step failed midway; state is undefined
  // All state lives in backend buffers (device memory on a GPU backend).
  float* gdn = nullptr;  // conv + recurrent states of all linear layers: one copyable block
  float* kv = nullptr;   // [full layers][K|V][cap][nkv*hd]
  // speculative decoding
  // draft KV, per draft layer [K|V][rows][nkv*hd] (HybridModel::draft_planes): a full layer holds every position
  // (rows cap + B: context, then block scratch); a sliding layer, once its window is small next to cap, a ring of
  // M = window + B positions stored twice (rows 2M, position p at p mod M and p mod M + M), so the keys of any
  // window are contiguous rows
  float* dkv = nullptr;
  int32_t draft_len = 0;        // positions whose context K/V are in dkv
  int32_t draft_lo = 0;         // sliding layers hold context K/V of positions [draft_lo, draft_len) only
  float* feat = nullptr;        // tapped target features of positions [draft_len, len), [rows][taps·H]
  int64_t feat_rows = 0, feat_cap = 0;
  // rollback buffer of the last verify step (model/state/rollback.cpp): with the per-position method, the GDN states after
  // each verified position (slot i = state at length spec_base + i); with replay, the state at spec_base and the
  // recurrence's inputs of each verified position
  float* slots = nullptr;
  int32_t slots_cap = 0;  // verified tokens it has room for
  int32_t spec_base = -1, spec_n = 0;  // slots valid for lengths [spec_base, spec_base + spec_n)
  // the last sampled draft pass (T > 0): its tokens and their distributions q [rows × draft_V], drafted at length draft_at
  std::vector<int32_t> draft_tokens;
  std::vector<float> draft_q;
  int32_t draft_at = -1, draft_V = 0;
  // or, when the backend's sampler drew them, their copy in backend memory (rows draft_qd_rows of room draft_qd_cap)
  float* draft_qd = nullptr;
  int32_t draft_qd_rows = 0, draft_qd_cap = 0;
  // GDN and conv states kept inside the last step at the lengths its item asked for (StepItem::snaps): {length,
  // gdn_floats of state, or null without linear layers}; owned by the model (HybridModel::drop_snaps), taken by
  // save_state(id, length)
  std::vector<std::pair<int32_t, float*>> snaps;
};

struct StepItem {
  Sequence* seq = nullptr;
  std::vector<int32_t> tokens;
  int logits = 0;  // 0 none, 1 last, 2 all
  bool capture = false;  // append the tapped layers' outputs to seq->feat (draft context)
  bool verify = false;   // row-by-row recurrent GDN (bit-identical to single-token decode) + what rollback needs
  // Multimodal input: rows embed_at[j] of this item take embeds[j·H .. (j+1)·H) instead of their token's
  // embedding (image pads); positions, when given, are the (T, H, W) M-RoPE ids of each token (3 per token).
  std::vector<int32_t> embed_at;
  std::vector<float> embeds;
  std::vector<int32_t> positions;
  std::shared_ptr<const sampler::Request> sample;  // sample (or score) the trailing rows inside the step
  std::vector<sampler::Sampled> sampled;           // filled by step(): one per sample->rows
  bool keep = false;  // keep the sampled rows' logits where the backend is, for resample() until the next step
  // lengths inside this item (len < L < len + n, ascending) at which the GDN and conv state is kept for
  // save_state(id, L): the prefix cache's anchors inside a prefill chunk, which then need no step of their own
  std::vector<int32_t> snaps;
  int logit_rows() const { return logits == 0 ? 0 : logits == 1 ? 1 : int(tokens.size()); }
  // trailing rows that go through the LM head: those returned as logits and those sampled
  int head_rows() const { return std::max(logit_rows(), sample ? int(sample->rows.size()) : 0); }
};

struct DraftItem {
  Sequence* seq = nullptr;
  int32_t anchor = 0;  // last committed token, at position seq->len (not yet processed by the target)
  int32_t n = 0;       // drafted positions wanted (1..B−1): logits rows 1..n of the block
  bool logits = true;  // return the n logits rows (with `sample`, only when asked for)
  std::shared_ptr<const sampler::Request> sample;  // sample the n rows (sample->rows.size() == n)
  std::vector<sampler::Sampled> sampled;
};

}  // namespace splash
