// Linear layers on the GPU: the `matmul` slot launches the kernel kernel_choice.h chooses for the shape. Decode
// (≤ 8 tokens; q4/q8 up to 32): memory-bound GEMVs; q4/q8 weights meet activations quantised to two int8 levels per
// 32 values (level 2 holds the residual at 1/256 of the step, so the product is within ~1e-5 of fp32); bf16/f32 and
// the EXACT matrices use fp32 activations. Prefill (more tokens): cuda_gemm.cu, cuda_qgemm.cu.
//
// Grouping: a matmul whose choice `groups` does not launch at once. It waits in the context's pending group (Ctx::pend,
// at most Ctx::kMaxGroup weights) and the next matmul on the same activations, of the same kernel and columns, joins
// it (q/k/v, gate/up); a few-row fp32 GEMV on the activations of pending q4/q8 GEMVs rides in their launch when the
// streaming GEMV takes it (Ctx::pend_rows). Anything else — another matmul, any other slot (the Flushed wrapper in
// cuda_backend.cu), an output that overlaps what waits — launches the group first (`flush`).
#include <algorithm>

#include "backend/cuda/gemv_f_row.cuh"
#include "backend/cuda/kernel_choice.h"

namespace splash::cuda {
namespace {

constexpr int kG = kGemvGroup;

// ---- activation quantisation (quant_group, cuda_common.cuh): one thread per value, total % 32 == 0
template <bool Q4>
__global__ void k_quant_x(const float* x, int64_t total, int8_t* xq, float* xs) {
  pdl_trigger();
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= total) return;  // whole warps: total is a multiple of 32
  quant_group(x[i], i, Q4 ? xq : nullptr, Q4 ? nullptr : xq, xs, total);
}

// The int8x2 GEMV (gemv_q.cuh) with the columns read at run time. Specialised forms with the columns fixed
// come from the package's kernel image (cuda_spec.cu).
template <int BITS, int NT, int ROWS, int UNROLL = 2>
__global__ void __launch_bounds__(128) k_gemv_q(GemvGroup grp, const int8_t* xq, const float* xs, const float* xsum,
                                                int64_t lvl2, int32_t nt, const int32_t* eidx, int32_t xdiv) {
  gemv_q_body<BITS, NT, ROWS, UNROLL, 0>(grp, xq, xs, xsum, lvl2, nt, eidx, xdiv);
}

// fp32 activations, any dtype (cols % 8 == 0): warp per row, up to 8 tokens.
template <int NT>
__global__ void __launch_bounds__(128) k_gemv_f(splash_weight w, const float* x, int32_t nt, float* y, int64_t ys) {
  const int lane = threadIdx.x & 31;
  const int64_t r = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= w.rows) return;
  const int64_t C = w.cols;
  float acc[NT];
#pragma unroll
  for (int t = 0; t < NT; ++t) acc[t] = 0.f;
  for (int64_t c = int64_t(lane) * 8; c < C; c += 256) {
    float v[8];
    load8(w, r, c, v);
    dot8_tokens<NT>(acc, v, x, C, c, nt);
  }
#pragma unroll
  for (int t = 0; t < NT; ++t) {
    if (t >= nt) break;
    const float s = warp_sum(acc[t]);
    if (lane == 0) y[t * ys + r] = s;
  }
}

// Few rows (GDN b/a, routers, gates), with the GDN gates as an epilogue: gemv_f_row.cuh.
constexpr int kFRowThreads = 256, kFRowPre = 4;
template <int NT>
__global__ void __launch_bounds__(kFRowThreads) k_gemv_f_row(GemvGroup grp, const float* x, int32_t nt, RowGates gates) {
  pdl_trigger();
  gemv_f_row_block<NT, kFRowThreads, kFRowPre>(grp, int32_t(blockIdx.x), x, nt, gates);
}

