// The Qwen hybrid model family (qwen3_5, qwen3_5_moe, qwen3_next, qwen3): config, weights bound in
// place from the package, per-sequence state, and the batched forward step.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/loader.h"
#include "model/state_pool.h"
#include "model/vision.h"
#include "runtime/options.h"
#include "runtime/package.h"
#include "sampler/sampler.h"
#include "splash/backend.h"

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

// Stacked experts [E, rows, cols]: expert e is `base` shifted by e strides.
struct Stacked {
  splash_weight base{};
  int64_t E = 0;
  splash_weight expert(int64_t e) const;
};

struct Layer {
  bool linear = false, moe = false;
  const float* in_norm = nullptr;
  const float* post_norm = nullptr;
  // Gated DeltaNet
  splash_weight qkv{}, z{}, b{}, a{}, out{};
  const float *conv = nullptr, *A_log = nullptr, *dt_bias = nullptr, *gnorm = nullptr;
  // gated attention
  splash_weight q{}, k{}, v{}, o{};
  const float *q_norm = nullptr, *k_norm = nullptr;
  // dense MLP / shared expert / MoE
  splash_weight gate{}, up{}, down{};
  splash_weight router{}, sgate{}, sg{}, su{}, sd{};
  Stacked eg, eu, ed;
  bool shared = false;
  // offsets into a sequence's state block (floats)
  int64_t conv_off = 0, ssm_off = 0, kv_index = -1;
  int64_t gdn_index = -1;  // linear layers: their index among the linear layers (rollback tape)
};

// DFlash draft (speculative-and-cache.md §1.1): fc over the concatenated outputs of the tapped target
// layers → hidden_norm = context features; per draft layer (Qwen3 decoder layer) K/V of context positions
// come from those features (cached per sequence), the block [anchor, mask×(B−1)] attends to the context and
// bidirectionally to itself; logits through the target's lm_head.
// DFlash 2 (§2) adds, when the config asks: sliding-window layers (a block row at position p sees keys
// (p − window, p + window) ∩ its causal range), the grouped dynamic causal conv around both sublayers of every
// layer (model/draft_conv.cpp) and the candidate selector over the top-k of each drafted row
// (model/draft_selector.cpp); the draft's logits are scaled by out_mul and soft-capped at softcap.
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

// splash.json's `config` (with its `family`) and `draft.config`, checked (model/weights.cpp); throw bad_package or
// unsupported.
ModelConfig parse_model_config(const Json& manifest);
DraftConfig parse_draft_config(const Json& draft_config, const ModelConfig& target);

struct DraftLayer {
  const float *in_norm = nullptr, *post_norm = nullptr, *q_norm = nullptr, *k_norm = nullptr;
  splash_weight q{}, k{}, v{}, o{}, gate{}, up{}, down{};
  // DFlash 2 conv, [0] around attention, [1] around the MLP: base kernels [2][K][H] (host memory: the taps run on
  // the host) and the kernel projections [2·K·H/G, H]
  const float* conv_base[2] = {nullptr, nullptr};
  splash_weight conv_proj[2]{};
};

// The DFlash 2 selector's host pieces (model/draft_selector.cpp).
namespace draft2 {
// The k largest of v[0..V) (ties to the lower index), largest first.
void top_k(const float* v, int V, int k, int32_t* ids, float* vals);
// x ← softcap·tanh(mul·x / softcap) (softcap 0: mul·x only).
void transform_logits(float* x, size_t n, float mul, float softcap);
// y = the grouped dynamic causal conv of one block's `rows` rows of x [rows, H] (model/draft_conv.cpp).
void conv_taps(const float* x, const float* dyn, int64_t dyn_stride, const float* base, int rows, int H, int K, int G,
               float* y);
}  // namespace draft2

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
  // draft KV, per draft layer [K|V][rows][nkv*hd] (Model::draft_planes): a full layer holds every position
  // (rows cap + B: context, then block scratch); a sliding layer, once its window is small next to cap, a ring of
  // M = window + B positions stored twice (rows 2M, position p at p mod M and p mod M + M), so the keys of any
  // window are contiguous rows
  float* dkv = nullptr;
  int32_t draft_len = 0;        // positions whose context K/V are in dkv
  int32_t draft_lo = 0;         // sliding layers hold context K/V of positions [draft_lo, draft_len) only
  float* feat = nullptr;        // tapped target features of positions [draft_len, len), [rows][taps·H]
  int64_t feat_rows = 0, feat_cap = 0;
  // rollback buffer of the last verify step (model/rollback.cpp): with the per-position method, the GDN states after
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
  // gdn_floats of state, or null without linear layers}; owned by the model (Model::drop_snaps), taken by
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

