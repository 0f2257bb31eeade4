// The CPU backend: fills splash_backend_i. Matmuls go to the ISA row kernels over the thread pool;
// the other ops are plain C++ (the readable reference every other backend is tested against).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "backend/cpu/cpu_graph.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_vision.h"
#include "backend/cpu/isa.h"
#include "runtime/thread_pool.h"

namespace splash::cpu {

namespace {
// Round to nearest, ties to even (nearbyint in the default rounding mode) for |v| < 2^22, without a libm
// call: adding 1.5·2^23 leaves no fraction bits (strict IEEE arithmetic, no -ffast-math here).
inline int round_even(float v) {
  const float magic = 12582912.f;
  return int((v + magic) - magic);
}
}  // namespace

namespace {

// One int8 level of a group of 64: round(value(j)·inv), saturated to ±127, into q and stored as its two halves at
// dst + d0 and dst + d1; returns Σq. Inlined into prepare_token's clones, with the same fp-contract=off.
template <class Value>
__attribute__((always_inline, optimize("fp-contract=off"))) inline int32_t put_level(Value value, float inv, int8_t* q,
                                                                                      int8_t* dst, int64_t d0, int64_t d1) {
  int32_t qs = 0;
  for (int j = 0; j < 64; ++j) {
    const int v = std::min(127, std::max(-127, round_even(value(j) * inv)));
    q[j] = int8_t(v);
    qs += v;
  }
  std::memcpy(dst + d0, q, 32);
  std::memcpy(dst + d1, q + 32, 32);
  return qs;
}

// One token of prepare_act: the q4 pair layout of x (fp32 path), Σx per group, and the int8 level(s) with their
// scales and sums. Tokens are independent, so a multi-token call may split them across threads.
// fp-contract=off: the clones have FMA, and a fused `x − sc·q` rounds differently, which would move the int8
// levels (and so every output) against the portable build.
SPLASH_CLONES __attribute__((optimize("fp-contract=off"))) void prepare_token(const splash_weight* w, const float* x, int64_t t, int levels, ActBuf& buf) {
  const int64_t C = w->cols, G = C / 64;
  const bool q4 = w->dtype == SPLASH_Q4;
  const float* xt = x + t * C;
  if (q4)
    for (int64_t g = 0; g < G; ++g) {
      const float* s = xt + g * 64;
      float* d = buf.xf.data() + t * C + g * 64;
      for (int j = 0; j < 32; ++j) {
        d[j] = s[2 * j];
        d[32 + j] = s[2 * j + 1];
      }
    }
  for (int64_t g = 0; g < G; ++g) {
    const float* s = xt + g * 64;
    float sum = 0.f;
    for (int j = 0; j < 64; ++j) sum += s[j];
    buf.xsum[t * G + g] = sum;
  }
  if (levels <= 0) return;
  const bool two = levels >= 2;
  const float* xl = q4 ? buf.xf.data() + t * C : xt;  // the layout the kernels read
  int8_t q[64];
  for (int64_t g = 0; g < G; ++g) {
    const float* s = xl + g * 64;
    // destination halves: q4 pairs groups (isa.h), q8 keeps the natural order
    const int64_t d0 = t * C + (q4 ? q4_even_at(g) : g * 64), d1 = t * C + (q4 ? q4_odd_at(g, G) : g * 64 + 32);
    float amax = 0.f;
    for (int j = 0; j < 64; ++j) amax = std::max(amax, std::fabs(s[j]));
    const float sc = amax / 127.f;
    const float inv = amax > 0.f ? 127.f / amax : 0.f;
    buf.xs[t * G + g] = sc;
    buf.xqsum[t * G + g] = put_level([&](int j) { return s[j]; }, inv, q, buf.xq.data(), d0, d1);
    if (two) {
      // residual level: |x − sc·q| ≤ sc/2, quantised with step sc/256 (a power of two, so the kernels can
      // fold both levels into one integer sum: 256·Σq·xq + Σq·xq2, times scale·sc2)
      int8_t q2[64];
      const float sc2 = sc / 256.f;
      const float inv2 = sc2 > 0.f ? 1.f / sc2 : 0.f;
      buf.xs2[t * G + g] = sc2;
      buf.xqsum2[t * G + g] = put_level([&](int j) { return s[j] - sc * float(q[j]); }, inv2, q2, buf.xq2.data(), d0, d1);
    }
  }
}

}  // namespace

void prepare_act(const splash_weight* w, const float* x, int32_t nt, int levels, ActBuf& buf, Act& a, ThreadPool* pool) {
  const int64_t C = w->cols;
  a.cols = C;
  a.nt = nt;
  a.xf = x;
  a.i8 = false;
  a.xq2 = nullptr;
  a.xs2 = nullptr;
  a.xqsum2 = nullptr;
  if (w->dtype != SPLASH_Q4 && w->dtype != SPLASH_Q8) return;
  const int64_t G = C / 64;
  const bool two = levels >= 2;
  if (w->dtype == SPLASH_Q4) buf.xf.resize(size_t(nt) * C);
  buf.xsum.resize(size_t(nt) * G);
  if (levels > 0) {
    buf.xq.resize(size_t(nt) * C);
    buf.xs.resize(size_t(nt) * G);
    buf.xqsum.resize(size_t(nt) * G);
    if (two) {
      buf.xq2.resize(size_t(nt) * C);
      buf.xs2.resize(size_t(nt) * G);
      buf.xqsum2.resize(size_t(nt) * G);
    }
  }
  // many tokens (prefill, verify): split across the pool; the work is per token, so results do not change
  if (pool && int64_t(nt) * C >= (int64_t(1) << 15))
    pool->parallel_for(nt, [&](int64_t t0, int64_t t1, int) {
      for (int64_t t = t0; t < t1; ++t) prepare_token(w, x, t, levels, buf);
    });
  else
    for (int64_t t = 0; t < nt; ++t) prepare_token(w, x, t, levels, buf);
  if (w->dtype == SPLASH_Q4) a.xf = buf.xf.data();
  a.xsum = buf.xsum.data();
  if (levels <= 0) return;
  a.i8 = true;
  a.xq = buf.xq.data();
  a.xs = buf.xs.data();
  a.xqsum = buf.xqsum.data();
  if (two) {
    a.xq2 = buf.xq2.data();
    a.xs2 = buf.xs2.data();
    a.xqsum2 = buf.xqsum2.data();
  }
}

#if defined(__aarch64__)
static bool cpu_has_dotprod() {
#if defined(__APPLE__)
  return true;  // every Apple silicon core has FEAT_DotProd
#elif defined(__linux__)
  return (getauxval(AT_HWCAP) & (1UL << 20)) != 0;  // HWCAP_ASIMDDP
#else
  return false;
#endif
}
#endif

std::vector<const IsaKernels*> isa_available() {
  std::vector<const IsaKernels*> out{isa_scalar()};
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) out.push_back(isa_avx2());
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    out.push_back(isa_avx512());
#endif
#if defined(__aarch64__)
  if (cpu_has_dotprod()) out.push_back(isa_neon_dotprod());
#endif
  return out;
}

