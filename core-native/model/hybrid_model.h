// The Qwen hybrid model family (qwen3_5, qwen3_5_moe, qwen3_next, qwen3): the one implementation of Model
// (model/model.h). Its members fall in three phases, each with its files:
// - load: splash.json's config, the weights bound in place from the package (or uploaded to a device), the draft's
//   and the vision encoder's (weights.cpp, vision.cpp);
// - step: the batched forward pass, recorded step graphs, the draft pass, the rows handed back and sampled again
//   (forward.cpp, decode_graph.cpp, draft.cpp, draft_conv.cpp, draft_selector.cpp, item_rows.cpp, resample.cpp);
// - state: the sequence table, each sequence's state and its layout, the verify step's rollback, the prefix cache's
//   saved pieces (sequences.cpp, state_sizes.cpp, state_pool.cpp, draft_kv.cpp, rollback.cpp, saved_state.cpp,
//   saved_transfer.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/loader.h"
#include "model/load/layers.h"
#include "model/model.h"
#include "model/step/rows.h"
#include "model/state/state_sizes.h"
#include "model/state/state_pool.h"
#include "model/load/vision.h"
#include "runtime/options.h"

namespace splash {

class HybridModel final : public Model {
 public:
  HybridModel() = default;  // Model::open (model/load/weights.cpp) builds one and runs the load phase on it
  ~HybridModel() override;

  // ---- Model (model/model.h says what each does)
  const ModelConfig& config() const override { return cfg_; }
  const Package& package() const override { return *pkg_; }
  const splash_backend& backend() const override { return *be_; }
  const std::string& specialised_kernels() const override { return spec_kernels_; }
  uint64_t weight_bytes() const override { return pkg_->tensor_bytes(); }
  int threads() const override { return threads_; }
  int act_levels() const override { return act_levels_; }
  bool device_memory(DeviceMemory& out) const override {
    return backend_device_memory(*be_, out.free, out.total, out.used, out.limit);
  }
  const VisionEncoder* vision() const override { return vision_.get(); }
  std::vector<float> encode_image(const float* pixels, int t, int h, int w) override;
  bool has_draft() const override { return dcfg_.B > 0; }
  const DraftConfig& draft_config() const override { return dcfg_; }

  uint64_t gdn_bytes() const override { return uint64_t(gdn_floats_) * 4; }
  uint64_t kv_bytes_per_token() const override { return uint64_t(kv_floats_per_token_) * 4; }
  uint64_t sequence_bytes(int64_t max_len) const override {
    return gdn_bytes() + kv_bytes_per_token() * uint64_t(max_len) +
           (has_draft() ? draft_bytes(max_len) + uint64_t(rollback_floats(dcfg_.B)) * 4 : 0);
  }
  bool rollback_replay() const override { return replay_; }
  size_t rollback_floats(int32_t tokens) const override;
  int32_t draft_keep(int32_t len) const override;

  int32_t create_sequence(int32_t max_len) override;
  void free_sequence(int32_t id) override;
  void truncate_sequence(int32_t id, int32_t len) override;
  Sequence* find(int32_t id) override;
  std::mutex& seq_mutex() override { return seq_mu_; }

  void check_item(const StepItem& it) const override;
  void step(std::vector<StepItem>& items, std::vector<std::vector<float>>& out) override;  // under compute_mu_
  sampler::Sampled resample(int32_t seq_id, int row, const sampler::Request& req) override;
  void draft(std::vector<DraftItem>& items, std::vector<std::vector<float>>& out) override;
  void set_pick_on_backend(bool on) override {
    pick_on_backend_ = on && splash_backend_supports_op(be_, SPLASH_OP_ARGMAX_ROWS);
  }
  void set_sample_on_backend(bool on) override {
    sample_on_backend_ = on && splash_backend_supports_op(be_, SPLASH_OP_SAMPLE_ROWS);
  }
  void set_step_graphs(bool on) override { opts_.step_graphs = on; }

  int64_t save_rows(int32_t seq, int32_t start, int32_t n) override;
  int64_t save_state(int32_t seq, int32_t length = -1) override;
  bool restore(int32_t seq, const std::vector<int64_t>& rows, int64_t state) override;
  void free_saved(int64_t id) override;
  SavedStats saved_stats() override;
  SavedInfo saved_info(int64_t id) override;
  void read_saved(int64_t id, float* a, float* b) override;
  int64_t import_rows(int32_t n, bool draft, const float* data, size_t floats) override;
  int64_t import_state(int32_t len, bool draft, int32_t win_n, const float* gdn, size_t gdn_floats, const float* win,
                       size_t win_floats) override;

