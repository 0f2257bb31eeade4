// The model as its callers (the addon, the benchmarks, the GPU tests) see it: open a package on a backend, describe
// it, keep sequences, run batched steps and draft passes, save and restore prefix-cache pieces. One implementation,
// the Qwen hybrid family (qwen3_5, qwen3_5_moe, qwen3_next, qwen3), in model/hybrid_model.h, whose work falls in
// three phases: load (weights bound from the package), step (the forward pass and the draft) and state (sequences,
// the rollback, saved pieces). docs/native-core.md maps the files to the phases.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/sequence.h"
#include "runtime/package.h"
#include "sampler/sampler.h"
#include "splash/backend.h"

namespace splash {

class VisionEncoder;

class Model {
 public:
  // act_levels: q4/q8 activations, 0 fp32, 1 int8, 2 int8x2 (see backend.h)
  // backend: "cpu", "cuda" or "" (auto: $SPLASH_BACKEND, else CUDA when a device is present, else CPU)
  // max_memory: on a device backend, the cap on its device memory (weights, state, activations); 0 = none
  static std::unique_ptr<Model> open(const std::string& dir, int threads, const char* isa, int act_levels,
                                     bool load_draft = true, const std::string& backend = "",
                                     uint64_t max_memory = 0);  // throws
  virtual ~Model() = default;

  // ---- what was opened
  virtual const ModelConfig& config() const = 0;
  virtual const Package& package() const = 0;
  virtual const splash_backend& backend() const = 0;
  // "cuda-sm90" when the package's specialised kernels are loaded and in use, else empty
  virtual const std::string& specialised_kernels() const = 0;
  virtual uint64_t weight_bytes() const = 0;
  virtual int threads() const = 0;
  virtual int act_levels() const = 0;
  // Device backends: the device's free and total memory, this model's backend's use and cap (false on CPU).
  struct DeviceMemory {
    uint64_t free = 0, total = 0, used = 0, limit = 0;
  };
  virtual bool device_memory(DeviceMemory& out) const = 0;
  // Vision encoder (null when the package has none). encode_image: processor patches → merged embeddings.
  virtual const VisionEncoder* vision() const = 0;
  virtual std::vector<float> encode_image(const float* pixels, int t, int h, int w) = 0;
  // Draft (null config when the package has none or it was not loaded).
  virtual bool has_draft() const = 0;
  virtual const DraftConfig& draft_config() const = 0;

  // ---- per-sequence state sizes (model/state/state_sizes.h)
  // gdn_bytes() fixed + kv_bytes_per_token() × maxLength, with a draft + draft KV and the rollback buffer of a
  // verify step of B tokens: sequence_bytes(maxLength).
  virtual uint64_t gdn_bytes() const = 0;
  virtual uint64_t kv_bytes_per_token() const = 0;
  virtual uint64_t sequence_bytes(int64_t max_len) const = 0;
  // How a verify step's GDN/conv state is rolled back to the accepted prefix (model/state/rollback.cpp): keep the state
  // after every verified position, or keep the block's start state and the recurrence's inputs and re-run the
  // accepted ones. Chosen at open (model/state/state_sizes.h; Options::gdn_rollback overrides the rule).
  virtual bool rollback_replay() const = 0;
  virtual size_t rollback_floats(int32_t tokens) const = 0;
  // Positions of context a sliding draft layer needs before a block at length len: [len − draft_keep(len), len).
  virtual int32_t draft_keep(int32_t len) const = 0;

  // ---- the sequence table (guarded by seq_mutex(); safe from the JS thread while a step runs)
  virtual int32_t create_sequence(int32_t max_len) = 0;  // throws
  virtual void free_sequence(int32_t id) = 0;            // throws
  virtual void truncate_sequence(int32_t id, int32_t len) = 0;
  virtual Sequence* find(int32_t id) = 0;  // nullptr if unknown; caller holds seq_mutex()
  virtual std::mutex& seq_mutex() = 0;

