// The one backend interface of Splash: a table of operations (function pointers) plus buffer allocation and
// synchronisation, behind a C ABI (ggml-backend style). The CPU (backend/cpu) and CUDA (backend/cuda) backends fill
// it. Optional slots are NULL where a backend lacks them: splash_backend_supports_op says which it has, and the model
// graph falls back (a host path, a step queued slot by slot) or refuses. Backend-specific extras go through
// `get_proc_address` instead of growing the table.
//
// Conventions: activations are row-major fp32 ([tokens, features]) in buffers from `buffer_alloc`
// (host memory on CPU, device memory on CUDA); every pointer a slot takes is such a buffer unless its
// comment says "host". Weights are read in place from the package mapping on a backend whose
// `host_memory` is 1, and uploaded once (buffer_alloc + copy_to_device) on one whose `host_memory` is 0.
// A backend context pointer `ctx` comes first in every slot. Slots run in order on one queue: a slot that
// returns data to the host (copy_to_host) waits for the work before it. docs/native-core.md says how to add an op.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The table's layout version: a backend module built against another one is refused (backend/loader.cpp).
#define SPLASH_BACKEND_ABI 10

typedef enum splash_dtype {
  SPLASH_F32 = 0,
  SPLASH_BF16 = 1,
  SPLASH_Q8 = 2,  // MLX affine, 8 bits, group 64: U32 words, BF16 scales/biases [rows, cols/64]
  SPLASH_Q4 = 3,  // MLX affine, 4 bits, group 64
} splash_dtype;

// A 2-D linear weight [rows=out, cols=in] as stored in the package (no copy).
typedef struct splash_weight {
  int32_t dtype;           // splash_dtype
  int64_t rows, cols;      // logical shape (cols = input features)
  const void* data;        // F32/BF16 values, or packed U32 words for q4/q8
  const uint16_t* scales;  // BF16 [rows, cols/64] (q4/q8 only)
  const uint16_t* biases;  // BF16 [rows, cols/64] (q4/q8 only)
  uint32_t flags;          // SPLASH_WEIGHT_* bits
} splash_weight;

// The output feeds something sensitive (GDN decay/beta, MoE router, shared-expert gate): a backend must
// not use reduced-precision activations for it. These matrices are tiny, so it costs nothing.
#define SPLASH_WEIGHT_EXACT 1u
// An approximation is fine (the speculative draft: its tokens are only proposals the target verifies): a backend
// may use its fastest activations (the CPU: one int8 level).
#define SPLASH_WEIGHT_FAST 2u

// Gated DeltaNet per-call parameters (one sequence, one layer, T tokens).
typedef struct splash_gdn_args {
  int32_t n_tokens, nk, nv, dk, dv;
  const float* q;      // [T, nk*dk] post-conv, pre-l2norm
  const float* k;      // [T, nk*dk]
  const float* v;      // [T, nv*dv]
  const float* beta;   // [T, nv] sigmoid(b)
  const float* g;      // [T, nv] log decay
  int64_t qk_stride, v_stride;  // row strides (floats) of q/k and v
  float* state;        // [nv, dk, dv] fp32, updated in place
  float* out;          // [T, nv*dv]
  // (gdn_recurrent only) a speculative verify or its replay. `stepwise` 1: every token's arithmetic is a
  // one-token call's, so one call of T tokens gives the bits of T calls of one. `states` (implies stepwise): the
  // state after token t is also written at states + t·states_stride (floats), in the layout of `state`.
  int32_t stepwise;
  float* states;
  int64_t states_stride;
} splash_gdn_args;

// Causal attention of T new tokens of one sequence against its cache (which already holds them).
typedef struct splash_attn_args {
  int32_t n_tokens, n_heads, n_kv_heads, head_dim;
  int32_t start;          // position of the first new token (cache rows [0, start+T) are valid)
  const float* q;         // [T, q_stride] head h at q + h*head_dim
  int64_t q_stride;
  const float* k_cache;   // [max_len, n_kv_heads*head_dim]
  const float* v_cache;
  float* out;             // [T, n_heads*head_dim]
  float scale;
  // (backends with graph slots only) when set, `start` is read from this device int at run time and
  // start + n_tokens ≤ `cap` (a recorded graph replays at other positions)
  const int32_t* start_dev;
  int32_t cap;
} splash_attn_args;