// Any shape (f32/bf16 with cols % 8 != 0): thread per output.
__global__ void k_gemv_scalar(splash_weight w, const float* x, int32_t nt, float* y, int64_t ys) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i >= w.rows * nt) return;
  const int64_t t = i / w.rows, r = i % w.rows, C = w.cols;
  float s = 0.f;
  for (int64_t c = 0; c < C; ++c) {
    const float wv = w.dtype == SPLASH_F32 ? static_cast<const float*>(w.data)[r * C + c]
                                           : bf16f(static_cast<const uint16_t*>(w.data)[r * C + c]);
    s += wv * x[t * C + c];
  }
  y[t * ys + r] = s;
}

template <int NT>
void launch_gemv_f(Ctx* c, const splash_weight& w, const float* x, int32_t nt, float* y, int64_t ys) {
  k_gemv_f<NT><<<blocks_for(w.rows, 4), 128, 0, strm(c)>>>(w, x, nt, y, ys);
}

template <int BITS, int NT, int ROWS>
void launch_rows(Ctx* c, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2, int32_t nt,
                 const int32_t* eidx, int32_t pairs, int32_t xdiv) {
  grp.first[0] = 0;
  for (int g = 0; g < grp.n; ++g) grp.first[g + 1] = grp.first[g] + int32_t(blocks_for(grp.w[g].rows, 4 * ROWS));
  dim3 grid(unsigned(grp.first[grp.n]), unsigned(eidx ? pairs : 1));
  // the package's specialised kernel for these columns, when its image is loaded (every weight of a group
  // has the same columns: matmul() joins only those); built for the default rows per warp and unroll
  if (ROWS == kSpecRows && !(NT == 1 && c->opt.gemv_unroll == 4))
    if (const void* k = spec_kernel(c, BITS, grp.w[0].cols, NT)) {
      void* args[] = {&grp, &xq, &xs, &xsum, &lvl2, &nt, &eidx, &xdiv};
      SPLASH_CK(c, cudaLaunchKernel(k, grid, dim3(128), args, 0, strm(c)));
      return;
    }
  // programmatic dependent launch: the GEMV's blocks start (and prefetch their weights) while the kernel that
  // produces the activations finishes
  if (NT == 1 && c->opt.gemv_unroll == 4)  // deeper unroll (more loads in flight), single token only: measured variant
    launch_pdl(c, k_gemv_q<BITS, NT, ROWS, 4>, grid, dim3(128), 0, grp, xq, xs, xsum, lvl2, nt, eidx, xdiv);
  else
    launch_pdl(c, k_gemv_q<BITS, NT, ROWS>, grid, dim3(128), 0, grp, xq, xs, xsum, lvl2, nt, eidx, xdiv);
}

template <int BITS, int NT>
void launch_gemv_q(Ctx* c, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int64_t lvl2, int32_t nt,
                   const int32_t* eidx = nullptr, int32_t pairs = 0, int32_t xdiv = 1) {
  switch (c->opt.gemv_rows) {  // rows per warp (CudaOptions::gemv_rows, for measurement); default 4
    case 1: launch_rows<BITS, NT, 1>(c, grp, xq, xs, xsum, lvl2, nt, eidx, pairs, xdiv); break;
    case 2: launch_rows<BITS, NT, 2>(c, grp, xq, xs, xsum, lvl2, nt, eidx, pairs, xdiv); break;
    default: launch_rows<BITS, NT, 4>(c, grp, xq, xs, xsum, lvl2, nt, eidx, pairs, xdiv);
  }
}

GemvGroup single(const splash_weight& w, float* y, int64_t ys) {
  GemvGroup g{};
  g.w[0] = w, g.y[0] = y, g.ys[0] = ys, g.n = 1;
  return g;
}

}  // namespace

