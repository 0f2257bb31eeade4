// A second draw from a row a step already sampled (HybridModel::resample): the rows of items that asked to keep them
// (StepItem::keep) are copied where the backend is before the step's sampler runs, and a later call draws one of
// them again with another request — a constrained row whose first try the grammar refused, drawn under the mask
// computed after the step — so its logits never travel to the host on a device backend.
#include "model/hybrid_model.h"
#include "runtime/error.h"

namespace splash {

void HybridModel::keep_rows(const std::vector<StepItem>& items, const float* logits, const std::vector<size_t>& off) {
  kept_.clear();
  const size_t V = size_t(cfg_.V);
  size_t total = 0;
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].keep && items[i].sample) total += off[i + 1] - off[i];
  if (total == 0) return;
  auto* dst = buf(kKept, total * V);
  size_t at = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const StepItem& it = items[i];
    const size_t n = off[i + 1] - off[i];
    if (!it.keep || !it.sample || n == 0) continue;
    be_->iface->copy2d(be_->ctx, dst + at * V, 0, logits + off[i] * V, 0, n * V * 4, 1);
    Kept k;
    k.seq = it.seq->id, k.off = at, k.rows = int(n), k.sampled = int(it.sample->rows.size());
    k.verify = it.verify, k.tokens = it.tokens, k.used.assign(size_t(k.sampled), 0);
    kept_.push_back(std::move(k));
    at += n;
  }
}

sampler::Sampled HybridModel::resample(int32_t seq_id, int row, const sampler::Request& req) {
  // on the caller's thread (the JS thread): never wait behind a step that is running
  std::unique_lock<std::mutex> lock(compute_mu_, std::try_to_lock);
  if (!lock.owns_lock()) throw Error("sequence_busy", "resample while a step or draft pass runs");
  Kept* k = nullptr;
  for (auto& e : kept_)
    if (e.seq == seq_id) k = &e;
  if (!k) throw Error("invalid_argument", "sequence " + std::to_string(seq_id) + " kept no rows in the last step");
  if (row < 0 || row >= k->sampled)
    throw Error("invalid_argument", "row " + std::to_string(row) + " is not one of the " + std::to_string(k->sampled) +
                                        " sampled rows the last step kept");
  if (req.rows.size() != 1) throw Error("invalid_argument", "resample takes one row");
  if (k->used[size_t(row)]) throw Error("invalid_argument", "row " + std::to_string(row) + " was already sampled again");
  k->used[size_t(row)] = 1;
  const size_t V = size_t(cfg_.V);
  const size_t at = k->off + size_t(k->rows - k->sampled + row);
  // a verify item's row follows the drafts before it (tokens[1 ..]), which the penalties count
  const int first = k->verify ? int(k->tokens.size()) - k->sampled + row : 0;
  const int32_t* extra = k->verify ? k->tokens.data() + 1 : nullptr;
  float* rows = buf(kKept, 0);
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  if (sample_on_backend_ && backend_samples(req)) {
    SampleDescs sd;
    sd.add(req, 0, extra, first, nullptr, nullptr, int64_t(V));  // row 0 of the rows starting at the kept one
    auto* d = reinterpret_cast<int32_t*>(buf(kPick, 1));
    be->sample_rows(bc, rows + at * V, int64_t(V), sd.descs.data(), 1, sd.ints.data(), int64_t(sd.ints.size()), d);
    int32_t id = -1;
    be->copy_to_host(bc, &id, d, 4);
    check_backend();
    if (id < 0) throw Error("invalid_argument", "the allowed-token mask leaves no token to sample");
    sampler::Sampled s;
    s.token = id;
    return s;
  }
  // the host sampler: on the row itself where the backend's memory is the host's, else on a copy
  const float* row_data = rows + at * V;
  std::vector<float> host;
  if (!host_memory_) {
    host.resize(V);
    be->copy_to_host(bc, host.data(), row_data, V * 4);
    check_backend();
    row_data = host.data();
  }
  // the row's first try (its `uniform`) is the token the step drew and the grammar refused: only the second draw
  // is made (Row::refused), not the first again
  sampler::Row r = req.rows[0];
  r.refused = true;
  return sampler::sample_row(row_data, int(V), req, r, resample_scratch_, extra, first);
}

}  // namespace splash
