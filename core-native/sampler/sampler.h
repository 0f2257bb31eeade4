// The token choice from one row of logits, inside the native step: penalties, a grammar mask, temperature,
// top-k, min-p, top-p and an inverse-CDF draw with a uniform the caller supplies (seeds stay in the engine's
// RNG, and speculative decoding can give the draft and the target the same uniform per position), plus
// log-probabilities from the unmodified distribution.
//
// Order of operations (the reference the tests hold the sampler to):
//   0. logit bias: v += bias on the ids the request's bias names;
//   1. penalties on the ids the request names: repetition (v > 0 ? v / r : v · r) on every id, then
//      v −= frequency · count + presence on ids with count > 0 (count = occurrences in the output so far);
//   2. grammar mask: disallowed tokens become −inf (before everything else that chooses, argmax included);
//   3. temperature 0: argmax (the lowest id among equal maxima);
//   4. otherwise candidates in a fixed order — adjusted logit descending, then id ascending — with weights
//      w = exp((v − max) / T); top-k keeps the first k; min-p keeps w ≥ min_p; top-p keeps the shortest prefix
//      whose weight reaches top_p of what is left; the draw is the first candidate where the running sum of
//      weights reaches u · (kept total), the last kept one if rounding leaves u · total unreached.
//
// The grammar after the filters (a row with a mask and a `retry` uniform, T > 0; grammar.cpp): steps 1, 3–4 on
// the unmasked row (after step 0) give the filtered distribution F and its draw with `uniform`; an allowed token stands.
// Otherwise `retry` draws from F restricted to the allowed tokens and renormalised (inverse CDF in id order), or,
// when F gives them no mass, from steps 2–4 (the mask first, as above). The output follows F | allowed exactly.
//
// Speculative decoding (speculative.cpp): a verify pass's row r follows its drafted tokens d1..dr, which count
// for the penalties like output tokens; at T > 0 a row that verifies drafted token d (Row::draft) accepts it
// when accept · q(d) < p(d) (probability min(1, p(d)/q(d))), else draws from the residual max(0, p − q)
// normalised, where p and q are the filtered distributions (step 4) of the target's and the draft's rows. The
// draft pass samples its rows from q the same way (sample_draft) and keeps q for the verify pass.
#pragma once
#include <cstdint>
#include <vector>