 private:
  friend class Model;  // Model::open runs the load phase

  // ======== load (model/load/weights.cpp)
  void bind_weights();
  void load_draft_files(const std::string& dir);
  void upload_weights();  // device copies of every weight and norm (backends without host memory)
  void load_spec_kernels(const std::string& dir);

  Options opts_;  // read at open (runtime/options.h)
  std::unique_ptr<Package> pkg_;
  splash_backend* be_ = nullptr;
  BackendHandle bh_;
  bool host_memory_ = true;
  int threads_ = 1;
  int act_levels_ = 1;
  std::string spec_kernels_;
  ModelConfig cfg_;
  std::vector<Layer> layers_;
  splash_weight embed_{}, lm_head_{};
  const float* norm_ = nullptr;
  std::vector<std::vector<float>> owned_;  // norms converted from BF16, if any
  std::unique_ptr<VisionEncoder> vision_;
  std::vector<void*> device_;  // uploaded weights (freed with the backend)
  DraftConfig dcfg_;
  std::vector<DraftLayer> dlayers_;
  splash_weight dfc_{};
  splash_weight dsel_proj_{}, dsel_pred_{}, dsel_succ_{};  // DFlash 2 candidate selector
  const float *dhnorm_ = nullptr, *dnorm_ = nullptr;
  std::vector<int> tap_slot_;  // per target layer: index in taps, or -1

