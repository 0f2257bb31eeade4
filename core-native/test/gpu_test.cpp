// GPU parity and benchmarks (run on a machine with an NVIDIA GPU; scripts/gpu-test.sh builds and runs it):
//   splash_gpu_test ops                       every CUDA op against the CPU backend (fp32 activations)
//   splash_gpu_test model DIR...              whole-model logits, CUDA vs CPU, on packages (prefill, decode, verify)
//   splash_gpu_test bench-base                device-to-device copy bandwidth and bf16 GEMM rate
//   splash_gpu_test bench-gdn [T...]          the GDN op alone at the prefill shapes: recurrent vs chunked
//   splash_gpu_test bench-attn                the attention op alone at the prefill shapes: tensor cores vs fp32
//   splash_gpu_test bench-moe [T...]          the MoE op alone at the 35B-A3B shape: grouped vs host-routed vs GEMVs
//   splash_gpu_test bench-qgemm [T...]        q4 matmuls of T tokens: the fused GEMM against the paths it replaces
//   splash_gpu_test bench DIR [prompt] [n]    prefill and decode on a package
//   splash_gpu_test spec DIR...               a package's specialised kernels against the generic ones (logits)
//   splash_gpu_test bench-spec DIR [prompt] [n]   bench with the specialised kernels, without, with again
//   splash_gpu_test bench-spec-gemv DIR       the decode GEMV at the 27B shapes, generic vs DIR's specialised kernels
//   splash_gpu_test bench-vision DIR cpu|cuda [size...]   vision encoder time for size×size images
//   splash_gpu_test bench-probe DIR prompt n SETTING...   decode steps under settings (gpu_bench_probe.cpp)
// (whole-model checks: gpu_test_model.cpp; benchmarks: gpu_bench.cpp and gpu_test_vision.cpp)
// Exit status 1 when a check fails. Tolerances are relative: max |cuda − cpu| / max |cpu| over each output.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "backend/loader.h"
#include "model/model.h"
#include "test/gpu_test_util.h"