const IsaKernels* isa_select(const char* name) {
  auto avail = isa_available();
  if (name == nullptr || !*name) return avail.back();
  for (auto* k : avail)
    if (std::strcmp(k->name, name) == 0) return k;
  return nullptr;
}

namespace {

struct Ctx {
  std::unique_ptr<ThreadPool> pool;
  const IsaKernels* isa;
  int levels;  // activation levels for q4/q8: 0 fp32, 1 int8, 2 int8x2
  ActBuf buf;
};

void* buffer_alloc(void*, size_t bytes) {
  size_t n = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, n == 0 ? 64 : n);
  if (p) std::memset(p, 0, n);
  return p;
}
void buffer_free(void*, void* p) { std::free(p); }
void synchronize(void*) {}

void matmul(void* vctx, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  Ctx* c = static_cast<Ctx*>(vctx);
  Act a;
  const int levels = (w->flags & SPLASH_WEIGHT_EXACT) ? 0 : (w->flags & SPLASH_WEIGHT_FAST) && c->levels > 1 ? 1 : c->levels;
  prepare_act(w, x, nt, levels, c->buf, a, c->pool.get());
  const IsaKernels* isa = c->isa;
  // Small matrices are not worth a pool dispatch: below ~1M multiply-adds (~25 µs on one core) waking and joining
  // the workers costs as much as it saves (default package decode, 2 threads: 2.0 → 1.6 ms of CPU per step; every
  // (row, token) is computed the same way on any thread, so results do not change).
  if (w->rows * w->cols * int64_t(nt) < (int64_t(1) << 20)) {
    isa->rows(w, a, 0, w->rows, y, ys);
    return;
  }
  c->pool->parallel_for(w->rows, [&](int64_t r0, int64_t r1, int) { isa->rows(w, a, r0, r1, y, ys); }, 8);
}

void attention(void* vctx, const splash_attn_args* a) {
  Ctx* c = static_cast<Ctx*>(vctx);
  // tasks: KV head × block of query tokens
  const int32_t blocks = (a->n_tokens + kAttnQueryBlock - 1) / kAttnQueryBlock;
  const int64_t tasks = int64_t(blocks) * a->n_kv_heads;
  auto task = [&](int64_t i) {
    const int32_t b = int32_t(i / a->n_kv_heads), kvh = int32_t(i % a->n_kv_heads);
    attention_tile(a, kvh, b * kAttnQueryBlock, std::min(a->n_tokens, (b + 1) * kAttnQueryBlock));
  };
  if (tasks == 1 || a->start + a->n_tokens < 64) {
    for (int64_t i = 0; i < tasks; ++i) task(i);
    return;
  }
  c->pool->parallel_tasks(tasks, task);
}

