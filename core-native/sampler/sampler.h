// The token choice from one row of logits, inside the native step: penalties, a grammar mask, temperature,
// top-k, min-p, top-p and an inverse-CDF draw with a uniform the caller supplies (seeds stay in the engine's
// RNG, and speculative decoding can give the draft and the target the same uniform per position), plus
// log-probabilities from the unmodified distribution.
//
// Order of operations (the reference the tests hold the sampler to):
//   1. penalties on the ids the request names: repetition (v > 0 ? v / r : v · r) on every id, then
//      v −= frequency · count + presence on ids with count > 0 (count = occurrences in the output so far);
//   2. grammar mask: disallowed tokens become −inf (before everything else that chooses, argmax included);
//   3. temperature 0: argmax (the lowest id among equal maxima);
//   4. otherwise candidates in a fixed order — adjusted logit descending, then id ascending — with weights
//      w = exp((v − max) / T); top-k keeps the first k; min-p keeps w ≥ min_p; top-p keeps the shortest prefix
//      whose weight reaches top_p of what is left; the draw is the first candidate where the running sum of
//      weights reaches u · (kept total), the last kept one if rounding leaves u · total unreached.
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

// One row to sample (or to score).
struct Row {
  double uniform = 0.0;            // [0, 1): the draw at temperature > 0
  std::vector<uint32_t> allowed;   // empty: every token; else ceil(V/32) words, bit (id & 31) of word (id >> 5)
  int32_t token = -1;              // ≥ 0: do not sample, report this token (prompt logprobs, forced tokens)
};

// A request for the trailing rows.size() rows of one item.
struct Request {
  Params params;
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
};

// Samples (or scores) one row of V logits. Throws splash::Error("invalid_argument") when the mask allows
// no token.
Sampled sample_row(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch);

// The rows of one item: `rows` holds the item's last req.rows.size() logits rows, [rows × V].
void sample_rows(const float* rows, int V, const Request& req, std::vector<Sampled>& out);

// --- the pieces (one file each)

// Penalties and mask applied to a copy of the row in scratch.work; returns the row to choose from (the input
// itself when neither applies).
const float* adjust(const float* logits, int V, const Request& req, const Row& row, Scratch& scratch);
// First index of the largest value (−inf everywhere: −1).
int32_t argmax(const float* v, int V);
// The inverse-CDF draw at temperature > 0 over adjusted logits v whose maximum is at `best`.
int32_t draw(const float* v, int V, int32_t best, const Params& p, double u, Scratch& scratch);
// log Σ exp(v): the log-softmax normaliser.
double log_sum_exp(const float* v, int V);
// The n largest of v in candidate order (value descending, id ascending), sorted; one pass with a heap.
void top_candidates(const float* v, int V, int n, std::vector<Scratch::Cand>& out);
// The n largest of v as log-probabilities v − lse.
void top_logprobs(const float* v, int V, int n, double lse, std::vector<TopEntry>& out);

}  // namespace splash::sampler