// What an item gets back from its computed trailing rows [nrows × V]: the last `keep` rows as logits and the
// sampled rows (model/item_rows.cpp).
void take_rows(const float* rows, int nrows, int V, int keep, const sampler::Request* sample, std::vector<float>& logits,
               std::vector<sampler::Sampled>& sampled);
// Rows that need nothing but their argmax: temperature 0, no penalties, masks, forced tokens or log-probabilities.
// The backend chooses them where the logits are (argmax_rows), and only their ids come back.
bool greedy_only(const sampler::Request& req);
// What the sampler gives such a request (sample_rows, sample_draft) from the rows' argmax ids; −1 (no token above
// −inf) throws as the sampler does.
void take_ids(const int32_t* ids, size_t n, std::vector<sampler::Sampled>& sampled);
// How an item's rows come back from a pass (Model::fetch_rows): whole rows for the host's sampler, argmax ids
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

class Model {
 public:
  // act_levels: q4/q8 activations, 0 fp32, 1 int8, 2 int8x2 (see backend.h)
  // backend: "cpu", "cuda" or "" (auto: $SPLASH_BACKEND, else CUDA when a device is present, else CPU)
  // max_memory: on a device backend, the cap on its device memory (weights, state, activations); 0 = none
  static std::unique_ptr<Model> open(const std::string& dir, int threads, const char* isa, int act_levels,
                                     bool load_draft = true, const std::string& backend = "",
                                     uint64_t max_memory = 0);  // throws
  ~Model();

  const ModelConfig& config() const { return cfg_; }
  const Package& package() const { return *pkg_; }
  const splash_backend& backend() const { return *be_; }
  // "cuda-sm90" when the package's specialised kernels are loaded and in use, else empty
  const std::string& specialised_kernels() const { return spec_kernels_; }
  uint64_t weight_bytes() const { return pkg_->tensor_bytes(); }
  // Per-sequence state: gdn_bytes() fixed + kv_bytes_per_token() × maxLength.
  uint64_t gdn_bytes() const { return uint64_t(gdn_floats_) * 4; }
  uint64_t kv_bytes_per_token() const { return uint64_t(kv_floats_per_token_) * 4; }
  // (with a draft: + draft KV and the rollback buffer of a verify step of B tokens)
  uint64_t sequence_bytes(int64_t max_len) const {
    return gdn_bytes() + kv_bytes_per_token() * uint64_t(max_len) +
           (has_draft() ? draft_bytes(max_len) + uint64_t(rollback_floats(dcfg_.B)) * 4 : 0);
  }
  // How a verify step's GDN/conv state is rolled back to the accepted prefix (model/rollback.cpp): keep the state
  // after every verified position, or keep the block's start state and the recurrence's inputs and re-run the
  // accepted ones. Chosen at open (model/state_sizes.h; Options::gdn_rollback overrides the rule).
  bool rollback_replay() const { return replay_; }
  size_t rollback_floats(int32_t tokens) const;
  // Device backends: the device's free and total memory, this model's backend's use and cap (false on CPU).
  struct DeviceMemory {
    uint64_t free = 0, total = 0, used = 0, limit = 0;
  };
  bool device_memory(DeviceMemory& out) const { return backend_device_memory(*be_, out.free, out.total, out.used, out.limit); }
  int threads() const { return threads_; }
  int act_levels() const { return act_levels_; }

  // Sequence table (guarded by seq_mu_; safe from the JS thread while a step runs).
  int32_t create_sequence(int32_t max_len);  // throws
  void free_sequence(int32_t id);            // throws
  void truncate_sequence(int32_t id, int32_t len);
  Sequence* find(int32_t id);  // nullptr if unknown; caller holds seq_mu_
  Sequence* idle_sequence(int32_t id);  // throws unknown_sequence / sequence_busy; caller holds seq_mu_
  std::mutex& seq_mutex() { return seq_mu_; }