using namespace splash;
using namespace splash::gputest;
namespace {

// One attention call of T tokens after `start` cached positions on both backends, random q and cache; the CUDA
// backend takes its tensor-core form wherever the shapes allow (SPLASH_ATTN_TC=1; tc false: never, =0). dev:
// `start` read from the device with room for `dev` more positions (the graph form: the grid is sized for the
// capacity).
void attention_case(Be& cpu, Be& g, int hd, int nh, int nkv, int start, int T, int dev = -1, bool tc = true) {
  const int len = start + T;
  auto q = randv(size_t(T) * nh * hd), kc = randv(size_t(len) * nkv * hd), vc = randv(size_t(len) * nkv * hd);
  std::vector<float> r(size_t(T) * nh * hd);
  splash_attn_args a{T, nh, nkv, hd, start, q.data(), int64_t(nh) * hd, kc.data(), vc.data(), r.data(), 1.f / std::sqrt(float(hd))};
  cpu.i->attention(cpu.c, &a);
  float *dq = g.up(q), *dk = g.up(kc), *dv = g.up(vc), *dout = static_cast<float*>(g.alloc(r.size() * 4));
  splash_attn_args ad = a;
  ad.q = dq, ad.k_cache = dk, ad.v_cache = dv, ad.out = dout;
  int32_t* dstart = nullptr;
  if (dev >= 0) {
    dstart = g.up(std::vector<int32_t>{start});
    ad.start_dev = dstart, ad.cap = len + dev;
  }
  {
    KeepOptions keep(*g.b);
    keep.o.attn_tc = tc ? 1 : 0;
    g.i->attention(g.c, &ad);
  }
  char what[112];
  std::snprintf(what, sizeof what, "attention hd=%d heads=%d/%d start=%d T=%d%s%s", hd, nh, nkv, start, T,
                dev >= 0 ? " (start on device)" : "", tc ? "" : " fp32");
  if (dstart) g.i->buffer_free(g.c, dstart);
  // the tensor cores (fp16 Q, K, P, V with fp32 accumulation): from 17 tokens, and verify blocks (2..16 tokens)
  // whose query heads × tokens fit 128 rows; fp32 otherwise, whose error grows with the context (~1e-5 at 32K)
  const bool tc_form = tc && dev < 0 && (hd == 64 || hd == 128 || hd == 256) &&
                       (T >= 17 || (T >= 2 && nh / nkv * T <= 128));
  report(what, r, g.down(dout, r.size()), tc_form ? 5e-3 : len > 16384 ? 3e-5 : 1e-5);
  for (float* p : {dq, dk, dv, dout}) g.i->buffer_free(g.c, p);
}

void test_ops(Be& cpu, Be& g) {
  const char* names[] = {"f32", "bf16", "q8", "q4"};
  // matmul: GEMV (int8x2 activations for q4/q8 up to 32 tokens, in launches of ≤ 8; others ≤ 8 tokens), GEMM
  // (bf16 tensor cores)
  for (int dt : {SPLASH_F32, SPLASH_BF16, SPLASH_Q8, SPLASH_Q4})
    for (int nt : {1, 2, 3, 8, 9, 20, 32, 77}) {
      // 200 rows: a partial 16-row tile; 1536 / 1088 columns: uneven rounds of 128 weight bytes per row (the
      // tensor-core GEMV), a partial round
      const int64_t R = nt == 3 ? 200 : 384, C = nt == 2 ? 1536 : nt == 8 ? 1088 : 1024;
      char what[96];
      std::snprintf(what, sizeof what, "matmul %s %lldx%lld tokens=%d", names[dt], (long long)R, (long long)C, nt);
      const bool quant = dt == SPLASH_Q4 || dt == SPLASH_Q8;
      const bool fused = dt == SPLASH_Q4 && C % 128 == 0 && qgemm_takes(nt);
      const bool tensor = (nt > (quant ? 32 : 8) && dt != SPLASH_F32) || fused;
      matmul_case(cpu, g, dt, R, C, nt, what, tensor ? 1e-2 : 1e-4,
                  [&](W& w, float* dx, float* dy, const std::vector<float>& got) {
                    if (!quant || nt <= 8 || nt > 32 || fused) return;
                    // each row is the one-token GEMV's result (a verify row equals a decode): the same integer dot
                    // products and scaling per chunk; the bits too where one kernel serves every token count
                    // (SPLASH_GEMV_MMA=0 or 1)
                    const int t = nt - 2;
                    g.i->matmul(g.c, &w.d, dx + int64_t(t) * C, 1, dy, R);
                    std::vector<float> one = g.down(dy, size_t(R));
                    std::vector<float> row(got.begin() + int64_t(t) * R, got.begin() + int64_t(t + 1) * R);
                    char line[96];
                    std::snprintf(line, sizeof line, "  row %d of %d = the one-token GEMV", t, nt);
                    const char* mma = std::getenv("SPLASH_GEMV_MMA");
                    report(line, one, row, mma && (std::atoi(mma) == 0 || std::atoi(mma) == 1) ? 0 : 2e-6);
                  });
    }
  // the fused q4 GEMM (bf16 tensor cores, weights dequantised in registers) at the token counts it takes:
  // one or several token tiles, partial tiles of rows (200) and tokens, the columns split over blocks or not (256:
  // 2 stages of 128), stages of 128 or 256 columns ($SPLASH_QGEMM_KS; 1536 columns take 256), against the CPU
  for (int nt : {1, 2, 5, 8, 9, 16, 17, 33, 64, 77, 130, 256})
    for (int64_t C : {256, 1024, 1536}) {
      if (!qgemm_takes(nt)) continue;
      const int64_t R = nt % 2 ? 200 : 384;
      char what[96];
      std::snprintf(what, sizeof what, "fused q4 GEMM %lldx%lld tokens=%d", (long long)R, (long long)C, nt);
      matmul_case(cpu, g, SPLASH_Q4, R, C, nt, what, 1e-2);
    }
  {  // EXACT weights stay on fp32 activations
    W w = make_weight(g, SPLASH_Q4, 48, 512);
    w.h.flags = w.d.flags = SPLASH_WEIGHT_EXACT;
    auto x = randv(20 * 512);
    std::vector<float> yr(20 * 48);
    cpu.i->matmul(cpu.c, &w.h, x.data(), 20, yr.data(), 48);
    float* dy = static_cast<float*>(g.alloc(yr.size() * 4));
    g.i->matmul(g.c, &w.d, g.up(x), 20, dy, 48);
    report("matmul q4 EXACT 48x512 tokens=20", yr, g.down(dy, yr.size()), 1e-5);
  }
  for (int nt : {1, 3, 20}) {  // matmuls on one activation block share a launch (q4 × 3, then the EXACT pair)
    const int64_t C = 1024;
    const int64_t rows[] = {384, 1000, 64, 48, 48};
    std::vector<W> ws;
    for (int k = 0; k < 5; ++k) {
      ws.push_back(make_weight(g, SPLASH_Q4, rows[k], C));
      if (k >= 3) ws.back().h.flags = ws.back().d.flags = SPLASH_WEIGHT_EXACT;
    }
    auto x = randv(size_t(nt) * C);
    float* dx = g.up(x);
    std::vector<float*> dy;
    for (int k = 0; k < 5; ++k) dy.push_back(static_cast<float*>(g.alloc(size_t(nt) * rows[k] * 4)));
    for (int k = 0; k < 5; ++k) g.i->matmul(g.c, &ws[k].d, dx, nt, dy[k], rows[k]);
    for (int k = 0; k < 5; ++k) {
      std::vector<float> yr(size_t(nt) * rows[k]);
      cpu.i->matmul(cpu.c, &ws[k].h, x.data(), nt, yr.data(), rows[k]);
      char what[96];
      std::snprintf(what, sizeof what, "grouped matmul %d of 5 (%lld rows%s) tokens=%d", k + 1, (long long)rows[k],
                    k >= 3 ? ", EXACT" : "", nt);
      report(what, yr, g.down(dy[k], yr.size()), k >= 3 ? 1e-5 : qgemm_takes(nt) ? 1e-2 : 1e-4);
    }
  }
  for (int nt : {1, 3}) {  // norms and SwiGLU write the int8x2 form the next matmuls read; other slots void it
    const int64_t C = 1024;
    W w4 = make_weight(g, SPLASH_Q4, 320, C), w8 = make_weight(g, SPLASH_Q8, 192, C);
    auto x = randv(size_t(nt) * C), y = randv(size_t(nt) * C), nw = randv(C, 0.5f, 1.5f), d = randv(size_t(nt) * C);
    float *dx = g.up(x), *dy = g.up(y), *dw = g.up(nw), *dd = g.up(d);
    float* dn = static_cast<float*>(g.alloc(size_t(nt) * C * 4));
    float* o4 = static_cast<float*>(g.alloc(size_t(nt) * 320 * 4));
    float* o8 = static_cast<float*>(g.alloc(size_t(nt) * 192 * 4));
    std::vector<float> n(size_t(nt) * C), r4(size_t(nt) * 320), r8(size_t(nt) * 192);
    auto check = [&](const char* what) {
      cpu.i->matmul(cpu.c, &w4.h, n.data(), nt, r4.data(), 320);
      cpu.i->matmul(cpu.c, &w8.h, n.data(), nt, r8.data(), 192);
      // after a q4 matmul on both sides (two int8x2 quantisations in a row) the error reaches ~1.4e-4
      // (with the fused q4 GEMM at this token count: bf16 operands, ~3e-3)
      const bool over = std::string(what).find("matmul over it") != std::string::npos, fused = qgemm_takes(nt);
      const double tol = over ? 3e-4 : 1e-4;
      report((std::string(what) + " → q4 matmul, tokens=" + std::to_string(nt)).c_str(), r4, g.down(o4, r4.size()),
             fused ? 1e-2 : tol);
      report((std::string(what) + " → q8 matmul, tokens=" + std::to_string(nt)).c_str(), r8, g.down(o8, r8.size()),
             fused && over ? 1e-2 : tol);
    };
    cpu.i->rmsnorm(cpu.c, x.data(), nw.data(), nt, int(C), 1e-6f, n.data());
    g.i->rmsnorm(g.c, dx, dw, nt, int(C), 1e-6f, dn);
    g.i->matmul(g.c, &w4.d, dn, nt, o4, 320);
    g.i->matmul(g.c, &w8.d, dn, nt, o8, 192);
    check("rmsnorm");
    cpu.i->add(cpu.c, n.data(), d.data(), nt * C);  // a slot writes the normed values: the int8 form is stale
    g.i->add(g.c, dn, dd, nt * C);
    g.i->matmul(g.c, &w4.d, dn, nt, o4, 320);
    g.i->matmul(g.c, &w8.d, dn, nt, o8, 192);
    check("rmsnorm, add");
    cpu.i->swiglu(cpu.c, x.data(), y.data(), nt * C, n.data());
    g.i->swiglu(g.c, dx, dy, nt * C, dn);
    g.i->matmul(g.c, &w8.d, dn, nt, o8, 192);
    g.i->matmul(g.c, &w4.d, dn, nt, o4, 320);
    check("swiglu");
    auto h = x;
    cpu.i->add(cpu.c, h.data(), y.data(), nt * C);
    cpu.i->rmsnorm(cpu.c, h.data(), nw.data(), nt, int(C), 1e-6f, n.data());
    g.i->add_rmsnorm(g.c, dx, dy, dw, nt, int(C), 1e-6f, dn);
    g.i->matmul(g.c, &w4.d, dn, nt, o4, 320);
    g.i->matmul(g.c, &w8.d, dn, nt, o8, 192);
    check("add_rmsnorm");
    W wc = make_weight(g, SPLASH_Q4, C, C);  // a matmul writes over the normed values: the int8 form is stale
    g.i->matmul(g.c, &wc.d, dy, nt, dn, C);
    cpu.i->matmul(cpu.c, &wc.h, y.data(), nt, n.data(), C);
    g.i->matmul(g.c, &w4.d, dn, nt, o4, 320);
    g.i->matmul(g.c, &w8.d, dn, nt, o8, 192);
    check("add_rmsnorm, a matmul over it");
  }
  // residual add + the next norm in one pass: few rows (the cluster form), many (a warp a row, the row in
  // registers up to 2048 columns, read again past that)
  for (auto [n, dim] : {std::pair{3, 256}, {3, 5120}, {37, 256}, {37, 2048}, {37, 5120}, {37, 250}}) {
    auto h = randv(size_t(n) * dim), y = randv(size_t(n) * dim), w = randv(dim, 0.5f, 1.5f);
    auto hr = h;
    std::vector<float> xr(size_t(n) * dim);
    cpu.i->add(cpu.c, hr.data(), y.data(), n * dim);
    cpu.i->rmsnorm(cpu.c, hr.data(), w.data(), n, dim, 1e-6f, xr.data());
    float *dh = g.up(h), *dx = static_cast<float*>(g.alloc(xr.size() * 4));
    g.i->add_rmsnorm(g.c, dh, g.up(y), g.up(w), n, dim, 1e-6f, dx);
    report(("add_rmsnorm dim=" + std::to_string(dim) + " (sum)").c_str(), hr, g.down(dh, hr.size()), 1e-6);
    report(("add_rmsnorm dim=" + std::to_string(dim) + " (norm)").c_str(), xr, g.down(dx, xr.size()), 1e-5);
  }
  {  // the graph forms: tokens and positions read from device memory
    const int nt = 2, nh = 4, hd = 128, rd = 64, start = 777;
    auto x = randv(size_t(nt) * nh * hd);
    auto r = x;
    cpu.i->rope_seq(cpu.c, r.data(), nt, nh * hd, nh, hd, hd, rd, start, nullptr, 1e7f);
    float* dx = g.up(x);
    int32_t* ds = g.up(std::vector<int32_t>{start});
    g.i->rope_seq_dev(g.c, dx, nt, nh * hd, nh, hd, hd, rd, ds, nullptr, 1e7f);
    report("rope_seq_dev pos 777", r, g.down(dx, r.size()), 1e-4);
    std::vector<float> cache(size_t(800) * 64, 0.f);
    auto rows = randv(2 * 64);
    std::copy(rows.begin(), rows.end(), cache.begin() + size_t(start) * 64);
    float* dc = static_cast<float*>(g.alloc(cache.size() * 4));
    g.i->rows_at(g.c, dc, g.up(rows), 2, 64, ds);
    report("rows_at 777", cache, g.down(dc, cache.size()), 0);
    W w = make_weight(g, SPLASH_Q4, 300, 256);
    const std::vector<int32_t> toks = {299, 3, 150};
    std::vector<float> e(toks.size() * 256);
    cpu.i->embed(cpu.c, &w.h, toks.data(), int(toks.size()), e.data());
    float* de = static_cast<float*>(g.alloc(e.size() * 4));
    g.i->embed_dev(g.c, &w.d, g.up(toks), int(toks.size()), de);
    report("embed_dev q4", e, g.down(de, e.size()), 1e-6);
  }
  {  // norms, swiglu, add, gates
    const int n = 37, dim = 256;
    auto x = randv(n * dim), z = randv(n * dim), w = randv(dim, 0.5f, 1.5f);
    std::vector<float> r1(n * dim), r2(n * dim);
    cpu.i->rmsnorm(cpu.c, x.data(), w.data(), n, dim, 1e-6f, r1.data());
    cpu.i->gated_rmsnorm(cpu.c, x.data(), z.data(), w.data(), n, dim, 1e-6f, r2.data());
    float *dx = g.up(x), *dz = g.up(z), *dw = g.up(w);
    float* d1 = static_cast<float*>(g.alloc(n * dim * 4));
    g.i->rmsnorm(g.c, dx, dw, n, dim, 1e-6f, d1);
    report("rmsnorm 37x256", r1, g.down(d1, r1.size()), 1e-5);
    g.i->gated_rmsnorm(g.c, dx, dz, dw, n, dim, 1e-6f, d1);
    report("gated_rmsnorm 37x256", r2, g.down(d1, r2.size()), 1e-5);
    for (int wide : {5120, 250}) {  // the warp form reading the row again; a width it does not take
      auto xw = randv(size_t(n) * wide), zw = randv(size_t(n) * wide), ww = randv(wide, 0.5f, 1.5f);
      std::vector<float> rw(xw.size());
      float *dxw = g.up(xw), *dzw = g.up(zw), *dww = g.up(ww), *dow = static_cast<float*>(g.alloc(xw.size() * 4));
      cpu.i->rmsnorm(cpu.c, xw.data(), ww.data(), n, wide, 1e-6f, rw.data());
      g.i->rmsnorm(g.c, dxw, dww, n, wide, 1e-6f, dow);
      report(("rmsnorm 37x" + std::to_string(wide)).c_str(), rw, g.down(dow, rw.size()), 1e-5);
      cpu.i->gated_rmsnorm(cpu.c, xw.data(), zw.data(), ww.data(), n, wide, 1e-6f, rw.data());
      g.i->gated_rmsnorm(g.c, dxw, dzw, dww, n, wide, 1e-6f, dow);
      report(("gated_rmsnorm 37x" + std::to_string(wide)).c_str(), rw, g.down(dow, rw.size()), 1e-5);
    }
    cpu.i->swiglu(cpu.c, x.data(), z.data(), n * dim, r1.data());
    g.i->swiglu(g.c, dx, dz, n * dim, d1);
    report("swiglu", r1, g.down(d1, r1.size()), 1e-5);
    r1 = x;
    cpu.i->add(cpu.c, r1.data(), z.data(), n * dim);
    g.i->add(g.c, dx, dz, n * dim);
    report("add", r1, g.down(dx, r1.size()), 1e-6);
    auto gt = randv(n), yy = randv(n * dim);
    r1 = yy;
    cpu.i->gated_add(cpu.c, r1.data(), z.data(), gt.data(), n, dim);
    float* dyy = g.up(yy);
    g.i->gated_add(g.c, dyy, dz, g.up(gt), n, dim);
    report("gated_add", r1, g.down(dyy, r1.size()), 1e-6);
    // attention gate at a pitch
    r1 = x;
    cpu.i->sigmoid_gate(cpu.c, r1.data(), 64, z.data() + 32, 128, n * 2, 32);
    float* dx2 = g.up(x);
    g.i->sigmoid_gate(g.c, dx2, 64, dz + 32, 128, n * 2, 32);
    report("sigmoid_gate (pitched)", r1, g.down(dx2, r1.size()), 1e-6);
    // GDN gates
    const int nv = 8;
    auto b = randv(n * nv, -3, 3), a = randv(n * nv, -3, 30), al = randv(nv), db = randv(nv);
    auto rb = b, ra = a;
    cpu.i->gdn_gates(cpu.c, rb.data(), ra.data(), al.data(), db.data(), n, nv);
    float *gb = g.up(b), *ga = g.up(a);
    g.i->gdn_gates(g.c, gb, ga, g.up(al), g.up(db), n, nv);
    report("gdn_gates beta", rb, g.down(gb, rb.size()), 1e-6);
    report("gdn_gates g", ra, g.down(ga, ra.size()), 1e-5);
    // copy2d
    std::vector<float> c2(n * 64, 0.f);
    cpu.i->copy2d(cpu.c, c2.data(), 64 * 4, x.data(), dim * 4, 40 * 4, n);
    float* dc = static_cast<float*>(g.alloc(c2.size() * 4));
    g.i->copy2d(g.c, dc, 64 * 4, g.up(x), dim * 4, 40 * 4, n);
    report("copy2d", c2, g.down(dc, c2.size()), 0);
  }
  {  // RoPE (partial, M-RoPE sections, long positions) and embedding rows
    const int nt = 9, nh = 6, hd = 256, rd = 64;
    const int32_t sec[3] = {11, 11, 10};
    for (const int32_t* s : {static_cast<const int32_t*>(nullptr), sec}) {
      auto x = randv(size_t(nt) * nh * hd * 2);
      auto r = x;
      cpu.i->rope_seq(cpu.c, r.data(), nt, nh * hd * 2, nh, hd * 2, hd, rd, 30000, s, 1e7f);
      float* dx = g.up(x);
      g.i->rope_seq(g.c, dx, nt, nh * hd * 2, nh, hd * 2, hd, rd, 30000, s, 1e7f);
      report(s ? "rope_seq mrope pos 30000" : "rope_seq 1-D pos 30000", r, g.down(dx, r.size()), 1e-4);
    }
    for (int dt : {SPLASH_BF16, SPLASH_Q8, SPLASH_Q4}) {
      W w = make_weight(g, dt, 300, 256);
      const std::vector<int32_t> toks = {0, 299, 17, 17, 150};
      std::vector<float> r(toks.size() * 256);
      cpu.i->embed(cpu.c, &w.h, toks.data(), int(toks.size()), r.data());
      float* d = static_cast<float*>(g.alloc(r.size() * 4));
      g.i->embed(g.c, &w.d, toks.data(), int(toks.size()), d);
      report((std::string("embed ") + names[dt]).c_str(), r, g.down(d, r.size()), 1e-6);
    }
  }
  // attention: GQA, causal over the cache; ≥ 64 new tokens take the tensor cores (with 8 heads the query tiles make
  // one or two waves at most, so starts 700 and 3000 split the context too)
  for (int hd : {128, 256})
    for (int start : {0, 700, 3000})
      for (int T : {5, 16, 17, 40, 100, 200}) attention_case(cpu, g, hd, 8, 2, start, T);
  {  // the tensor-core kernel's edges: partial query tiles, the production head groups (2 heads per block) and
     // odd groups (1 head of 128 rows), head_dim 64, a short step after a long prefix (context split)
    struct Case {
      int hd, nh, nkv, start, T;
    };
    const Case cases[] = {{128, 24, 4, 0, 64},  {128, 24, 4, 0, 65},  {128, 16, 2, 0, 127}, {128, 16, 2, 0, 129},
                          {256, 24, 4, 0, 64},  {256, 24, 4, 0, 65},  {256, 16, 2, 0, 127}, {256, 16, 2, 0, 129},
                          {256, 24, 4, 0, 1000}, {128, 16, 2, 0, 1000}, {128, 6, 2, 0, 200},  {256, 3, 3, 0, 129},
                          {64, 8, 2, 100, 129}, {256, 4, 2, 31800, 139}, {128, 6, 2, 31800, 139}, {256, 8, 1, 5000, 70}};
    for (const Case& cs : cases) attention_case(cpu, g, cs.hd, cs.nh, cs.nkv, cs.start, cs.T);
  }
  {  // few tokens: verify blocks on the tensor cores packed per K/V head (24/4 heads × 16 tokens = 96 rows; 32/4 ×
     // 16 = 128 > 128 rows stays fp32), then everything in fp32: the K/V head's query heads together (one chunk
     // of ≤ 8 rows, or chunks of 32: 24/4 heads × 16 tokens = 3, 16/2 × 16 = 4, a partial last chunk), long
     // contexts (hundreds of splits for the merge), the start read on the device with a grid sized past it, and
     // the per-head form (SPLASH_ATTN_GQA=0; any head_dim)
    struct Case {
      int hd, nh, nkv, start, T, dev;
    };
    const Case cases[] = {{256, 24, 4, 0, 1, -1},    {256, 24, 4, 31800, 1, -1}, {256, 24, 4, 31800, 16, -1},
                          {128, 16, 2, 5000, 16, -1}, {128, 16, 2, 5000, 9, -1},  {64, 8, 2, 100, 3, -1},
                          {256, 24, 4, 33, 5, -1},    {128, 32, 4, 700, 8, -1},   {128, 12, 4, 70, 11, -1},
                          {256, 24, 4, 2047, 1, 300}, {256, 24, 4, 2040, 8, 900}, {128, 16, 2, 63, 16, 100},
                          {80, 4, 2, 300, 3, -1},     {96, 6, 3, 129, 12, 40},    {128, 32, 2, 900, 16, -1},
                          {64, 8, 1, 1000, 16, -1},   {256, 16, 2, 31800, 16, -1}};
    for (const Case& cs : cases) attention_case(cpu, g, cs.hd, cs.nh, cs.nkv, cs.start, cs.T, cs.dev);
    for (const Case& cs : cases) attention_case(cpu, g, cs.hd, cs.nh, cs.nkv, cs.start, cs.T, cs.dev, false);
    KeepOptions keep(*g.b);
    keep.o.attn_gqa = false;
    for (const Case& cs : {cases[1], cases[3], cases[9]})
      attention_case(cpu, g, cs.hd, cs.nh, cs.nkv, cs.start, cs.T, cs.dev, false);
  }
  {  // conv1d + state, then GDN over 1 and 40 tokens
    const int C = 320, K = 4;
    for (int T : {1, 7, 8, 9, 16, 17, 40, 100}) {  // from 9 tokens a thread per channel and run of 16
      auto x = randv(size_t(T) * C), w = randv(size_t(C) * K), st = randv(size_t(K - 1) * C);
      std::vector<float> y(size_t(T) * C);
      auto sr = st;
      cpu.i->conv1d_silu(cpu.c, x.data(), T, C, K, w.data(), sr.data(), y.data());
      float *ds = g.up(st), *dy = static_cast<float*>(g.alloc(y.size() * 4));
      g.i->conv1d_silu(g.c, g.up(x), T, C, K, g.up(w), ds, dy);
      report(("conv1d_silu T=" + std::to_string(T)).c_str(), y, g.down(dy, y.size()), 1e-5);
      report(("conv1d_silu state T=" + std::to_string(T)).c_str(), sr, g.down(ds, sr.size()), 0);
    }
    // one GDN call of T tokens on both backends from the same random state (decays e^g, g in [gmin, 0]): out and
    // the final state compared
    auto gdn_case = [&](bool chunked, int dk, int dv, int T, float gmin, const std::string& name) {
      const int nk = 2, nv = 6;
      const int64_t stride = 2 * nk * dk + nv * dv;
      auto qkv = randv(size_t(T) * stride), beta = randv(size_t(T) * nv, 0.f, 1.f), gg = randv(size_t(T) * nv, gmin, 0.f);
      auto st = randv(size_t(nv) * dk * dv, -0.1f, 0.1f);
      std::vector<float> out(size_t(T) * nv * dv);
      auto sr = st;
      splash_gdn_args a{T, nk, nv, dk, dv, qkv.data(), qkv.data() + nk * dk, qkv.data() + 2 * nk * dk, beta.data(),
                        gg.data(), stride, stride, sr.data(), out.data()};
      (chunked ? cpu.i->gdn_chunked : cpu.i->gdn_recurrent)(cpu.c, &a);
      float* dq = g.up(qkv);
      float *ds = g.up(st), *dout = static_cast<float*>(g.alloc(out.size() * 4));
      splash_gdn_args ad{T, nk, nv, dk, dv, dq, dq + nk * dk, dq + 2 * nk * dk, g.up(beta), g.up(gg), stride, stride, ds, dout};
      (chunked ? g.i->gdn_chunked : g.i->gdn_recurrent)(g.c, &ad);
      report((name + " out").c_str(), out, g.down(dout, out.size()), 1e-4);
      report((name + " state").c_str(), sr, g.down(ds, sr.size()), 1e-4);
    };
    for (int dk : {32, 128})
      for (int T : {1, 16, 40}) gdn_case(false, dk, dk, T, -2.f, "gdn dk=" + std::to_string(dk) + " T=" + std::to_string(T));
    // the chunked form (prefill) against the CPU's: chunks of 64, a shorter last one, segments of 16 chunks
    // (2100 tokens: three); slow decays (γ over a chunk ≈ −1.6) carry the state far, fast ones (≈ −64) do not
    struct Case {
      int dk, dv, T;
      float gmin;
    };
    const Case cases[] = {{128, 128, 2, -2.f},   {128, 128, 63, -2.f},    {128, 128, 64, -0.05f}, {128, 128, 65, -2.f},
                          {128, 128, 65, -0.05f}, {128, 128, 200, -0.05f}, {128, 128, 1000, -2.f}, {128, 128, 1000, -0.05f},
                          {128, 128, 2100, -0.05f}, {64, 128, 130, -0.05f}, {32, 32, 23, -0.05f}, {128, 64, 100, -2.f}};
    KeepOptions keep(*g.b);
    keep.o.gdn_chunked = 1;  // the chunked kernels from 2 tokens on
    for (const Case& cs : cases) {
      char what[80];
      std::snprintf(what, sizeof what, "gdn_chunked dk=%d dv=%d T=%d g>%g", cs.dk, cs.dv, cs.T, cs.gmin);
      gdn_case(true, cs.dk, cs.dv, cs.T, cs.gmin, what);
    }
  }
  struct MoeCase {
    int N;
    splash_dtype dt;
    int E, K, H, I;
    char form;  // 'd': the default choice; 'h': host-routed (SPLASH_MOE_GROUPED=0); 'g': grouped (no GEMVs)
  };
  const MoeCase moe_cases[] = {{1, SPLASH_Q4, 16, 4, 256, 128, 'd'},   {3, SPLASH_Q8, 16, 4, 256, 128, 'd'},
                               {8, SPLASH_Q4, 16, 4, 256, 128, 'd'},   {20, SPLASH_Q4, 16, 4, 256, 128, 'd'},
                               {20, SPLASH_Q4, 16, 4, 256, 128, 'g'},  {20, SPLASH_Q4, 16, 4, 256, 128, 'h'},
                               {9, SPLASH_Q8, 64, 8, 256, 192, 'g'},   {130, SPLASH_Q4, 64, 8, 512, 128, 'd'},
                               {10, SPLASH_BF16, 32, 4, 256, 64, 'd'}, {300, SPLASH_BF16, 32, 4, 256, 64, 'd'},
                               {700, SPLASH_Q4, 256, 8, 256, 128, 'd'}, {5, SPLASH_Q4, 400, 8, 256, 128, 'd'},
                               {4, SPLASH_Q4, 600, 6, 256, 128, 'd'},  {150, SPLASH_Q4, 32, 4, 256, 192, 'g'},
                               {2100, SPLASH_Q4, 64, 8, 256, 128, 'd'}};
  // q4 experts on the grouped path: every form of the expert GEMM (cuda_expert_gemm.cu, $SPLASH_EXPERT_Q4)
  struct MoeRun {
    MoeCase mc;
    const char* form;
  };
  std::vector<MoeRun> moe_runs;
  for (const MoeCase& mc : moe_cases) {
    const bool grouped_q4 = mc.dt == SPLASH_Q4 && mc.form != 'h' && (mc.form == 'g' || mc.N > 128);
    if (!grouped_q4) moe_runs.push_back({mc, nullptr});
    else
      for (const char* f : {"w1", "w2", "w1-noglu", "wmma"}) moe_runs.push_back({mc, f});
  }
  for (const auto& [mc, eform] : moe_runs) {
    // MoE: routing, grouped experts, weighted combine (all on the device unless `host`)
    const int N = mc.N, E = mc.E, K = mc.K, H = mc.H, I = mc.I;
    const splash_dtype dt = mc.dt;
    W wg = make_weight(g, dt, I, H, E), wu = make_weight(g, dt, I, H, E), wd = make_weight(g, dt, H, I, E);
    auto x = randv(size_t(N) * H), lg = randv(size_t(N) * E, -2, 2);
    std::vector<float> out(size_t(N) * H);
    auto lr = lg;
    splash_moe_args a{N, E, K, 1, x.data(), lr.data(), &wg.h, &wu.h, &wd.h, out.data()};
    cpu.i->moe(cpu.c, &a);
    float* dout = static_cast<float*>(g.alloc(out.size() * 4));
    splash_moe_args ad{N, E, K, 1, g.up(x), g.up(lg), &wg.d, &wu.d, &wd.d, dout};
    {
      KeepOptions keep(*g.b);
      if (mc.form != 'd') keep.o.moe_gemv_max = 0;
      if (mc.form == 'h') keep.o.moe_grouped = false;
      if (eform) set_expert_form(keep.o, eform);
      g.i->moe(g.c, &ad);
    }
    char what[112];
    std::snprintf(what, sizeof what, "moe %s E=%d k=%d H=%d I=%d tokens=%d%s%s%s", names[dt], E, K, H, I, N,
                  mc.form == 'h' ? " (host-routed)" : mc.form == 'g' || N > 128 || dt == SPLASH_BF16 ? " (grouped)" : "",
                  eform ? " " : "", eform ? eform : "");
    report(what, out, g.down(dout, out.size()), N > 128 || mc.form != 'd' || dt == SPLASH_BF16 ? 2e-2 : 3e-4);
  }
  test_vision_ops(cpu, g);
  g.i->synchronize(g.c);
  if (auto le = reinterpret_cast<const char* (*)(void*)>(g.i->get_proc_address(g.c, "splash_last_error")))
    if (const char* e = le(g.c)) std::printf("CUDA error: %s\n", e), ++g_fail;
}

}  // namespace