// Activations [n, C] → two int8 levels (layout for the weight's bit width): the producer's planes when the
// last norm / SwiGLU wrote them for exactly these values, else quantised here into scratch.
bool quantize_x(Ctx* c, int bits, const float* x, int64_t C, int32_t n, int8_t*& xq, float*& xs, float*& xsum) {
  const int64_t total = int64_t(n) * C;
  if (c->xc_valid && c->xc_x == x && c->xc_total == total) {
    xq = static_cast<int8_t*>(c->scratch[bits == 4 ? kPq4 : kPq8]);
    xs = static_cast<float*>(c->scratch[kPs]);
    xsum = xs + total / 32;
    return true;
  }
  xq = static_cast<int8_t*>(scratch(c, kXq, size_t(total) * 2));
  xs = static_cast<float*>(scratch(c, kXs, size_t(total / 32) * 2 * 4));
  if (!xq || !xs) return false;
  xsum = xs + total / 32;
  if (bits == 4) k_quant_x<true><<<blocks_for(total, 256), 256, 0, strm(c)>>>(x, total, xq, xs);
  else k_quant_x<false><<<blocks_for(total, 256), 256, 0, strm(c)>>>(x, total, xq, xs);
  return SPLASH_LAUNCHED(c, "quant_x");
}

namespace {

MatmulChoice choice(const Ctx* c, const splash_weight& w, int32_t nt) {
  return choose_matmul(matmul_shape(w, nt), DeviceProps{c->sms, c->gemm_ex != nullptr}, c->opt);
}
int bits_of(MatmulKernel k) { return k == MatmulKernel::kGemvQ4 ? 4 : 8; }

// Whether every weight of the group may take the streaming GEMV (its loads: columns a multiple of 1024, 16-byte
// aligned data, scales and biases).
bool stream_fits(const GemvGroup& grp) {
  for (int g = 0; g < grp.n; ++g) {
    const splash_weight& w = grp.w[g];
    const uintptr_t a = reinterpret_cast<uintptr_t>(w.data) | reinterpret_cast<uintptr_t>(w.scales) |
                        reinterpret_cast<uintptr_t>(w.biases);
    if (w.cols % 1024 != 0 || (a & 15) != 0) return false;
  }
  return true;
}

template <int BITS>
void launch_q(Ctx* c, GemvGroup& grp, const int8_t* xq, const float* xs, const float* xsum, int32_t nt, GemvGroup* rows,
              const float* xf) {
  const int64_t C = grp.w[0].cols, lvl2 = int64_t(nt) * C;  // level 2 sits lvl2 after level 1 for every token
  for (int32_t t0 = 0; t0 < nt; t0 += kMaxGemvTokens) {
    const int32_t n = std::min(kMaxGemvTokens, nt - t0);
    GemvGroup part = grp;
    for (int g = 0; g < grp.n; ++g) part.y[g] = grp.y[g] + int64_t(t0) * grp.ys[g];
    const int8_t* q = xq + int64_t(t0) * C;
    const float *s = xs + int64_t(t0) * (C / 32), *sum = xsum + int64_t(t0) * (C / 32);
    const GemvForm form = choose_gemv_form(n, stream_fits(part), c->opt);
    if (form == GemvForm::kMma) {
      gemv_q_mma(c, BITS, part, q, s, sum, lvl2, n);
      continue;
    }
    if (form == GemvForm::kStream) {
      gemv_q_stream(c, BITS, part, q, s, sum, lvl2, n, nt == n ? rows : nullptr, xf);
      continue;
    }
    switch (n) {
      case 1: launch_gemv_q<BITS, 1>(c, part, q, s, sum, lvl2, n); break;
      case 2: launch_gemv_q<BITS, 2>(c, part, q, s, sum, lvl2, n); break;
      case 3: case 4: launch_gemv_q<BITS, 4>(c, part, q, s, sum, lvl2, n); break;
      default: launch_gemv_q<BITS, 8>(c, part, q, s, sum, lvl2, n);
    }
  }
}

// One launch for a group of weights of one kind on activations x [nt, cols]; `rows` (q4/q8 kinds only, may be null):
// few-row GEMVs on the same activations that ride in that launch when the streaming GEMV takes it, else go out
// after it as their own.
void gemv_group(Ctx* c, MatmulKernel kind, GemvGroup& grp, const float* x, int32_t nt, GemvGroup* rows = nullptr) {
  if (kind == MatmulKernel::kQgemm) {
    qgemm(c, grp, x, nt);
    return;
  }
  if (kind == MatmulKernel::kGemvQ4 || kind == MatmulKernel::kGemvQ8) {
    int8_t* xq;
    float *xs, *xsum;
    if (quantize_x(c, bits_of(kind), x, grp.w[0].cols, nt, xq, xs, xsum)) {
      if (kind == MatmulKernel::kGemvQ4) launch_q<4>(c, grp, xq, xs, xsum, nt, rows, x);
      else launch_q<8>(c, grp, xq, xs, xsum, nt, rows, x);
      SPLASH_LAUNCHED(c, "gemv_q");
    }
    if (rows && rows->n > 0) gemv_group(c, MatmulKernel::kGemvRowF, *rows, x, nt);
    return;
  }
  grp.first[0] = 0;
  for (int g = 0; g < grp.n; ++g) grp.first[g + 1] = grp.first[g] + int32_t(grp.w[g].rows);
  const unsigned blocks = unsigned(grp.first[grp.n]);
  const RowGates gates = c->row_gates;
  c->row_gates = RowGates{};
  for (int rep = c->opt.probe_f_row == 2 ? 2 : c->opt.probe_f_row == 1 ? 0 : 1; rep > 0; --rep) switch (nt) {
      case 1: launch_dep(c, c->opt.pdl_small, k_gemv_f_row<1>, dim3(blocks), dim3(kFRowThreads), 0, grp, x, nt, gates); break;
      case 2: launch_dep(c, c->opt.pdl_small, k_gemv_f_row<2>, dim3(blocks), dim3(kFRowThreads), 0, grp, x, nt, gates); break;
      case 3: case 4: launch_dep(c, c->opt.pdl_small, k_gemv_f_row<4>, dim3(blocks), dim3(kFRowThreads), 0, grp, x, nt, gates); break;
      default: launch_dep(c, c->opt.pdl_small, k_gemv_f_row<8>, dim3(blocks), dim3(kFRowThreads), 0, grp, x, nt, gates);
    }
  SPLASH_LAUNCHED(c, "gemv_f_row");
}

// The other GEMVs (fp32 activations on many rows, odd shapes), one weight at a time.
void gemv(Ctx* c, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  if (w->cols % 8 == 0) {
    switch (nt) {
      case 1: launch_gemv_f<1>(c, *w, x, nt, y, ys); break;
      case 2: launch_gemv_f<2>(c, *w, x, nt, y, ys); break;
      case 3: case 4: launch_gemv_f<4>(c, *w, x, nt, y, ys); break;
      default: launch_gemv_f<8>(c, *w, x, nt, y, ys);
    }
  } else {
    k_gemv_scalar<<<blocks_for(w->rows * nt, 128), 128, 0, strm(c)>>>(*w, x, nt, y, ys);
  }
  SPLASH_LAUNCHED(c, "gemv_f");
}

}  // namespace