// Bidirectional attention inside segments of `segment` consecutive tokens (the frames of the vision encoder):
// token i attends to every token of its segment [i − i % segment, + segment), no cache, no mask.
typedef struct splash_seg_attn_args {
  int32_t n_tokens, n_heads, head_dim, segment;
  const float* q;        // [T, stride] head h at q + h*head_dim (likewise k, v)
  const float* k;
  const float* v;
  int64_t stride;        // row stride of q, k and v (floats)
  float* out;            // [T, n_heads*head_dim]
  float scale;
} splash_seg_attn_args;

// Routed experts of one MoE layer for T tokens: softmax over the router logits, top-k (ties to the lower
// expert index), weights renormalised over the k when `renorm`, then out[t] = Σ_k w·down(silu(gate x)·up x);
// with a shared expert (sh_down not NULL), then out[t] += sigmoid(sh_gate[t])·sh_down(silu(sh_g[t])·sh_u[t]),
// from its gate and up projections, which the caller computed (so they can share a launch with the router).
typedef struct splash_moe_args {
  int32_t n_tokens, n_experts, top_k, renorm;
  const float* x;        // [T, gate->cols]
  float* logits;         // [T, E] router logits (the backend may overwrite them)
  const splash_weight* gate;  // stacked bases [E, rows, cols]: expert e = splash_weight_expert(base, e)
  const splash_weight* up;
  const splash_weight* down;
  float* out;            // [T, down->rows], overwritten
  // the shared expert (all NULL: none)
  float* sh_g;                   // [T, sh_down->cols] its gate projection (the backend may overwrite it)
  const float* sh_u;             // [T, sh_down->cols] its up projection
  const splash_weight* sh_down;  // [down->rows, I_shared]
  const float* sh_gate;          // [T] its gate logits
  float* sh_out;                 // [T, down->rows] scratch
} splash_moe_args;

// Expert `e` of a stacked [E, rows, cols] weight whose base describes expert 0 (also callable in CUDA kernels).
#ifdef __CUDACC__
__host__ __device__
#endif
static inline splash_weight splash_weight_expert(const splash_weight* base, int64_t e) {
  splash_weight w = *base;
  const int64_t C = base->cols, R = base->rows, G = C / 64;
  const int64_t row_bytes = base->dtype == SPLASH_F32 ? C * 4 : base->dtype == SPLASH_BF16 ? C * 2
                            : base->dtype == SPLASH_Q8 ? C : C / 2;
  w.data = (const uint8_t*)base->data + e * R * row_bytes;
  if (base->scales) {
    w.scales = base->scales + e * R * G;
    w.biases = base->biases + e * R * G;
  }
  return w;
}

// One row for the sampler on the backend (slot sample_rows): sampler/sampler.h's steps 1–4 (the grammar mask
// applied first, or after the filters: Row::retry, `mask_after`) and its speculative rule on a row of logits where it
// lies. Forced tokens and log-probabilities stay on the host's sampler.
typedef struct splash_sample_desc {
  int64_t row;        // row of x; the token goes to out[row]
  float temperature;  // 0: the argmax of the penalised row
  int32_t top_k;      // 0 = off
  double top_p;       // (0, 1]
  double min_p;       // [0, 1]
  float repetition, frequency, presence;
  int32_t n_penalized;  // (id, count) pairs ints[2·(pen_at + j)], ints[2·(pen_at + j) + 1] for j < n_penalized:
  int64_t pen_at;       //   each id once, count = its occurrences in the output (drafts before the row included)
  double uniform;       // the draw: in candidate order (as sampler::draw), or in id order over the distribution
                        //   a draft row keeps or over a verify row's residual (as sampler::draw_probs)
  int32_t draft;        // ≥ 0, temperature > 0: the drafted token this row verifies against q (rejection rule)
  int32_t mask_after;   // 1 (temperature > 0, a mask, no draft): the mask applies after the filters — an
                        //   allowed first draw stands, a refused one is redrawn with `retry` (sampler/grammar.cpp)
  double accept;        //   with this uniform
  const float* q;       // the draft's distribution for this position (backend memory, `width` floats)
  float* q_out;         // NULL, or where this row's filtered distribution goes (a draft row: drawn in id order)
  int64_t mask_at;      // ≥ 0: the grammar mask, ceil(width/32) words at ints[mask_at ..] (bit id & 31 of word id >> 5
                        //   set = allowed); disallowed tokens become −inf before anything chooses. < 0: none
  double retry;         // mask_after: the uniform of the draw under the mask
} splash_sample_desc;