// argmax_rows against the CPU backend's: random rows with planted ties, NaN, +inf and rows with nothing above −inf,
// aligned (float4 loads) and not, widths under, at and past a block's span
void test_argmax(Be& cpu, Be& g) {
  for (int64_t V : {int64_t(1001), int64_t(16384), int64_t(248320), int64_t(2 * 16384 + 5)})
    for (int rows : {1, 7, 16})
      for (int off : {0, 1}) {
        auto x = randv(size_t(rows) * V + off, -10.f, 10.f);
        float* v = x.data() + off;
        for (int r = 0; r < rows; ++r) {
          float* row = v + r * V;
          const int64_t a = (r * 7919) % V, b = std::min(V - 1, a + 1 + (r * 104729) % V);
          switch (r % 7) {
            case 0: row[a] = row[b] = 50.f; break;          // a tie: the lower index
            case 1: row[a] = NAN, row[b] = 40.f; break;     // NaN never counts
            case 2: row[b] = INFINITY, row[a] = INFINITY; break;
            case 3: for (int64_t i = 0; i < V; ++i) row[i] = -INFINITY; break;
            case 4: for (int64_t i = 0; i < V; ++i) row[i] = (i % 3) ? -INFINITY : NAN; break;
            case 5: row[V - 1] = 60.f; break;               // the last value
            default: for (int64_t i = 0; i < V; ++i) row[i] = -1e30f - float(i % 5); break;
          }
        }
        std::vector<int32_t> want(rows), got(rows);
        cpu.i->argmax_rows(cpu.c, v, rows, V, want.data());
        float* dx = g.up(x);
        auto* dout = static_cast<int32_t*>(g.alloc(size_t(rows) * 4));
        g.i->argmax_rows(g.c, dx + off, rows, V, dout);
        g.i->copy_to_host(g.c, got.data(), dout, size_t(rows) * 4);
        const bool ok = want == got && want[0] >= 0 && (rows < 4 || want[3] == -1);
        std::printf("%s argmax_rows V=%lld rows=%d offset=%d\n", ok ? "ok  " : "FAIL", (long long)V, rows, off);
        g_fail += !ok;
        g.i->buffer_free(g.c, dx);
        g.i->buffer_free(g.c, dout);
      }
}