  // ---- steps (serialised among themselves)
  // Throws what step() refuses of an item before it runs: no sequence or tokens, more tokens than the sequence's
  // maxLength leaves room for (too_long), kept lengths (snaps) not ascending inside the item or in a verify pass.
  virtual void check_item(const StepItem& it) const = 0;
  // One batched step; out[i] gets logits per item (empty for 'none'), items[i].sampled the sampled rows.
  virtual void step(std::vector<StepItem>& items, std::vector<std::vector<float>>& out) = 0;
  // Samples again row `row` of the sampled rows (StepItem::sample) of sequence `seq_id`'s item in the last step,
  // from the logits that item kept (StepItem::keep), with `req` (one row: e.g. the grammar mask that step did not
  // have); a verify item's row counts the drafts before it for the penalties, as in the step. On the backend's
  // sampler where it takes the request, else on the host's. Each kept row once (model/step/resample.cpp).
  virtual sampler::Sampled resample(int32_t seq_id, int row, const sampler::Request& req) = 0;
  // One draft forward per item: consumes the pending features, out[i] = logits of block rows 1..n [n·V]
  // (empty when the item samples and does not ask for logits), items[i].sampled the sampled rows.
  virtual void draft(std::vector<DraftItem>& items, std::vector<std::vector<float>>& out) = 0;
  // Benchmarks and tests: greedy rows chosen on the backend when it can (the default) or on the host; sampled rows
  // (T > 0, penalties) by the backend's sampler when it has one, or on the host; steps recorded as graphs where the
  // backend can (the default) or always queued slot by slot.
  virtual void set_pick_on_backend(bool on) = 0;
  virtual void set_sample_on_backend(bool on) = 0;
  virtual void set_step_graphs(bool on) = 0;

  // ---- the prefix cache (model/state/saved_state.cpp): KV rows [start, start+n) (target, and the draft's context when it
  // has seen them) and the GDN/conv state at the current length, saved under ids the caller frees; restore() puts
  // rows covering [0, len) and a state at len into a sequence and returns whether the draft context came back too
  // (else the draft cannot run on it).
  virtual int64_t save_rows(int32_t seq, int32_t start, int32_t n) = 0;  // throws
  // the state at the sequence's length, or (length ≥ 0, below it) one its last step kept (StepItem::snaps)
  virtual int64_t save_state(int32_t seq, int32_t length = -1) = 0;  // throws
  virtual bool restore(int32_t seq, const std::vector<int64_t>& rows, int64_t state) = 0;  // throws
  virtual void free_saved(int64_t id) = 0;                                               // throws
  struct SavedStats {
    size_t sequences = 0, rows = 0, states = 0, bytes = 0;
    size_t pooled = 0;  // idle sequence buffers kept for reuse (state_pool.h)
  };
  virtual SavedStats saved_stats() = 0;
  // Its disk tier (model/state/saved_transfer.cpp): a saved piece's shape, its floats copied to the host (a: rows' data or
  // a state's GDN/conv floats; b: a state's draft window), and a piece made from such floats, its shape checked
  // against this model. Ids as save_rows / save_state.
  struct SavedInfo {
    bool state = false;  // false: rows
    int32_t n = 0;       // rows: positions; state: the length it was saved at
    bool draft = false;
    int32_t win_n = 0;
    size_t a_floats = 0, b_floats = 0;
  };
  virtual SavedInfo saved_info(int64_t id) = 0;                 // throws
  virtual void read_saved(int64_t id, float* a, float* b) = 0;  // throws; a, b: host, sized by saved_info
  virtual int64_t import_rows(int32_t n, bool draft, const float* data, size_t floats) = 0;  // throws
  virtual int64_t import_state(int32_t len, bool draft, int32_t win_n, const float* gdn, size_t gdn_floats,
                               const float* win, size_t win_floats) = 0;  // throws
};

}  // namespace splash
