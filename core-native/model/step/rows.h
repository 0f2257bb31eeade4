// How a step's computed rows come back to its items: logits, argmax ids or the backend sampler's tokens
// (model/step/item_rows.cpp).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sampler/sampler.h"
#include "splash/backend.h"

namespace splash {

// What an item gets back from its computed trailing rows [nrows × V]: the last `keep` rows as logits and the
// sampled rows (model/step/item_rows.cpp).
void take_rows(const float* rows, int nrows, int V, int keep, const sampler::Request* sample, std::vector<float>& logits,
               std::vector<sampler::Sampled>& sampled);
// Rows that need nothing but their argmax: temperature 0, no penalties, masks, forced tokens or log-probabilities.
// The backend chooses them where the logits are (argmax_rows), and only their ids come back.
bool greedy_only(const sampler::Request& req);
// What the sampler gives such a request (sample_rows, sample_draft) from the rows' argmax ids; −1 (no token above
// −inf) throws as the sampler does.
void take_ids(const int32_t* ids, size_t n, std::vector<sampler::Sampled>& sampled);
// How an item's rows come back from a pass (HybridModel::fetch_rows): whole rows for the host's sampler, argmax ids
// (greedy_only), or the tokens the backend's sampler chose (backend_samples).
enum RowMode : char { kRowsHost = 0, kRowsArgmax = 1, kRowsSampled = 2 };
// Requests the backend's sampler takes (slot sample_rows): no forced tokens or log-probabilities; a grammar mask goes
// with the row, applied first or after the filters (Row::retry at T > 0), except on a row that verifies a draft.
bool backend_samples(const sampler::Request& req);
// The backend sampler's rows of a pass, and the penalty pairs they name.
struct SampleDescs {
  std::vector<splash_sample_desc> descs;
  std::vector<int32_t> ints;
  // Adds an item's sampled rows r, rows first_row + r of the pass. Row r follows extra[0, first + r) (a verify
  // pass's drafts, counted by the penalties like output tokens); a row with a draft (T > 0) checks it against
  // q + (first + r)·V (backend memory); with q_out, row r's distribution goes to q_out + r·V (a draft pass).
  void add(const sampler::Request& req, int64_t first_row, const int32_t* extra, int first, const float* q,
           float* q_out, int64_t V);
};
// After the pass: the item's sampled rows from their ids, rows after a rejected draft left unsampled (token −1)
// as sampler::sample_rows does; −1 from the backend (nothing above −inf) throws as the sampler does.
void take_sampled(const int32_t* ids, const sampler::Request& req, bool verify, std::vector<sampler::Sampled>& sampled);

}  // namespace splash