void gdn(void* vctx, const splash_gdn_args* a, bool chunked) {
  Ctx* c = static_cast<Ctx*>(vctx);
  auto head = [&](int64_t h) {
    if (chunked) gdn_chunked_head(a, int32_t(h));
    else gdn_recurrent_head(a, int32_t(h));
  };
  if (int64_t(a->dk) * a->dv * a->n_tokens < 16384) {
    for (int32_t h = 0; h < a->nv; ++h) head(h);
    return;
  }
  c->pool->parallel_tasks(a->nv, head);
}
void gdn_recurrent(void* ctx, const splash_gdn_args* a) { gdn(ctx, a, false); }
void gdn_chunked(void* ctx, const splash_gdn_args* a) { gdn(ctx, a, true); }

void dequant_row(void*, const splash_weight* w, int64_t r, float* out) { dequant_row_ref(w, r, out); }
void rmsnorm(void*, const float* x, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  rmsnorm_ref(x, w, n, dim, eps, y);
}
void gated_rmsnorm(void*, const float* x, const float* z, const float* w, int32_t n, int32_t dim, float eps, float* y) {
  gated_rmsnorm_ref(x, z, w, n, dim, eps, y);
}
void rope(void*, float* x, int32_t nh, int64_t hs, int32_t hd, int32_t rd, const int32_t pos[3], const int32_t* sec,
          float theta) {
  rope_ref(x, nh, hs, hd, rd, pos, sec, theta);
}
void swiglu(void*, const float* g, const float* u, int64_t n, float* out) { swiglu_ref(g, u, n, out); }
void conv1d_silu(void*, const float* x, int32_t nt, int32_t C, int32_t K, const float* w, float* state, float* y) {
  conv1d_silu_ref(x, nt, C, K, w, state, y);
}

void moe(void* ctx, const splash_moe_args* a) { moe_grouped(ctx, a, matmul, swiglu); }
void seg_attention(void* ctx, const splash_seg_attn_args* a) { seg_attention_on(*static_cast<Ctx*>(ctx)->pool, a); }

const splash_backend_i kIface = {
    /* .abi_version         = */ SPLASH_BACKEND_ABI,
    /* .name                = */ "cpu",
    /* .variant             = */ nullptr,  // set per instance (ISA name) via a copy below
    /* .host_memory         = */ 1,
    /* .buffer_alloc        = */ buffer_alloc,
    /* .buffer_free         = */ buffer_free,
    /* .synchronize         = */ synchronize,
    /* .copy_to_device      = */ copy_to_device,
    /* .copy_to_host        = */ copy_to_host,
    /* .copy2d              = */ copy2d,
    /* .memset_zero         = */ memset_zero,
    /* .matmul              = */ matmul,
    /* .dequant_row         = */ dequant_row,
    /* .embed               = */ embed,
    /* .embed_dev           = */ nullptr,
    /* .rmsnorm             = */ rmsnorm,
    /* .add_rmsnorm         = */ nullptr,
    /* .gated_rmsnorm       = */ gated_rmsnorm,
    /* .layer_norm          = */ layer_norm,
    /* .add                 = */ add,
    /* .add_bias            = */ add_bias,
    /* .swiglu              = */ swiglu,
    /* .gelu                = */ gelu,
    /* .gated_add           = */ gated_add,
    /* .sigmoid_gate        = */ sigmoid_gate,
    /* .rope                = */ rope,
    /* .rope_seq            = */ rope_seq,
    /* .rope_seq_dev        = */ nullptr,
    /* .rope_table          = */ rope_table,
    /* .rows_at             = */ nullptr,
    /* .attention           = */ attention,
    /* .seg_attention       = */ seg_attention,
    /* .conv1d_silu         = */ conv1d_silu,
    /* .gdn_gates           = */ gdn_gates,
    /* .gdn_recurrent       = */ gdn_recurrent,
    /* .gdn_chunked         = */ gdn_chunked,
    /* .moe                 = */ moe,
    /* .argmax_rows         = */ argmax_rows,
    /* .sample_rows         = */ sample_rows,
    /* .graph_capture_begin = */ nullptr,
    /* .graph_capture_end   = */ nullptr,
    /* .graph_launch        = */ nullptr,
    /* .graph_free          = */ nullptr,
    /* .graph_epoch         = */ nullptr,
    /* .get_proc_address    = */ nullptr,
};

struct CpuBackend {
  splash_backend b;
  splash_backend_i iface;
  Ctx ctx;
};

}  // namespace
}  // namespace splash::cpu

extern "C" splash_backend* splash_backend_cpu_create(int threads, const char* isa, int int8_activations) {
  using namespace splash::cpu;
  const IsaKernels* k = isa_select(isa);
  if (!k) return nullptr;
  auto* cb = new CpuBackend();
  cb->iface = kIface;
  cb->iface.variant = k->name;
  cb->ctx.pool = std::make_unique<splash::ThreadPool>(threads);
  cb->ctx.isa = k;
  cb->ctx.levels = std::clamp(int8_activations, 0, 2);
  cb->b.iface = &cb->iface;
  cb->b.ctx = &cb->ctx;
  return &cb->b;
}

extern "C" void splash_backend_cpu_free(splash_backend* b) {
  if (!b) return;
  delete reinterpret_cast<splash::cpu::CpuBackend*>(b);  // b is the first member
}
