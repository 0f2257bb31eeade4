// Decode and verify steps as recorded graphs. A small step (≤ 16 tokens: a decode batch, or a verify block on a
// small model; no images) queues the same slots every step except for its tokens and positions; on a backend with
// graph slots those two come from a device array (gvars_dev_: [tokens | each item's length]) uploaded before the
// step, so the step is recorded once per shape and then replayed with one launch. The shape (the key) is what the
// recorded slots bake in: each item's state buffers (a verify's rollback slots too), token count, tapped rows and
// logits rows, and the attention capacity (the length rounded up to a power of two, which sizes the attention
// grid). A shape is recorded on its second step (the first one runs directly, with the same device values, and sizes
// every activation buffer); a recording that needed the host (host-side MoE routing, precise mode) marks the shape as
// never recorded.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "model/hybrid_model.h"

namespace splash {
namespace {

constexpr int kGraphMaxTokens = 16;  // a verify block; larger steps are matmul-bound anyway
constexpr size_t kMaxGraphs = 64;
constexpr int32_t kMinCap = 1024;

// Verify blocks are graphed on small models only, whose steps are bound by their launches (the default package on
// the H200: a verify of 4 / 16 rows 0.79 / 1.21 → 0.49 / 0.98 ms). On the full-depth 27B and 35B-A3B shapes a verify
// step is bound by its kernels and a block's shape (rows, attention capacity, the sequence's buffers) repeats less
// than a decode's, and graphing them measured slower: over HTTP, one client's aggregate decode 770 / 864 with them
// against 1035 / 1137 tok/s without (35B-A3B), 435 / 428 against 573 / 552 (27B); whether the recordings or the
// graph cache they fill (64 shapes, then every graph is dropped, decode graphs too) cost most was not measured.
constexpr uint64_t kVerifyGraphMaxWeights = uint64_t(1) << 30;

}  // namespace

int32_t HybridModel::graph_cap(const Sequence* s, int n) const {
  int32_t cap = kMinCap;
  while (cap < s->len + n && cap < s->max_len) cap *= 2;
  return std::min(cap, s->max_len);
}

void HybridModel::drop_graphs() {
  for (auto& [key, e] : graphs_)
    if (e.exec) be_->iface->graph_free(be_->ctx, e.exec);
  graphs_.clear();
}

bool HybridModel::graph_step(std::vector<StepItem>& items, int N, const StepBufs& b) {
  const auto* be = be_->iface;
  void* bc = be_->ctx;
  if (!splash_backend_supports_op(be_, SPLASH_OP_GRAPH_CAPTURE_BEGIN) || N > kGraphMaxTokens || !opts_.step_graphs) return false;
  for (auto& it : items) {
    if (!it.positions.empty() || !it.embed_at.empty() || !it.snaps.empty()) return false;
    if (it.verify && weight_bytes() >= kVerifyGraphMaxWeights) return false;
  }
  const uint64_t epoch = be->graph_epoch(bc);
  if (epoch != graphs_epoch_ || bufs_gen_ != graphs_gen_ || graphs_.size() >= kMaxGraphs) {
    drop_graphs();  // what the graphs point at moved
    graphs_epoch_ = epoch;
    graphs_gen_ = bufs_gen_;
  }
  std::vector<int64_t> key;
  std::vector<int32_t> vars;
  key.reserve(items.size() * 7 + 1);
  key.push_back(b.taps != nullptr);
  for (auto& it : items) {
    const Sequence* s = it.seq;
    const int n = int(it.tokens.size());
    // s->cap: a recycled KV buffer (state_pool.h) may come back with another plane stride
    key.insert(key.end(), {int64_t(reinterpret_cast<uintptr_t>(s->gdn)), int64_t(reinterpret_cast<uintptr_t>(s->kv)), s->cap, n,
                           it.head_rows(), graph_cap(s, n), it.verify});
    // a verify keeps its states (or replay inputs) in the sequence's slots, laid out by their capacity
    if (it.verify) key.insert(key.end(), {int64_t(reinterpret_cast<uintptr_t>(s->slots)), s->slots_cap});
    vars.insert(vars.end(), it.tokens.begin(), it.tokens.end());
  }
  for (auto& it : items) vars.push_back(it.seq->len);
  GraphEntry& e = graphs_[key];
  if (!gvars_dev_) {
    gvars_dev_ = static_cast<int32_t*>(be->buffer_alloc(bc, size_t(4) * kGraphMaxTokens * 2));
    if (!gvars_dev_) return false;
  }
  be->copy_to_device(bc, gvars_dev_, vars.data(), vars.size() * 4);
  // A shape's steps that are not replayed (its first, one whose recording was dropped, every step of a shape that
  // cannot be recorded) run the recorded slots' device-value forms all the same, so its every step has the replays'
  // numerics: a slot may take another kernel when its values are on the device (the attention of a verify block:
  // fp32 split over the context, not the tensor cores), and the same request must not decode differently by whether
  // its shapes were seen before.
  auto direct = [&] {
    gv_ = gvars_dev_;
    try {
      queue_step(items, N, b);
    } catch (...) {
      gv_ = nullptr;
      throw;
    }
    gv_ = nullptr;
    return true;
  };
  if (e.never || (!e.exec && e.seen++ == 0)) return direct();
  if (!e.exec) {
    const uint64_t gen = bufs_gen_;
    gv_ = gvars_dev_;
    be->graph_capture_begin(bc);
    try {
      queue_step(items, N, b);
    } catch (...) {
      gv_ = nullptr;
      if (void* g = be->graph_capture_end(bc)) be->graph_free(bc, g);
      throw;
    }
    void* g = be->graph_capture_end(bc);
    gv_ = nullptr;
    if (!g || bufs_gen_ != gen || be->graph_epoch(bc) != epoch) {
      if (g) be->graph_free(bc, g);
      else e.never = true;
      return direct();  // it needed the host (never recorded), or a buffer moved (recorded again later)
    }
    e.exec = g;
  }
  be->graph_launch(bc, e.exec);
  return true;
}

}  // namespace splash