  // ======== step (model/step/forward.cpp, decode_graph.cpp, draft.cpp, draft_conv.cpp, draft_selector.cpp,
  // item_rows.cpp, resample.cpp)
  void forward(std::vector<StepItem>& items, std::vector<std::vector<float>>& out);
  // Everything a step queues on the backend, from the embeddings to the logits rows `logits` (no host copy).
  struct StepBufs {
    float *h, *x, *y, *taps, *sel, *logits;
    std::vector<std::pair<int, int>> runs;  // logits rows: (first row, count) runs
  };
  void queue_step(std::vector<StepItem>& items, int N, const StepBufs& b);
  // Step graphs (model/step/decode_graph.cpp): runs the step as a recorded graph when the backend has graph
  // slots and the step is small (a decode batch, a small model's verify block); false when the caller must queue
  // it directly.
  bool graph_step(std::vector<StepItem>& items, int N, const StepBufs& b);
  void drop_graphs();
  int32_t graph_cap(const Sequence* s, int n) const;
  void linear_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y);
  void full_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y);
  void mlp(const Layer& l, const float* x, int N, float* y);
  void matmul(const splash_weight& w, const float* x, int n, float* y) const;
  void check_backend();  // throws Error("backend_error") when the backend recorded a failure
  // Step activations: one growable backend buffer per use, kept across steps.
  enum Buf { kH, kX, kY, kQKV, kZ, kB, kA, kConv, kO, kQG, kK, kV, kQ, kG, kU, kSh, kGate, kRouter, kTaps, kSel,
             kLogits, kDFeat, kDCtx, kDH, kDX, kDY, kDCk, kDCv, kDQ, kDBk, kDBv, kDO, kDI1, kDI2, kDQp, kDOp, kDDyn,
             kDSelH, kDSelP, kDSelCb, kPick, kKept, kNumBufs };
  float* buf(Buf b, size_t floats);
  // The logits rows copied back each step: page-locked memory from a device backend that offers it (the
  // copy then runs at full bus speed), else logits_host_.
  float* host_logits(size_t floats);
  // After a pass whose logits rows [R × V] sit at `logits` on the backend, item i owning rows [off[i], off[i + 1]):
  // the argmax ids of the items marked in `pick` (chosen on the backend, in pick_host_) and the other items' rows
  // on the host. Each is null when no item with rows needs it; the pass is waited for either way.
  struct FetchedRows {
    const int32_t* ids = nullptr;
    float* rows = nullptr;
  };
  FetchedRows fetch_rows(float* logits, const std::vector<size_t>& off, const std::vector<char>& mode,
                         const SampleDescs& sd);
  // The rows of the items that keep theirs (off: each item's first row in `logits`), copied before anything
  // samples them (the backend's sampler may change rows in place); what resample() reads (model/step/resample.cpp).
  struct Kept {
    int32_t seq = 0;
    size_t off = 0;  // first row in the kKept buffer
    int rows = 0, sampled = 0;
    bool verify = false;
    std::vector<int32_t> tokens;
    std::vector<char> used;
  };
  void keep_rows(const std::vector<StepItem>& items, const float* logits, const std::vector<size_t>& off);
  // DFlash 2 parts of the draft pass: the conv of sublayer `which` (0 attention, 1 MLP) on the device rows x
  // [Nb, H] of blocks of Bb rows, in place; `prepare` first computes the dynamic kernels of both convs from x into
  // dyn (host), which the finish conv then reads (model/step/draft_conv.cpp).
  void draft_conv(const DraftLayer& l, int which, bool prepare, float* x, int Nb, int Bb);
  // One draft layer's K and V planes in a sequence's dkv; ring = M (positions p at rows p mod M and p mod M + M)
  // for a sliding layer kept as a ring, else 0 (position p at row p).
  struct DraftPlanes {
    float *k, *v;
    int32_t ring;
  };
  // One item's block rows attended one by one, each over its own key range (sliding window, causal block).
  void draft_attention_rows(const float* q, float* o, const DraftPlanes& p, int len, int Bb, bool sliding, bool causal,
                            float scale);
  // After a draft pass wrote positions below `written`: the context is consumed (caller holds seq_mu_).
  void draft_done(Sequence* s, int32_t written);
  // The candidate selector: item i walks its first items[i].sample->rows.size() drafted rows, whose normed hidden
  // states are rows roff[i].. of sel (device) and raw logits rows roff[i].. of lh [.., V] (host): roff[i] is the
  // item's first row, not a prefix sum. Fills its `sampled` and, at T > 0, its sequence's draft_q
  // (model/step/draft_selector.cpp).
  void draft_select(std::vector<DraftItem>& items, const std::vector<size_t>& roff, const float* sel, const float* lh);
  // A sequence's device copy of its last draft pass's distributions, room for `rows` rows (model/step/draft.cpp).
  float* draft_q_rows(Sequence* s, int rows);
  // The host copy of them, for a verify pass the host samples (a no-op when the host has them).
  void draft_q_to_host(Sequence* s);

  std::mutex compute_mu_;  // one step, draft pass, encode or device-side saved-piece copy at a time
  std::vector<std::pair<float*, size_t>> bufs_;  // step activations (pointer, capacity in floats)
  uint64_t bufs_gen_ = 0;                        // bumped when one of bufs_ moves
  // decode graphs by batch shape (sequence buffers, tokens per item, rows, capacity): null exec = run directly
  struct GraphEntry {
    void* exec = nullptr;
    int seen = 0;
    bool never = false;  // recording needed the host (e.g. host-side MoE routing): always run directly
  };
  std::map<std::vector<int64_t>, GraphEntry> graphs_;
  uint64_t graphs_gen_ = 0, graphs_epoch_ = 0;
  int32_t* gvars_dev_ = nullptr;  // the step's [tokens | sequence lengths] in device memory
  const int32_t* gv_ = nullptr;   // gvars_dev_ while a graph's step is queued, else null (slots take host values)
  std::vector<Kept> kept_;
  sampler::Scratch resample_scratch_;  // resample()'s host sampler (under compute_mu_)
  bool pick_on_backend_ = false;  // the backend has argmax_rows (Options::device_argmax off: choose on the host)
  // the backend has sample_rows and is a device (Options::device_sample: 0 on the host, 1 also on the CPU)
  bool sample_on_backend_ = false;
  std::vector<int32_t> pick_host_;
  std::vector<float> logits_host_;
  float* logits_pinned_ = nullptr;
  size_t logits_pinned_cap_ = 0;
  // host scratch of the DFlash 2 parts, kept across passes (touching fresh pages costs more than the work here)
  struct Draft2Host {
    std::vector<float> in, out, dyn[2], hp, rows;
  } d2h_;

  // ======== state (model/state/sequences.cpp, state_sizes.cpp, draft_kv.cpp, rollback.cpp, saved_state.cpp,
  // saved_transfer.cpp)
  Sequence* idle_sequence(int32_t id);  // throws unknown_sequence / sequence_busy; caller holds seq_mu_
  void* alloc_state(size_t bytes, bool zero);  // sequence state (KV is not zeroed on host memory)
  void free_state(void* p);
  int32_t kv_capacity(int32_t max_len) const;  // rows to allocate for a sequence of max_len tokens
  void ensure_feat(Sequence* s, int64_t rows);
  void ensure_slots(Sequence* s, int32_t n);  // room for the rollback buffer of a verify step of n tokens
  // Draft KV layout (model/state/draft_kv.cpp): a sequence's draft KV bytes, one layer's planes in it, the ring length of a
  // sliding layer in a sequence of cap rows (0: linear), the rows of one plane of layer li, the largest cap whose
  // draft KV fits `bytes` (at most hi), and the copy of n rows of K and V (device memory) into positions
  // [pos, pos + n) of a layer (n ≤ M for a ring).
  uint64_t draft_bytes(int64_t max_len) const;
  DraftPlanes draft_planes(const Sequence& s, int li) const;
  int32_t draft_ring(int64_t cap) const;
  int64_t draft_plane_rows(int li, int64_t cap) const;
  int64_t draft_cap(size_t bytes, int64_t hi) const;
  void draft_put(const DraftPlanes& p, int64_t pos, const float* k, const float* v, int n);
  // rollback (model/state/rollback.cpp)
  void choose_rollback();
  int64_t tape_row() const { return replay_row_floats(cfg_); }
  // states: layer l's conv state after each of a verify's n tokens (conv inputs x) into slots 1..n, from the
  // block's start state in slot 0 and x
  void keep_conv_states(const Layer& l, Sequence* s, const float* x, int n);
  // frees the states a step kept for s above `length` (all of them with −1)
  void drop_snaps(Sequence* s, int32_t length);
  // the step's kept states: slots for the item's lengths (checked), then per linear layer its segments
  void open_snaps(const StepItem& it);
  // replay: after layer l's verify rows [off, off + n) of item s ran, keep their conv inputs and gates
  void keep_replay_inputs(const Layer& l, Sequence* s, const float* qkv, const float* beta, const float* g, int64_t off,
                          int n);
  void roll_back(Sequence* s, int32_t len);  // GDN state ← state at len (within the last verify step)

  // a sequence's state layout (model/state/state_sizes.h)
  int64_t gdn_floats_ = 0, kv_floats_per_token_ = 0, n_full_ = 0, n_linear_ = 0;
  bool replay_ = false;
  std::mutex seq_mu_;
  std::unordered_map<int32_t, Sequence> seqs_;
  std::vector<float*> gdn_pool_;  // recycled GDN state blocks (all the same size)
  // recycled KV, draft KV, feature and verify-state buffers (state_pool.h); emptied before the backend closes
  StatePool pool_{[this](size_t b) { return alloc_state(b, false); }, [this](void* p) { free_state(p); }};
  int32_t next_id_ = 1;
  // Saved rows and states live where the sequences' state lives: host memory on the CPU backend
  // (host_state_alloc: huge pages, not zeroed), device memory on a device backend (the memory plan counts the
  // prefix cache there, and a save or restore is then a copy inside the device, not one over the host link).
  struct SavedFree {
    HybridModel* m;  // set by save_rows (no default member initializer: the enclosing class is not complete here)
    void operator()(float* p) const { m->free_state(p); }
  };
  struct SavedRows {
    int32_t n = 0;
    bool draft = false;
    size_t floats = 0;
    // [target K|V planes][n][nkv·hd], then [draft K|V planes][n][nkv·hd]
    std::unique_ptr<float[], SavedFree> data;
  };
  struct SavedState {
    int32_t len = 0;
    bool draft = false;
    size_t floats = 0;
    std::unique_ptr<float[], SavedFree> gdn;  // the GDN and conv state (floats of them; none without GDN layers)
    // the draft's sliding layers: K/V of the last draft_keep(len) positions, [sliding layers][K|V][n][nkv·hd], in
    // the memory the sequences' KV lives in (a sliding layer needs no row before them, wherever they were saved)
    int32_t win_n = 0;
    size_t win_floats = 0;
    std::unique_ptr<float[], SavedFree> win;
  };
  // The saved-piece calls' locks, taken in this order: the compute lock when the pieces live in device memory (their
  // copies go through the backend's queue, which a running step also uses), then the sequence table's.
  class SavedLock {
   public:
    SavedLock(std::mutex& compute, bool device, std::mutex& seqs) : device_(compute, std::defer_lock), seqs_(seqs, std::defer_lock) {
      if (device) device_.lock();
      seqs_.lock();
    }

   private:
    std::unique_lock<std::mutex> device_, seqs_;  // released in reverse
  };
  SavedLock saved_lock() { return SavedLock(compute_mu_, !host_memory_, seq_mu_); }
  // floats from the host into a new saved-piece buffer (saved_transfer.cpp; the caller holds saved_lock())
  std::unique_ptr<float[], SavedFree> upload(const float* src, size_t floats, const char* what);
  std::unordered_map<int64_t, SavedRows> saved_rows_;
  std::unordered_map<int64_t, SavedState> saved_states_;
  int64_t next_saved_ = 1;
};

}  // namespace splash