typedef struct splash_backend_i {
  uint32_t abi_version;  // SPLASH_BACKEND_ABI
  const char* name;      // "cpu", "cuda"
  const char* variant;   // e.g. "avx2", "avx512", "scalar", "sm_90"
  int32_t host_memory;   // 1: buffers are host memory (weights bound in place); 0: device memory

  // ---- buffers, copies and synchronisation
  void* (*buffer_alloc)(void* ctx, size_t bytes);  // zeroed, 64-byte aligned
  void (*buffer_free)(void* ctx, void* ptr);
  void (*synchronize)(void* ctx);                  // wait for queued work (CPU: no-op)
  void (*copy_to_device)(void* ctx, void* dst, const void* src_host, size_t bytes);
  void (*copy_to_host)(void* ctx, void* dst_host, const void* src, size_t bytes);  // waits for queued work
  // `height` rows of `width` bytes, buffer to buffer, with row pitches in bytes.
  void (*copy2d)(void* ctx, void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height);
  void (*memset_zero)(void* ctx, void* dst, size_t bytes);

  // ---- linear algebra and embeddings
  // y[t, r] = Σ_c W[r, c] · x[t, c] for t < n_tokens; x row stride = w->cols, y row stride = y_stride.
  void (*matmul)(void* ctx, const splash_weight* w, const float* x, int32_t n_tokens, float* y, int64_t y_stride);
  // out[c] = dequantised row `row` of w (embedding lookup).
  void (*dequant_row)(void* ctx, const splash_weight* w, int64_t row, float* out);
  // out[i, :] = dequantised row tokens[i] of w, for i < n (tokens: host).
  void (*embed)(void* ctx, const splash_weight* w, const int32_t* tokens, int32_t n, float* out);
  // (optional, with the graph slots) embed with `tokens` in device memory, so that a recorded graph replays with new
  // tokens
  void (*embed_dev)(void* ctx, const splash_weight* w, const int32_t* tokens, int32_t n, float* out);

  // ---- elementwise and normalisation
  // y = x · rsqrt(mean(x²) + eps) · w, over `dim`, for n rows (x may equal y).
  void (*rmsnorm)(void* ctx, const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y);
  // (optional) h += y, then x = rmsnorm(h)·w (the residual add and the next norm in one pass)
  void (*add_rmsnorm)(void* ctx, float* h, const float* y, const float* w, int32_t n, int32_t dim, float eps, float* x);
  // y = rmsnorm(x)·w·silu(z), per row of `dim` (GDN output norm).
  void (*gated_rmsnorm)(void* ctx, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps,
                        float* y);
  // y = (x − mean)·rsqrt(var + eps)·w + b over `dim`, for n rows (LayerNorm with bias; x may equal y).
  void (*layer_norm)(void* ctx, const float* x, const float* w, const float* b, int32_t n, int32_t dim, float eps,
                     float* y);
  void (*add)(void* ctx, float* y, const float* x, int64_t n);  // y += x
  void (*add_bias)(void* ctx, float* y, const float* b, int32_t n, int32_t dim);  // y[r, c] += b[c]
  void (*swiglu)(void* ctx, const float* gate, const float* up, int64_t n, float* out);  // silu(g)·u
  // x = GELU(x) in place: the tanh approximation (gelu_pytorch_tanh) when `tanh_approx`, else exact (erf).
  void (*gelu)(void* ctx, float* x, int64_t n, int32_t tanh_approx);
  // y[r, :] += sigmoid(gate[r]) · x[r, :] over rows of `dim` (shared-expert gate).
  void (*gated_add)(void* ctx, float* y, const float* x, const float* gate, int32_t n, int32_t dim);
  // x[r·xp + c] *= sigmoid(g[r·gp + c]) for r < rows, c < width (pitches in floats).
  void (*sigmoid_gate)(void* ctx, float* x, int64_t x_pitch, const float* g, int64_t g_pitch, int32_t rows,
                       int32_t width);

  // ---- positions
  // Partial half-split rotary on `n_heads` heads of `head_dim` at stride `head_stride` for one token;
  // positions pos[3] = (T,H,W); `section` = mrope_section or NULL (1-D RoPE).
  void (*rope)(void* ctx, float* x, int32_t n_heads, int64_t head_stride, int32_t head_dim, int32_t rot_dim,
               const int32_t pos[3], const int32_t* section, float theta);
  // RoPE (as `rope`) on n tokens at rows x + t·row_stride, token t at text position start + t (all three
  // M-RoPE axes equal); `section`: host, NULL for 1-D RoPE.
  void (*rope_seq)(void* ctx, float* x, int32_t n_tokens, int64_t row_stride, int32_t n_heads, int64_t head_stride,
                   int32_t head_dim, int32_t rot_dim, int32_t start, const int32_t* section, float theta);
  // (optional, with the graph slots) rope_seq with `start` in device memory
  void (*rope_seq_dev)(void* ctx, float* x, int32_t n_tokens, int64_t row_stride, int32_t n_heads, int64_t head_stride,
                       int32_t head_dim, int32_t rot_dim, const int32_t* start, const int32_t* section, float theta);
  // Rotate-half rotary from per-token tables cos/sin [n_tokens, head_dim] (any positions, e.g. 2-D) on
  // n_heads heads of head_dim at head_stride, token t at row x + t·row_stride:
  // x[j] ← x[j]·cos[j] − x[j+½]·sin[j], x[j+½] ← x[j+½]·cos[j+½] + x[j]·sin[j+½] for j < head_dim/2.
  void (*rope_table)(void* ctx, float* x, int32_t n_tokens, int64_t row_stride, int32_t n_heads, int64_t head_stride,
                     int32_t head_dim, const float* cos, const float* sin);
  // (optional, with the graph slots) dst rows [*start, *start + n) (rows of `width` floats) = src rows [0, n), `start`
  // in device memory: the KV append of a recorded graph
  void (*rows_at)(void* ctx, float* dst, const float* src, int32_t n, int64_t width, const int32_t* start);

  // ---- sequence mixers and experts
  void (*attention)(void* ctx, const splash_attn_args* a);
  void (*seg_attention)(void* ctx, const splash_seg_attn_args* a);  // bidirectional, per segment
  // Causal depthwise conv (kernel K) over T tokens with state = last K-1 inputs ([K-1, C]); SiLU applied.
  // Each output is the same sum in the same order whatever T, so a call of T tokens equals T calls of one.
  void (*conv1d_silu)(void* ctx, const float* x, int32_t n_tokens, int32_t channels, int32_t kernel,
                      const float* w /*[C,K]*/, float* state, float* y);
  // GDN gates over [n, nv]: beta = sigmoid(b), g = −exp(A_log[h])·softplus(a + dt_bias[h]) (in place).
  void (*gdn_gates)(void* ctx, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv);
  void (*gdn_recurrent)(void* ctx, const splash_gdn_args* a);  // one step per token (decode)
  void (*gdn_chunked)(void* ctx, const splash_gdn_args* a);    // (optional) chunked form, chunk 64
  void (*moe)(void* ctx, const splash_moe_args* a);  // routed experts, and the shared expert when given

  // ---- token choice (optional)
  // out[r] = the first index of the largest value of row r of x [rows × width] (NaN never counts; a row with
  // nothing above −inf gives −1): greedy rows are chosen where their logits are, and only the ids come back.
  void (*argmax_rows)(void* ctx, const float* x, int32_t rows, int64_t width, int32_t* out);
  // For each of the n rows (host array): out[rows[j].row] = its token, or −1 when nothing in the row is above
  // −inf. x may be changed (a backend may apply the penalties in place). ints: host, n_ints values (the rows'
  // penalty pairs).
  void (*sample_rows)(void* ctx, float* x, int64_t width, const splash_sample_desc* rows, int32_t n,
                      const int32_t* ints, int64_t n_ints, int32_t* out);

  // ---- decode graphs (optional, NULL on CPU, all or none, with embed_dev, rope_seq_dev and rows_at): the slots called
  // between capture_begin and capture_end are recorded, not run; graph_launch replays them. capture_end returns NULL
  // when a slot needed the host while recording (a host copy, host-side routing): the caller then runs the step
  // directly. A graph stays valid while graph_epoch is unchanged (the backend's own scratch buffers were not
  // reallocated).
  void (*graph_capture_begin)(void* ctx);
  void* (*graph_capture_end)(void* ctx);
  void (*graph_launch)(void* ctx, void* graph);
  void (*graph_free)(void* ctx, void* graph);
  uint64_t (*graph_epoch)(void* ctx);

  void* (*get_proc_address)(void* ctx, const char* name);  // (optional) backend-specific extras
} splash_backend_i;

