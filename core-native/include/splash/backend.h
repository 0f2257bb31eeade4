// The one backend interface of Splash: a versioned table of kernel function pointers plus buffer
// allocation and synchronisation, behind a C ABI (ggml-backend style). CPU fills it today; CUDA and
// Metal will fill the same table. Optional slots are NULL when a backend lacks them; the model graph
// falls back or refuses (see `splash_backend_supports`). Extras go through `get_proc_address`
// instead of growing the table.
//
// Conventions: activations are row-major fp32 on CPU ([tokens, features]); weights are read in place
// from the package mapping (`splash_weight`). A backend context pointer `ctx` comes first in every slot.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SPLASH_BACKEND_ABI 1

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
} splash_attn_args;

typedef struct splash_backend_i {
  uint32_t abi_version;  // SPLASH_BACKEND_ABI
  const char* name;      // "cpu", "cuda", "metal"
  const char* variant;   // e.g. "avx2", "avx512", "scalar", "sm_90"

  // ---- buffers and synchronisation
  void* (*buffer_alloc)(void* ctx, size_t bytes);  // zeroed, 64-byte aligned
  void (*buffer_free)(void* ctx, void* ptr);
  void (*synchronize)(void* ctx);                  // wait for queued work (CPU: no-op)

  // ---- linear algebra
  // y[t, r] = Σ_c W[r, c] · x[t, c] for t < n_tokens; x row stride = w->cols, y row stride = y_stride.
  void (*matmul)(void* ctx, const splash_weight* w, const float* x, int32_t n_tokens, float* y, int64_t y_stride);
  // out[c] = dequantised row `row` of w (embedding lookup).
  void (*dequant_row)(void* ctx, const splash_weight* w, int64_t row, float* out);

  // ---- elementwise / normalisation
  // y = x · rsqrt(mean(x²) + eps) · w, over `dim`, for n rows (x may equal y).
  void (*rmsnorm)(void* ctx, const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y);
  // y = rmsnorm(x)·w·silu(z), per row of `dim` (GDN output norm).
  void (*gated_rmsnorm)(void* ctx, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps,
                        float* y);
  // Partial half-split rotary on `n_heads` heads of `head_dim` at stride `head_stride` for one token;
  // positions pos[3] = (T,H,W); `section` = mrope_section or NULL (1-D RoPE).
  void (*rope)(void* ctx, float* x, int32_t n_heads, int64_t head_stride, int32_t head_dim, int32_t rot_dim,
               const int32_t pos[3], const int32_t* section, float theta);
  void (*swiglu)(void* ctx, const float* gate, const float* up, int64_t n, float* out);  // silu(g)·u

  // ---- sequence mixers
  void (*attention)(void* ctx, const splash_attn_args* a);
  // Causal depthwise conv (kernel K) over T tokens with state = last K-1 inputs ([K-1, C]); SiLU applied.
  void (*conv1d_silu)(void* ctx, const float* x, int32_t n_tokens, int32_t channels, int32_t kernel,
                      const float* w /*[C,K]*/, float* state, float* y);
  void (*gdn_recurrent)(void* ctx, const splash_gdn_args* a);  // one step per token (decode)
  void (*gdn_chunked)(void* ctx, const splash_gdn_args* a);    // (optional) chunked form, chunk 64

  // ---- (optional) later: graph capture for decode, per-position GDN states for verification
  void (*graph_begin)(void* ctx);  // (optional) NULL on CPU
  void (*graph_end)(void* ctx);    // (optional) NULL on CPU

  void* (*get_proc_address)(void* ctx, const char* name);  // (optional) backend-specific extras
} splash_backend_i;

typedef struct splash_backend {
  const splash_backend_i* iface;
  void* ctx;
} splash_backend;

// CPU backend: `threads` <= 0 means hardware cores; `isa` NULL = best available ("scalar", "avx2", "avx512");
// `int8_activations`: 0 = q4/q8 matmuls use fp32 activations; 1 = activations quantised to int8 per
// 64-group (fastest); 2 = int8x2, a second int8 level for the residual (near-fp32 accuracy, integer speed).
// Returns NULL when the ISA is not supported by this CPU.
splash_backend* splash_backend_cpu_create(int threads, const char* isa, int int8_activations);
void splash_backend_cpu_free(splash_backend* b);

#ifdef __cplusplus
}
#endif