// The streaming GEMV (1 to 4 tokens, columns a multiple of 1024) gives the dp4a GEMV's bits: q4 and q8, partial row
// tiles, grouped launches (two weights on the same activations); its parity with the CPU is test_ops' matmul cases.
void test_stream(Be& g) {
  KeepOptions keep(*g.b);
  for (int dtype : {SPLASH_Q4, SPLASH_Q8})
    for (int64_t C : {int64_t(1024), int64_t(3072)})
      for (int nt : {1, 2, 3, 4}) {
        W a = make_weight(g, dtype, 200, C), b = make_weight(g, dtype, 1030, C);
        float* dx = g.up(randv(size_t(nt) * C));
        float* ya = static_cast<float*>(g.alloc(size_t(nt) * 200 * 4));
        float* yb = static_cast<float*>(g.alloc(size_t(nt) * 1030 * 4));
        std::vector<float> got[2][2];
        for (int on : {0, 1}) {
          keep.o.gemv_stream = on ? 4 : 0;
          g.i->matmul(g.c, &a.d, dx, nt, ya, 200);  // one launch for both
          g.i->matmul(g.c, &b.d, dx, nt, yb, 1030);
          got[on][0] = g.down(ya, size_t(nt) * 200);
          got[on][1] = g.down(yb, size_t(nt) * 1030);
        }
        const bool ok = got[0][0] == got[1][0] && got[0][1] == got[1][1];
        std::printf("%s streaming GEMV q%d cols=%lld tokens=%d: the dp4a kernel's bits\n", ok ? "ok  " : "FAIL",
                    dtype == SPLASH_Q4 ? 4 : 8, (long long)C, nt);
        g_fail += !ok;
        for (float* p : {dx, ya, yb}) g.i->buffer_free(g.c, p);
        free_weight(g, a);
        free_weight(g, b);
      }
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: splash_gpu_test ops | model DIR... | spec DIR... | bench-base | bench-gdn [T...] | bench-attn | bench-moe [T...] | bench-qgemm [T...] | bench DIR [prompt] [n] | bench-spec DIR [prompt] [n] | bench-spec-gemv DIR | bench-vision DIR cpu|cuda [size...] | bench-probe DIR prompt n SETTING...\n");
    return 2;
  }
  const std::string cmd = argv[1];
  try {
    if (cmd == "model") {
      for (int i = 2; i < argc; ++i) test_model(argv[i], true);
      for (int i = 2; i < argc; ++i) test_model(argv[i], false);
    } else if (cmd == "bench-vision" && argc >= 4) {
      std::vector<int> sizes;
      for (int i = 4; i < argc; ++i) sizes.push_back(std::atoi(argv[i]));
      if (sizes.empty()) sizes = {512, 1024};
      bench_vision(argv[2], argv[3], sizes);
    } else if (cmd == "bench") {
      bench(argv[2], argc > 3 ? std::atoi(argv[3]) : 2048, argc > 4 ? std::atoi(argv[4]) : 64);
    } else if (cmd == "bench-probe" && argc >= 6) {
      bench_probe(argv[2], std::atoi(argv[3]), std::atoi(argv[4]), std::vector<std::string>(argv + 5, argv + argc));
    } else if (cmd == "spec") {
      for (int i = 2; i < argc; ++i) test_spec(argv[i]);
    } else if (cmd == "bench-spec" && argc >= 3) {
      // the package's specialised kernels, then the generic ones, then the specialised again (A/B/A: the
      // spread of the two A runs is the noise)
      const int prompt = argc > 3 ? std::atoi(argv[3]) : 2048, n = argc > 4 ? std::atoi(argv[4]) : 64;
      for (const char* v : {"1", "0", "1"}) {
        setenv("SPLASH_SPEC_KERNELS", v, 1);
        bench(argv[2], prompt, n);
      }
      unsetenv("SPLASH_SPEC_KERNELS");
    } else {
      BackendHandle gh = backend_open("cuda", 0, nullptr, 0);
      Be g(gh.backend);
      if (cmd == "ops") {
        splash_backend* cb = splash_backend_cpu_create(0, nullptr, 0);
        Be cpu(cb);
        test_ops(cpu, g);
        test_argmax(cpu, g);
        test_sample(cpu, g);
        test_stream(g);
        test_fused(cpu, g);
        test_verify(cpu, g);
        test_moe_fused(cpu, g);
        splash_backend_cpu_free(cb);
      } else if (cmd == "bench-spec-gemv" && argc >= 3) {
        bench_spec_gemv(g, argv[2]);
      } else if (cmd == "bench-base") {
        bench_base(g);
        bench_gemv(g);
      } else if (cmd == "bench-gdn") {
        std::vector<int> tokens;
        for (int i = 2; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));
        if (tokens.empty()) tokens = {16, 32, 64, 256, 1024, 4096};
        bench_gdn(g, tokens);
      } else if (cmd == "bench-moe") {
        std::vector<int> tokens;
        for (int i = 2; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));
        if (tokens.empty()) tokens = {16, 64, 512, 2048, 4096};
        bench_moe(g, tokens);
      } else if (cmd == "bench-attn") {
        bench_attn(g);
      } else if (cmd == "bench-qgemm") {
        std::vector<int> tokens;
        for (int i = 2; i < argc; ++i) tokens.push_back(std::atoi(argv[i]));
        if (tokens.empty()) tokens = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
        bench_qgemm(g, tokens);
      }
      backend_close(gh);
    }
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
  std::printf("%d failed\n", g_fail);
  return g_fail ? 1 : 0;
}