bool matmul_experts(Ctx* c, int n, const splash_weight* const* base, const float* x, int32_t nx, const int32_t* eidx,
                    int32_t pairs, int32_t xdiv, float* const* y, int64_t ys) {
  for (int g = 0; g < n; ++g) {
    const bool quant = base[g]->dtype == SPLASH_Q4 || base[g]->dtype == SPLASH_Q8;
    if (!quant || base[g]->cols % 64 != 0 || c->opt.precise || base[g]->dtype != base[0]->dtype ||
        base[g]->cols != base[0]->cols)
      return false;
  }
  int8_t* xq;
  float *xs, *xsum;
  const int bits = base[0]->dtype == SPLASH_Q4 ? 4 : 8;
  if (!quantize_x(c, bits, x, base[0]->cols, nx, xq, xs, xsum)) return true;
  GemvGroup grp{};
  grp.n = n;
  for (int g = 0; g < n; ++g) grp.w[g] = *base[g], grp.y[g] = y[g], grp.ys[g] = ys;
  const int64_t lvl2 = int64_t(nx) * base[0]->cols;
  if (bits == 4) launch_gemv_q<4, 1>(c, grp, xq, xs, xsum, lvl2, 1, eidx, pairs, xdiv);
  else launch_gemv_q<8, 1>(c, grp, xq, xs, xsum, lvl2, 1, eidx, pairs, xdiv);
  SPLASH_LAUNCHED(c, "gemv_experts");
  return true;
}