typedef struct splash_backend {
  const splash_backend_i* iface;
  void* ctx;
} splash_backend;

// The operations of the table, in its order: X(OP, slot, required). A required op is in every backend; an optional
// one may be NULL. Adding an op: its slot in splash_backend_i, a line here, the slot in every backend's table
// (NULL where it lacks it), and a check against the CPU in the op tests (docs/native-core.md).
#define SPLASH_BACKEND_OPS(X)                                                                            \
  X(BUFFER_ALLOC, buffer_alloc, 1) X(BUFFER_FREE, buffer_free, 1) X(SYNCHRONIZE, synchronize, 1)         \
  X(COPY_TO_DEVICE, copy_to_device, 1) X(COPY_TO_HOST, copy_to_host, 1) X(COPY2D, copy2d, 1)             \
  X(MEMSET_ZERO, memset_zero, 1) X(MATMUL, matmul, 1) X(DEQUANT_ROW, dequant_row, 1) X(EMBED, embed, 1)  \
  X(EMBED_DEV, embed_dev, 0) X(RMSNORM, rmsnorm, 1) X(ADD_RMSNORM, add_rmsnorm, 0)                       \
  X(GATED_RMSNORM, gated_rmsnorm, 1) X(LAYER_NORM, layer_norm, 1) X(ADD, add, 1) X(ADD_BIAS, add_bias, 1) \
  X(SWIGLU, swiglu, 1) X(GELU, gelu, 1) X(GATED_ADD, gated_add, 1) X(SIGMOID_GATE, sigmoid_gate, 1)       \
  X(ROPE, rope, 1) X(ROPE_SEQ, rope_seq, 1) X(ROPE_SEQ_DEV, rope_seq_dev, 0) X(ROPE_TABLE, rope_table, 1) \
  X(ROWS_AT, rows_at, 0) X(ATTENTION, attention, 1) X(SEG_ATTENTION, seg_attention, 1)                    \
  X(CONV1D_SILU, conv1d_silu, 1) X(GDN_GATES, gdn_gates, 1) X(GDN_RECURRENT, gdn_recurrent, 1)            \
  X(GDN_CHUNKED, gdn_chunked, 0) X(MOE, moe, 1) X(ARGMAX_ROWS, argmax_rows, 0)                            \
  X(SAMPLE_ROWS, sample_rows, 0) X(GRAPH_CAPTURE_BEGIN, graph_capture_begin, 0)                           \
  X(GRAPH_CAPTURE_END, graph_capture_end, 0) X(GRAPH_LAUNCH, graph_launch, 0) X(GRAPH_FREE, graph_free, 0) \
  X(GRAPH_EPOCH, graph_epoch, 0) X(GET_PROC_ADDRESS, get_proc_address, 0)