  // Throws what step() refuses of an item before it runs: no sequence or tokens, more tokens than the sequence's
  // maxLength leaves room for (too_long), kept lengths (snaps) not ascending inside the item or in a verify pass.
  void check_item(const StepItem& it) const;
  // One batched step; out[i] gets logits per item (empty for 'none'), items[i].sampled the sampled rows.
  // Serialised by compute_mu_.
  void step(std::vector<StepItem>& items, std::vector<std::vector<float>>& out);
  // Samples again row `row` of the sampled rows (StepItem::sample) of sequence `seq_id`'s item in the last step,
  // from the logits that item kept (StepItem::keep), with `req` (one row: e.g. the grammar mask that step did not
  // have); a verify item's row counts the drafts before it for the penalties, as in the step. On the backend's
  // sampler where it takes the request, else on the host's. Each kept row once (model/resample.cpp).
  sampler::Sampled resample(int32_t seq_id, int row, const sampler::Request& req);

  // Prefix cache (saved_state.cpp): KV rows [start, start+n) (target, and the draft's context when it has
  // seen them) and the GDN/conv state at the current length, saved under ids the caller frees; restore()
  // puts rows covering [0, len) and a state at len into a sequence and returns whether the draft context
  // came back too (else the draft cannot run on it).
  int64_t save_rows(int32_t seq, int32_t start, int32_t n);  // throws
  // the state at the sequence's length, or (length ≥ 0, below it) one its last step kept (StepItem::snaps)
  int64_t save_state(int32_t seq, int32_t length = -1);      // throws
  bool restore(int32_t seq, const std::vector<int64_t>& rows, int64_t state);  // throws
  void free_saved(int64_t id);                               // throws
  struct SavedStats {
    size_t sequences = 0, rows = 0, states = 0, bytes = 0;
    size_t pooled = 0;  // idle sequence buffers kept for reuse (state_pool.h)
  };
  SavedStats saved_stats();
  // The prefix cache's disk tier (saved_transfer.cpp): a saved piece's shape, its floats copied to the host
  // (a: rows' data or a state's GDN/conv floats; b: a state's draft window), and a piece made from such floats,
  // its shape checked against this model. Ids as save_rows / save_state.
  struct SavedInfo {
    bool state = false;  // false: rows
    int32_t n = 0;       // rows: positions; state: the length it was saved at
    bool draft = false;
    int32_t win_n = 0;
    size_t a_floats = 0, b_floats = 0;
  };
  SavedInfo saved_info(int64_t id);                        // throws
  void read_saved(int64_t id, float* a, float* b);         // throws; a, b: host, sized by saved_info
  int64_t import_rows(int32_t n, bool draft, const float* data, size_t floats);  // throws
  int64_t import_state(int32_t len, bool draft, int32_t win_n, const float* gdn, size_t gdn_floats, const float* win,
                       size_t win_floats);  // throws
  // Vision encoder (null when the package has none). encode_image: processor patches → merged embeddings.
  const VisionEncoder* vision() const { return vision_.get(); }
  std::vector<float> encode_image(const float* pixels, int t, int h, int w);

  // Draft (null config when the package has none or it was not loaded).
  bool has_draft() const { return dcfg_.B > 0; }
  const DraftConfig& draft_config() const { return dcfg_; }
  // greedy rows chosen on the backend when it can (the default) or on the host (benchmarks)
  void set_pick_on_backend(bool on) { pick_on_backend_ = on && splash_backend_supports_op(be_, SPLASH_OP_ARGMAX_ROWS); }
  // sampled rows (T > 0, penalties) chosen by the backend's sampler when it has one, or on the host
  void set_sample_on_backend(bool on) { sample_on_backend_ = on && splash_backend_supports_op(be_, SPLASH_OP_SAMPLE_ROWS); }
  // steps recorded as graphs where the backend can (the default, Options::step_graphs) or always queued slot by slot
  void set_step_graphs(bool on) { opts_.step_graphs = on; }
  uint64_t draft_bytes(int64_t max_len) const;
  // One draft layer's K and V planes in a sequence's dkv; ring = M (positions p at rows p mod M and p mod M + M)
  // for a sliding layer kept as a ring, else 0 (position p at row p).
  struct DraftPlanes {
    float *k, *v;
    int32_t ring;
  };
  DraftPlanes draft_planes(const Sequence& s, int li) const;
  // Positions of context a sliding layer needs before a block at length len: [len − draft_keep(len), len).
  int32_t draft_keep(int32_t len) const;
  // One draft forward per item: consumes the pending features, out[i] = logits of block rows 1..n [n·V]
  // (empty when the item samples and does not ask for logits), items[i].sampled the sampled rows.
  void draft(std::vector<DraftItem>& items, std::vector<std::vector<float>>& out);