namespace {
// [p, p + n) and [q, q + m) in bytes
bool overlap(const void* p, size_t n, const void* q, size_t m) {
  const auto a = reinterpret_cast<uintptr_t>(p), b = reinterpret_cast<uintptr_t>(q);
  return a < b + m && b < a + n;
}
size_t out_bytes(int32_t nt, int64_t rows, int64_t ys) { return (size_t(nt - 1) * size_t(ys) + size_t(rows)) * 4; }
}  // namespace

void flush(Ctx* c) {
  gdn_flush(c);  // a waiting recurrence first (matmuls never wait behind it: a matmul's call flushes it)
  if (c->pend_n == 0) return;
  auto group = [](const Ctx::Pending* p, int n) {
    GemvGroup grp{};
    grp.n = n;
    for (int g = 0; g < n; ++g) grp.w[g] = p[g].w, grp.y[g] = p[g].y, grp.ys[g] = p[g].ys;
    return grp;
  };
  GemvGroup grp = group(c->pend, c->pend_n), rows = group(c->pend_rows, c->pend_rows_n);
  c->pend_n = c->pend_rows_n = 0;
  c->pend_thread = std::thread::id();
  gemv_group(c, MatmulKernel(c->pend_kind), grp, c->pend_x, c->pend_nt, rows.n > 0 ? &rows : nullptr);
}

// A few-row GEMV on the activations of pending q4/q8 GEMVs waits to ride in their launch (cuda_gemv_stream.cu) when
// the streaming GEMV may take it (CudaOptions::gemv_stream tokens) and its output overlaps nothing pending.
bool rides(const Ctx* c, const splash_weight* w, const float* x, int32_t nt, const float* y, size_t yb) {
  const auto pend = MatmulKernel(c->pend_kind);
  if (c->opt.probe_f_row != 0 || c->pend_n == 0 || (pend != MatmulKernel::kGemvQ4 && pend != MatmulKernel::kGemvQ8) ||
      x != c->pend_x || nt != c->pend_nt || nt > c->opt.gemv_stream || c->pend_rows_n >= kG || w->cols != c->pend[0].w.cols)
    return false;
  if (overlap(y, yb, x, size_t(nt) * size_t(c->pend[0].w.cols) * 4)) return false;
  for (int g = 0; g < c->pend_n; ++g)
    if (overlap(y, yb, c->pend[g].y, out_bytes(nt, c->pend[g].w.rows, c->pend[g].ys))) return false;
  for (int g = 0; g < c->pend_rows_n; ++g)
    if (overlap(y, yb, c->pend_rows[g].y, out_bytes(nt, c->pend_rows[g].w.rows, c->pend_rows[g].ys))) return false;
  return true;
}

bool gates_with_pending(Ctx* c, float* b, float* a, const float* A_log, const float* dt_bias, int32_t n, int32_t nv) {
  if (!c->opt.fuse_gates || c->pend_nt != n) return false;
  const Ctx::Pending* p = c->pend_rows_n > 0 ? c->pend_rows : c->pend;
  const bool rowf = MatmulKernel(c->pend_kind) == MatmulKernel::kGemvRowF;
  if ((c->pend_rows_n > 0 ? c->pend_rows_n : rowf ? c->pend_n : 0) != 2) return false;
  const Ctx::Pending &pb = p[0], &pa = p[1];
  if (pb.y != b || pa.y != a || pb.w.rows != nv || pa.w.rows != nv || pb.ys != nv || pa.ys != nv) return false;
  c->row_gates = RowGates{A_log, dt_bias};
  flush(c);
  return true;
}