namespace splash::sampler {

struct Params {
  float temperature = 0.f;  // 0 = greedy
  double top_p = 1.0;       // (0, 1]   (doubles, as given: the cut compares sums against them exactly)
  int32_t top_k = 0;        // 0 = off
  double min_p = 0.0;       // [0, 1]
  float presence = 0.f, frequency = 0.f;
  float repetition = 1.f;  // 1 = off
  bool penalized() const { return presence != 0.f || frequency != 0.f || repetition != 1.f; }
};

// Tokens the penalties look at: unique ids (prompt ∪ output), with their number of occurrences in the
// output (0: seen in the prompt only).
struct Penalties {
  std::vector<int32_t> ids, counts;
};

// Logit bias (OpenAI's logit_bias): values[i] is added to token ids[i]'s logit before anything else (unique ids).
struct Bias {
  std::vector<int32_t> ids;
  std::vector<float> values;
  bool empty() const { return ids.empty(); }
};

// One row to sample (or to score).
struct Row {
  double uniform = 0.0;            // [0, 1): the draw at temperature > 0
  std::vector<uint32_t> allowed;   // empty: every token; else ceil(V/32) words, bit (id & 31) of word (id >> 5)
  int32_t token = -1;              // ≥ 0: do not sample, report this token (prompt logprobs, forced tokens)
  int32_t draft = -1;              // ≥ 0 (T > 0): the drafted token this row verifies by the rejection rule;
  double accept = 0.0;             //   the uniform of its acceptance test (`uniform` draws from the residual)
  double retry = -1.0;             // ≥ 0 (T > 0, with `allowed`): the grammar applies after the filters, and this
                                   //   uniform draws when it refuses the first draw (see the top)
  bool refused = false;            // with `retry`: the caller already drew the first try with `uniform` and the
                                   //   grammar refused it (Model::resample), so only the second draw is made
};

// A request for the trailing rows.size() rows of one item.
struct Request {
  Params params;
  Bias bias;
  Penalties penalties;
  int32_t n_top = -1;  // < 0: no log-probabilities; else the chosen token's and the top n_top
  std::vector<Row> rows;
};

struct TopEntry {
  int32_t token;
  float logprob;
};

struct Sampled {
  int32_t token = -1;
  float logprob = 0.f;  // only when n_top ≥ 0
  std::vector<TopEntry> top;
};

// Scratch reused across rows (a copy of the row when penalties or a mask change it, weights, candidates).
struct Scratch {
  std::vector<float> work, weights;
  struct Cand {
    float v;
    int32_t id;
    float w;
  };
  std::vector<Cand> cands;
  std::vector<float> probs;
  std::vector<float> word_sums;  // draw_allowed: the allowed weight of each 32-token word of the mask
};

// What a verify pass adds to its rows (speculative.cpp): row r of the item's sampled rows follows extra[0, first + r)
// (the drafted tokens before it, counted by the penalties like output tokens), and a row with a draft token checks it
// against q + (first + r)·V, the draft's distribution for that position (q_rows rows).
struct Speculative {
  const int32_t* extra = nullptr;
  int first = 0;
  const float* q = nullptr;
  int q_rows = 0;
};

// Samples (or scores) one row of V logits. Throws splash::Error("invalid_argument") when the mask allows
// no token.
// `extra`: tokens counted by the penalties besides req.penalties (one count each).
Sampled sample_row(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch,
                   const int32_t* extra = nullptr, int n_extra = 0);

// The rows of one item: `rows` holds the item's last req.rows.size() logits rows, [rows × V]. With `spec` (a
// verify pass), rows verify their drafts; after a rejected draft the later rows are not sampled (token −1).
void sample_rows(const float* rows, int V, const Request& req, std::vector<Sampled>& out, const Speculative* spec = nullptr);

// A verify row at T > 0 with a drafted token (row.draft): accepted, or the residual draw (no log-probabilities).
Sampled verify_row(const float* logits, int V, const Request& req, const Row& row, const float* q, Scratch& scratch,
                   const int32_t* extra, int n_extra);

// A draft pass's rows (speculative.cpp): row r follows the tokens drafted at rows 0..r−1 (penalties); argmax at
// T = 0, else a draw from the filtered distribution q with the row's uniform; q (T > 0) goes to `q` [rows × V].
void sample_draft(const float* rows, int V, const Request& req, std::vector<Sampled>& out, std::vector<float>& q);

// --- the pieces (one file each)

// Whether the penalties change the row: a penalised request with counted tokens or extra ones (a verify's drafts).
inline bool penalizes(const Request& req, int n_extra) {
  return req.params.penalized() && (!req.penalties.ids.empty() || n_extra > 0);
}

// Penalties and (unless `mask` is false) the row's mask applied to a copy of the row in scratch.work; returns
// the row to choose from (the input itself when neither applies).
const float* adjust(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch,
                    const int32_t* extra = nullptr, int n_extra = 0, bool mask = true);
// The token of a row whose grammar applies after the filters (Row::retry; T > 0, a mask), see the top.
int32_t draw_then_mask(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch,
                       const int32_t* extra, int n_extra);
// First index of the largest value (−inf everywhere: −1).
int32_t argmax(const float* v, int V);
// The same over the tokens `allowed` permits (Row::allowed's layout), without a masked copy of the row.
int32_t masked_argmax(const float* v, int V, const uint32_t* allowed);
// The inverse-CDF draw at temperature > 0 over adjusted logits v whose maximum is at `best`.
int32_t draw(const float* v, int V, int32_t best, const Params& p, double u, Scratch& scratch);
// The distribution draw() samples from, as V probabilities (0 outside the kept candidates).
void distribution(const float* v, int V, int32_t best, const Params& p, Scratch& scratch, std::vector<float>& probs);
// A draw from distribution() restricted to the tokens `allowed` keeps (the same bits): without top-k, in proportion
// to the kept weights, found through the allowed weight of each 32-token word of the mask; −1 when F gives the
// allowed tokens no mass.
int32_t draw_allowed(const float* v, int V, int32_t best, const Params& p, const uint32_t* allowed, double u, Scratch& scratch);
// Inverse CDF over probabilities in id order (the last positive one if rounding leaves u unreached).
int32_t draw_probs(const float* probs, int V, double u);
// log Σ exp(v): the log-softmax normaliser.
double log_sum_exp(const float* v, int V);
// The n largest of v in candidate order (value descending, id ascending), sorted; one pass with a heap.
void top_candidates(const float* v, int V, int n, std::vector<Scratch::Cand>& out);
// The n largest of v as log-probabilities v − lse.
void top_logprobs(const float* v, int V, int n, double lse, std::vector<TopEntry>& out);

}  // namespace splash::sampler