typedef enum splash_op {
#define SPLASH_OP_ENUM(op, slot, required) SPLASH_OP_##op,
  SPLASH_BACKEND_OPS(SPLASH_OP_ENUM)
#undef SPLASH_OP_ENUM
  SPLASH_OP_COUNT
} splash_op;

// Whether backend b has op (its slot is not NULL).
static inline int splash_backend_supports_op(const splash_backend* b, splash_op op) {
  const splash_backend_i* i = b->iface;
  switch (op) {
#define SPLASH_OP_CASE(op, slot, required) \
  case SPLASH_OP_##op:                     \
    return i->slot != NULL;
    SPLASH_BACKEND_OPS(SPLASH_OP_CASE)
#undef SPLASH_OP_CASE
    default:
      return 0;
  }
}

// The op's slot name ("matmul") and whether every backend must have it.
static inline const char* splash_op_name(splash_op op) {
  switch (op) {
#define SPLASH_OP_NAME(op, slot, required) \
  case SPLASH_OP_##op:                     \
    return #slot;
    SPLASH_BACKEND_OPS(SPLASH_OP_NAME)
#undef SPLASH_OP_NAME
    default:
      return "";
  }
}
static inline int splash_op_required(splash_op op) {
  switch (op) {
#define SPLASH_OP_REQUIRED(op, slot, required) \
  case SPLASH_OP_##op:                         \
    return required;
    SPLASH_BACKEND_OPS(SPLASH_OP_REQUIRED)
#undef SPLASH_OP_REQUIRED
    default:
      return 0;
  }
}

// CPU backend: `threads` <= 0 means hardware cores; `isa` NULL = best available ("scalar", "avx2", "avx512");
// `int8_activations`: 0 = q4/q8 matmuls use fp32 activations; 1 = activations quantised to int8 per
// 64-group (fastest); 2 = int8x2, a second int8 level for the residual (near-fp32 accuracy, integer speed).
// Returns NULL when the ISA is not supported by this CPU.
splash_backend* splash_backend_cpu_create(int threads, const char* isa, int int8_activations);
void splash_backend_cpu_free(splash_backend* b);

// CUDA backend (a separate module, libsplash_cuda.so, exporting these two; see backend/loader.h):
// NULL when no usable device is present.
typedef splash_backend* (*splash_backend_cuda_create_fn)(int device);
typedef void (*splash_backend_cuda_free_fn)(splash_backend* b);

#ifdef __cplusplus
}
#endif