void matmul(void* ctx, const splash_weight* w, const float* x, int32_t nt, float* y, int64_t ys) {
  Ctx* c = static_cast<Ctx*>(ctx);
  if (nt <= 0 || w->rows <= 0) return;
  const MatmulChoice ch = choice(c, *w, nt);
  const int kind = int(ch.kernel);
  const size_t xb = size_t(nt) * size_t(w->cols) * 4, yb = out_bytes(nt, w->rows, ys);
  bool joins = false;
  if (ch.groups) {
    // wait for the next matmul: on the same activations it joins this launch (q/k/v, gate/up, GDN b/a)
    joins = c->pend_n > 0 && c->pend_n < kG && kind == c->pend_kind && x == c->pend_x && nt == c->pend_nt &&
            w->cols == c->pend[0].w.cols && !overlap(y, yb, x, xb);
    for (int g = 0; joins && g < c->pend_n; ++g)
      joins = !overlap(y, yb, c->pend[g].y, out_bytes(nt, c->pend[g].w.rows, c->pend[g].ys));
    for (int g = 0; joins && g < c->pend_rows_n; ++g)
      joins = !overlap(y, yb, c->pend_rows[g].y, out_bytes(nt, c->pend_rows[g].w.rows, c->pend_rows[g].ys));
  }
  if (!joins && ch.groups && ch.kernel == MatmulKernel::kGemvRowF && rides(c, w, x, nt, y, yb)) {
    if (c->xc_valid && overlap(y, yb, c->xc_x, size_t(c->xc_total) * 4)) c->xc_valid = false;  // written over
    c->pend_rows[c->pend_rows_n++] = {*w, y, ys};
    return;
  }
  if (!joins) flush(c);
  if (c->xc_valid && overlap(y, yb, c->xc_x, size_t(c->xc_total) * 4)) c->xc_valid = false;  // written over
  if (ch.groups) {
    if (overlap(y, yb, x, xb)) {  // in place: nothing may wait
      GemvGroup grp = single(*w, y, ys);
      gemv_group(c, ch.kernel, grp, x, nt);
      return;
    }
    if (c->pend_n == 0) c->pend_kind = kind, c->pend_x = x, c->pend_nt = nt, c->pend_thread = std::this_thread::get_id();
    c->pend[c->pend_n++] = {*w, y, ys};
    return;
  }
  switch (ch.kernel) {
    case MatmulKernel::kGemmBf16: gemm(c, w, x, nt, y, ys); return;
    case MatmulKernel::kSgemm: sgemm(c, w, x, nt, y, ys); return;
    default: break;
  }
  // launches of ch.launch_tokens tokens
  for (int32_t t0 = 0; t0 < nt; t0 += ch.launch_tokens) {
    const int32_t n = std::min(ch.launch_tokens, nt - t0);
    const float* xi = x + int64_t(t0) * w->cols;
    float* yi = y + int64_t(t0) * ys;
    if (ch.kernel == MatmulKernel::kGemvRowF) {
      GemvGroup grp = single(*w, yi, ys);
      gemv_group(c, ch.kernel, grp, xi, n);
    } else {
      gemv(c, w, xi, n, yi, ys);
    }
  }
}

QuantOut quant_out(Ctx* c, int64_t total) {
  // decode-sized outputs only (≤ 8 tokens of up to 32768 features): prefill multiplies in bf16 instead
  constexpr int64_t kProduceMax = int64_t(kMaxGemvTokens) * 32768;
  QuantOut q;
  if (c->opt.precise || total <= 0 || total % 64 != 0 || total > kProduceMax) return q;
  q.q4 = static_cast<int8_t*>(scratch(c, kPq4, size_t(total) * 2));
  q.q8 = static_cast<int8_t*>(scratch(c, kPq8, size_t(total) * 2));
  q.xs = static_cast<float*>(scratch(c, kPs, size_t(total / 32) * 2 * 4));
  if (!q.q4 || !q.q8 || !q.xs) return QuantOut{};
  q.total = total;
  return q;
}

void produced(Ctx* c, const float* y, int64_t total) {
  c->xc_x = y;
  c->xc_total = total;
  c->xc_valid = true;
}

}  // namespace splash::cuda