 private:
  // DFlash 2 parts of the draft pass: the conv of sublayer `which` (0 attention, 1 MLP) on the device rows x
  // [Nb, H] of blocks of Bb rows, in place; `prepare` first computes the dynamic kernels of both convs from x into
  // dyn (host), which the finish conv then reads (model/draft_conv.cpp).
  void draft_conv(const DraftLayer& l, int which, bool prepare, float* x, int Nb, int Bb);
  // One item's block rows attended one by one, each over its own key range (sliding window, causal block).
  void draft_attention_rows(const float* q, float* o, const DraftPlanes& p, int len, int Bb, bool sliding, bool causal,
                            float scale);
  // Draft KV layout (model/draft_kv.cpp): the ring length of a sliding layer in a sequence of cap rows (0: linear),
  // the rows of one plane of layer li, the largest cap whose draft KV fits `bytes` (at most hi), and the copy of n
  // rows of K and V (device memory) into positions [pos, pos + n) of a layer (n ≤ M for a ring).
  int32_t draft_ring(int64_t cap) const;
  int64_t draft_plane_rows(int li, int64_t cap) const;
  int64_t draft_cap(size_t bytes, int64_t hi) const;
  void draft_put(const DraftPlanes& p, int64_t pos, const float* k, const float* v, int n);
  // After a draft pass wrote positions below `written`: the context is consumed (caller holds seq_mu_).
  void draft_done(Sequence* s, int32_t written);
  // The candidate selector: item i walks its first items[i].sample->rows.size() drafted rows, whose normed hidden
  // states are rows roff[i].. of sel (device) and raw logits rows roff[i].. of lh [.., V] (host): roff[i] is the
  // item's first row, not a prefix sum. Fills its `sampled` and, at T > 0, its sequence's draft_q
  // (model/draft_selector.cpp).
  void draft_select(std::vector<DraftItem>& items, const std::vector<size_t>& roff, const float* sel, const float* lh);
  Model() = default;
  void bind_weights();
  void load_draft_files(const std::string& dir);
  void forward(std::vector<StepItem>& items, std::vector<std::vector<float>>& out);
  // Everything a step queues on the backend, from the embeddings to the logits rows `logits` (no host copy).
  struct StepBufs {
    float *h, *x, *y, *taps, *sel, *logits;
    std::vector<std::pair<int, int>> runs;  // logits rows: (first row, count) runs
  };
  void queue_step(std::vector<StepItem>& items, int N, const StepBufs& b);
  // Step graphs (model/decode_graph.cpp): runs the step as a recorded graph when the backend has graph
  // slots and the step is small (a decode batch, a small model's verify block); false when the caller must queue
  // it directly.
  bool graph_step(std::vector<StepItem>& items, int N, const StepBufs& b);
  void drop_graphs();
  int32_t graph_cap(const Sequence* s, int n) const;
  void linear_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y);
  void full_attention(const Layer& l, std::vector<StepItem>& items, const float* x, int N, float* y);
  void mlp(const Layer& l, const float* x, int N, float* y);
  void matmul(const splash_weight& w, const float* x, int n, float* y) const;
  void upload_weights();
  void check_backend();  // throws Error("backend_error") when the backend recorded a failure  // device copies of every weight and norm (backends without host memory)
  // Step activations: one growable backend buffer per use, kept across steps.
  enum Buf { kH, kX, kY, kQKV, kZ, kB, kA, kConv, kO, kQG, kK, kV, kQ, kG, kU, kSh, kGate, kRouter, kTaps, kSel,
             kLogits, kDFeat, kDCtx, kDH, kDX, kDY, kDCk, kDCv, kDQ, kDBk, kDBv, kDO, kDI1, kDI2, kDQp, kDOp, kDDyn,
             kDSelH, kDSelP, kDSelCb, kPick, kKept, kNumBufs };
  float* buf(Buf b, size_t floats);
  void* alloc_state(size_t bytes, bool zero);  // sequence state (KV is not zeroed on host memory)
  void free_state(void* p);
  int32_t kv_capacity(int32_t max_len) const;  // rows to allocate for a sequence of max_len tokens
  void ensure_feat(Sequence* s, int64_t rows);
  void ensure_slots(Sequence* s, int32_t n);  // room for the rollback buffer of a verify step of n tokens
  // rollback (model/rollback.cpp)
  void choose_rollback();
  int64_t tape_row() const { return cfg_.conv_ch() + 2 * int64_t(cfg_.nv); }  // replay_row_floats (state_sizes.h)
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

  Options opts_;  // read at open (runtime/options.h)
  std::unique_ptr<Package> pkg_;
  splash_backend* be_ = nullptr;
  BackendHandle bh_;
  std::string spec_kernels_;
  void load_spec_kernels(const std::string& dir);
  ModelConfig cfg_;
  std::vector<Layer> layers_;
  splash_weight embed_{}, lm_head_{};
  const float* norm_ = nullptr;
  std::vector<std::vector<float>> owned_;  // norms converted from BF16, if any
  std::unique_ptr<VisionEncoder> vision_;
  std::vector<void*> device_;              // uploaded weights (freed with the backend)
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
  int32_t* gvars_dev_ = nullptr;   // the step's [tokens | sequence lengths] in device memory
  const int32_t* gv_ = nullptr;    // gvars_dev_ while a graph's step is queued, else null (slots take host values)
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
  // samples them (the backend's sampler may change rows in place); what resample() reads (model/resample.cpp).
  struct Kept {
    int32_t seq = 0;
    size_t off = 0;  // first row in the kKept buffer
    int rows = 0, sampled = 0;
    bool verify = false;
    std::vector<int32_t> tokens;
    std::vector<char> used;
  };
  void keep_rows(const std::vector<StepItem>& items, const float* logits, const std::vector<size_t>& off);
  std::vector<Kept> kept_;
  sampler::Scratch resample_scratch_;  // resample()'s host sampler (under compute_mu_)
  // A sequence's device copy of its last draft pass's distributions, room for `rows` rows (model/draft.cpp).
  float* draft_q_rows(Sequence* s, int rows);
  // The host copy of them, for a verify pass the host samples (a no-op when the host has them).
  void draft_q_to_host(Sequence* s);
  bool pick_on_backend_ = false;  // the backend has argmax_rows ($SPLASH_DEVICE_ARGMAX=0: choose on the host)
  // the backend has sample_rows and is a device ($SPLASH_DEVICE_SAMPLE=0: sample on the host; =1 also on the CPU)
  bool sample_on_backend_ = false;
  std::vector<int32_t> pick_host_;
  std::vector<float> logits_host_;
  float* logits_pinned_ = nullptr;
  size_t logits_pinned_cap_ = 0;
  bool host_memory_ = true;
  DraftConfig dcfg_;
  std::vector<DraftLayer> dlayers_;
  splash_weight dfc_{};
  splash_weight dsel_proj_{}, dsel_pred_{}, dsel_succ_{};  // DFlash 2 candidate selector
  // host scratch of the DFlash 2 parts, kept across passes (touching fresh pages costs more than the work here)
  struct Draft2Host {
    std::vector<float> in, out, dyn[2], hp, rows;
  } d2h_;
  const float *dhnorm_ = nullptr, *dnorm_ = nullptr;
  std::vector<int> tap_slot_;  // per target layer: index in taps, or -1
  int64_t gdn_floats_ = 0, kv_floats_per_token_ = 0, n_full_ = 0, n_linear_ = 0;
  bool replay_ = false;
  int threads_ = 1;
  int act_levels_ = 1;

  std::mutex seq_mu_, compute_mu_;
  std::unordered_map<int32_t, Sequence> seqs_;
  std::vector<float*> gdn_pool_;  // recycled GDN state blocks (all the same size)
  // recycled KV, draft KV, feature and verify-state buffers (state_pool.h); emptied before the backend closes
  StatePool pool_{[this](size_t b) { return alloc_state(b, false); }, [this](void* p) { free_state(p); }};
  int32_t next_id_ = 1;
  // Saved rows and states live where the sequences' state lives: host memory on the CPU backend
  // (host_state_alloc: huge pages, not zeroed), device memory on a device backend (the memory plan counts the
  // prefix cache there, and a save or restore is then a copy inside the device, not one over the host link).
  struct SavedFree {
    Model* m;  // set by save_rows (no default member initializer: the enclosing class is not complete here)
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
