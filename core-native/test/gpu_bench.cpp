// splash_gpu_test's benchmarks: device copy bandwidth and the bf16 GEMM rate (the ceilings), the decode GEMV
// alone per schedule, the GDN op alone (recurrent vs chunked), and prefill and decode of a package
// (scripts/gpu-test.sh runs them on synthetic shapes).
#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <tuple>

#include "runtime/json.h"
#include "test/gpu_test_util.h"

namespace splash::gputest {

void bench_base(Be& g) {
  const size_t bytes = size_t(2) << 30;
  void* src = g.alloc(bytes);
  void* dst = g.alloc(bytes);
  for (int i = 0; i < 3; ++i) g.i->copy2d(g.c, dst, 0, src, 0, bytes, 1);
  g.i->synchronize(g.c);
  const int reps = 10;
  double t0 = now();
  for (int i = 0; i < reps; ++i) g.i->copy2d(g.c, dst, 0, src, 0, bytes, 1);
  g.i->synchronize(g.c);
  const double dt = (now() - t0) / reps;
  std::printf("device copy: %.0f GB/s (read + write of %.1f GB in %.3f ms)\n", 2 * bytes / dt / 1e9, bytes / 1e9, dt * 1e3);
  g.i->buffer_free(g.c, src);
  g.i->buffer_free(g.c, dst);
  for (int n : {8192, 4096}) {  // bf16 weights × fp32 activations through the backend's prefill path
    W w = make_weight(g, SPLASH_BF16, n, n);
    auto x = randv(size_t(n) * n);
    float* dx = g.up(x);
    float* dy = static_cast<float*>(g.alloc(size_t(n) * n * 4));
    for (int i = 0; i < 3; ++i) g.i->matmul(g.c, &w.d, dx, n, dy, n);
    g.i->synchronize(g.c);
    t0 = now();
    for (int i = 0; i < 10; ++i) g.i->matmul(g.c, &w.d, dx, n, dy, n);
    g.i->synchronize(g.c);
    const double t = (now() - t0) / 10;
    std::printf("bf16 matmul %dx%dx%d (incl. activation conversion): %.0f TFLOP/s\n", n, n, n, 2.0 * n * n * n / t / 1e12);
  }
}

// Decode GEMVs alone at the 27B / 35B-A3B shapes (q4, one token), for each rows-per-warp and unroll choice;
// every variant's output must equal the default's (same arithmetic, other schedule).
// Seconds per matmul of nt tokens (quantisation + GEMV), timed as a recorded graph of 20 of them over the weight
// copies in turn, so host launches do not count.
double gemv_graph_time(Be& g, const std::vector<W>& ws, float* dx, int nt, float* dy, int64_t rows) {
  g.i->graph_capture_begin(g.c);
  for (int i = 0; i < 20; ++i) g.i->matmul(g.c, &ws[i % ws.size()].d, dx, nt, dy, rows);
  void* graph = g.i->graph_capture_end(g.c);
  if (!graph) throw std::runtime_error("cannot record the GEMV graph");
  g.i->graph_launch(g.c, graph);
  g.i->synchronize(g.c);
  const int reps = 10;
  const double t0 = now();
  for (int i = 0; i < reps; ++i) g.i->graph_launch(g.c, graph);
  g.i->synchronize(g.c);
  const double t = (now() - t0) / (reps * 20);
  g.i->graph_free(g.c, graph);
  return t;
}

void bench_gemv(Be& g) {
  KeepOptions keep(*g.b);
  auto set_rows = [&](void*, int rows) { keep.o.gemv_rows = rows; };
  auto set_unroll = [&](void*, int unroll) { keep.o.gemv_unroll = unroll; };
  const int64_t shapes[][2] = {{10240, 5120}, {17408, 5120}, {5120, 17408}, {5120, 6144}, {248320, 5120}, {8192, 2048}, {2048, 4096}};
  for (auto& sh : shapes) {
    const double bytes = double(sh[0]) * sh[1] / 2 * 1.125;
    // enough copies that the rotation does not fit the 60 MB L2
    std::vector<W> ws;
    for (int k = 0; k < std::max(1, int(240e6 / bytes)); ++k) ws.push_back(make_weight(g, SPLASH_Q4, sh[0], sh[1]));
    auto x = randv(size_t(sh[1]));
    float* dx = g.up(x);
    float* dy = static_cast<float*>(g.alloc(size_t(sh[0]) * 4));
    set_rows(g.c, 2);
    set_unroll(g.c, 2);
    g.i->matmul(g.c, &ws[0].d, dx, 1, dy, sh[0]);
    const std::vector<float> ref = g.down(dy, size_t(sh[0]));
    std::printf("gemv q4 %6lldx%-6lld", (long long)sh[0], (long long)sh[1]);
    for (int unroll : {2, 4})
      for (int rows : {1, 2, 4}) {
        set_rows(g.c, rows);
        set_unroll(g.c, unroll);
        g.i->matmul(g.c, &ws[0].d, dx, 1, dy, sh[0]);
        const std::vector<float> got = g.down(dy, size_t(sh[0]));
        double err = 0, mx = 0;
        for (size_t k = 0; k < ref.size(); ++k) err = std::max(err, double(std::fabs(got[k] - ref[k]))), mx = std::max(mx, double(std::fabs(ref[k])));
        if (err > 1e-5 * mx) std::printf(" [rows=%d unroll=%d differs: FAIL]", rows, unroll), ++g_fail;
        const double t = gemv_graph_time(g, ws, dx, 1, dy, sh[0]);
        std::printf(" r%d/u%d %6.1f us %4.0f GB/s", rows, unroll, t * 1e6, bytes / t / 1e9);
      }
    std::printf("\n");
    set_rows(g.c, 4);
    set_unroll(g.c, 2);
  }
}

// q4 matmuls of 1 to 512 tokens at the 27B and 35B-A3B shapes, the fused GEMM (cuda_qgemm.cu) against the paths it
// replaces (GEMV launches of ≤ 8 tokens up to 32 tokens, the dequantise + bf16 GEMM beyond), and for 1 to 4 tokens the
// streaming GEMV (cuda_gemv_stream.cu) against the dp4a one, whose bits it must give: µs per matmul over weight copies
// that do not fit the L2 (host clock around 20 calls after a warm-up), the weights' read rate and the matmul rate.
void bench_qgemm(Be& g, const std::vector<int>& tokens) {
  KeepOptions keep(*g.b);
  auto set = [&](void*, int lo, int hi) { keep.o.qgemm_min = lo, keep.o.qgemm_max = hi; };
  auto stream = [&](void*, int n) { keep.o.gemv_stream = n; };
  const int64_t shapes[][2] = {{10240, 5120}, {17408, 5120}, {5120, 17408}, {5120, 6144}, {8192, 2048}, {2048, 4096}};
  for (auto& sh : shapes) {
    const double bytes = double(sh[0]) * sh[1] / 2 * 1.125;
    std::vector<W> ws;
    for (int k = 0; k < std::max(1, int(240e6 / bytes)); ++k) ws.push_back(make_weight(g, SPLASH_Q4, sh[0], sh[1]));
    for (int nt : tokens) {
      auto x = randv(size_t(nt) * sh[1]);
      float* dx = g.up(x);
      float* dy = static_cast<float*>(g.alloc(size_t(nt) * sh[0] * 4));
      double t[3] = {0, 0, 0};
      std::vector<float> out[3];
      for (int mode : {0, 1, 2}) {  // the dp4a GEMV or dequantise + GEMM, the fused GEMM, the streaming GEMV
        if (mode == 2 && nt > 4) break;
        set(g.c, mode == 1 ? 1 : 0, mode == 1 ? 1 << 30 : 0);
        stream(g.c, mode == 2 ? 4 : 0);
        for (int i = 0; i < 3; ++i) g.i->matmul(g.c, &ws[i % ws.size()].d, dx, nt, dy, sh[0]);
        g.i->synchronize(g.c);
        const double t0 = now();
        for (int i = 0; i < 20; ++i) g.i->matmul(g.c, &ws[i % ws.size()].d, dx, nt, dy, sh[0]);
        g.i->synchronize(g.c);
        t[mode] = (now() - t0) / 20;
        g.i->matmul(g.c, &ws[0].d, dx, nt, dy, sh[0]);
        out[mode] = g.down(dy, size_t(nt) * sh[0]);
      }
      double err = 0, mx = 0;
      for (size_t k = 0; k < out[0].size(); ++k)
        err = std::max(err, double(std::fabs(out[1][k] - out[0][k]))), mx = std::max(mx, double(std::fabs(out[0][k])));
      const bool same = out[2].empty() || out[2] == out[0];
      const double flop = 2.0 * nt * sh[0] * sh[1];
      std::printf("q4 matmul %6lldx%-6lld tokens=%-4d before %8.1f us | fused %8.1f us = %5.0f GB/s, %5.0f TFLOP/s | %.2fx%s",
                  (long long)sh[0], (long long)sh[1], nt, t[0] * 1e6, t[1] * 1e6, bytes / t[1] / 1e9, flop / t[1] / 1e12,
                  t[0] / t[1], err > 2e-2 * mx ? " DIFFERS: FAIL" : "");
      if (t[2] > 0) std::printf(" | stream %6.1f us = %5.0f GB/s (dp4a %5.0f GB/s)%s", t[2] * 1e6, bytes / t[2] / 1e9,
                                bytes / t[0] / 1e9, same ? ", same bits" : " NOT THE SAME BITS: FAIL");
      std::printf("\n");
      if (err > 2e-2 * mx || !same) ++g_fail;
      g.i->buffer_free(g.c, dx);
      g.i->buffer_free(g.c, dy);
    }
    for (auto& w : ws) free_weight(g, w);
  }
}

// The decode GEMV alone at the 27B shapes, the generic kernel against the specialised one from a kernel image
// (a 27B-shape package's kernels/cuda-sm90.fatbin): both outputs compared (the same bits expected), each timed as
// a recorded graph of 20 matmuls over weight copies that do not fit the L2, for 1 and 4 tokens.
void bench_spec_gemv(Be& g, const std::string& dir) {
  auto load = reinterpret_cast<const char* (*)(void*, const void*, size_t, int)>(
      g.i->get_proc_address(g.c, "splash_cuda_load_kernels"));
  auto shapes_loaded = reinterpret_cast<int (*)(void*)>(g.i->get_proc_address(g.c, "splash_cuda_kernel_shapes"));
  if (!load || !shapes_loaded) throw std::runtime_error("the CUDA module cannot load package kernels");
  // the package's cuda / sm_90 entry: its file and ABI
  auto slurp = [](const std::string& path) {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) throw std::runtime_error("cannot open " + path);
    std::vector<char> data;
    char buf[65536];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) data.insert(data.end(), buf, buf + n);
    std::fclose(f);
    return data;
  };
  const std::vector<char> mtext = slurp(dir + "/splash.json");
  const Json manifest = Json::parse(mtext.data(), mtext.size());
  std::string file;
  int abi = -1;
  if (const Json* ks = manifest.find("kernels"); ks && ks->kind == Json::Array)
    for (const Json& k : ks->arr)
      if (const Json *b = k.find("backend"), *fl = k.find("file"), *a = k.find("abi");
          b && fl && a && b->kind == Json::String && b->str == "cuda" && fl->kind == Json::String)
        file = fl->str, abi = int(a->num);
  if (file.empty()) throw std::runtime_error(dir + ": no cuda kernels in splash.json (tools/build_spec_kernels.py)");
  const std::string image_path = dir + "/" + file;
  const std::vector<char> image = slurp(image_path);
  auto use = [&](bool spec) {
    const char* why = spec ? load(g.c, image.data(), image.size(), abi) : load(g.c, nullptr, 0, 0);
    if (why) throw std::runtime_error(std::string("kernel image: ") + why);
  };
  use(true);
  std::printf("kernel image %s: %d shapes\n", image_path.c_str(), shapes_loaded(g.c));
  const int64_t shapes[][2] = {{10240, 5120}, {6144, 5120}, {17408, 5120}, {5120, 17408}, {5120, 6144}, {248320, 5120}};
  for (auto& sh : shapes) {
    const double bytes = double(sh[0]) * sh[1] / 2 * 1.125;
    std::vector<W> ws;
    for (int k = 0; k < std::max(1, int(240e6 / bytes)); ++k) ws.push_back(make_weight(g, SPLASH_Q4, sh[0], sh[1]));
    for (int nt : {1, 4}) {
      auto x = randv(size_t(sh[1]) * nt);
      float* dx = g.up(x);
      float* dy = static_cast<float*>(g.alloc(size_t(sh[0]) * nt * 4));
      std::vector<float> out[2];
      double t[2] = {};
      for (int spec : {0, 1}) {
        use(spec != 0);
        g.i->matmul(g.c, &ws[0].d, dx, nt, dy, sh[0]);
        out[spec] = g.down(dy, size_t(sh[0]) * nt);
        t[spec] = gemv_graph_time(g, ws, dx, nt, dy, sh[0]);
      }
      size_t diff = 0;
      for (size_t k = 0; k < out[0].size(); ++k) diff += out[0][k] != out[1][k];
      std::printf("gemv q4 %6lldx%-6lld tokens=%d  generic %7.1f us %5.0f GB/s  specialised %7.1f us %5.0f GB/s  "
                  "%+.1f%%  %s\n",
                  (long long)sh[0], (long long)sh[1], nt, t[0] * 1e6, bytes / t[0] / 1e9, t[1] * 1e6,
                  bytes / t[1] / 1e9, (t[0] / t[1] - 1) * 100, diff ? "outputs DIFFER: FAIL" : "same bits");
      g_fail += diff != 0;
    }
  }
  use(false);
}

void bench(const std::string& dir, int prompt, int n) {
  auto m = Model::open(dir, 0, nullptr, 0, false, "cuda");
  const ModelConfig& c = m->config();
  // $SPLASH_BENCH_STEPS=k,k,...: first these step sizes in this order, 10 steps each, each step's time printed (where
  // a size's median hides a slow step or an order effect)
  std::vector<int> listed;
  if (const char* list = std::getenv("SPLASH_BENCH_STEPS"))
    for (const std::string& k : split(list, ','))
      if (std::atoi(k.c_str()) > 0) listed.push_back(std::atoi(k.c_str()));
  // the sequence holds every token below: the prompt, a decode step, n + n / 2 timed ones, the listed steps, and 11
  // steps of each size of the multi-token (2 … 64), greedy-row (1, 4, 8; two ways) and sampled-row (1, 4, 8; two
  // settings, two ways) loops
  int64_t need = prompt + 1 + n + n / 2 + 11 * ((2 + 4 + 6 + 8 + 16 + 32 + 64) + 2 * 13 + 4 * 13);
  for (int k : listed) need += 10 * k;
  int32_t id = m->create_sequence(int32_t(need));
  std::vector<StepItem> items(1);
  items[0].seq = seq_of(*m, id);
  std::vector<std::vector<float>> out;
  // warm-up: a prefill of the same length (the backend's scratch grows to its size once) and a decode step;
  // then the median of three timed prefills from position 0
  items[0].logits = 1;
  std::vector<double> pfs;
  for (int r = 0; r < 4; ++r) {
    m->truncate_sequence(id, 0);
    items[0].tokens.resize(prompt);
    for (int i = 0; i < prompt; ++i) items[0].tokens[i] = (i * 7919 + 3 + r) % c.V;
    const double t0 = now();
    m->step(items, out);
    if (r > 0) pfs.push_back(now() - t0);
    if (r == 0) {
      items[0].tokens = {1};
      m->step(items, out);
    }
  }
  std::sort(pfs.begin(), pfs.end());
  const double pf = pfs[1];
  auto decode = [&](int steps) {
    const double t = now();
    for (int i = 0; i < steps; ++i) {
      items[0].tokens = {int32_t((i * 31 + 1) % c.V)};
      m->step(items, out);
    }
    return (now() - t) / steps;
  };
  const double dc = n > 0 ? decode(n) : 0;
  m->set_step_graphs(false);  // the same steps queued slot by slot
  const double dc_direct = n > 1 ? decode(n / 2) : 0;
  m->set_step_graphs(true);
  // steps of 2 to 64 tokens (the matmuls of a verify block or of batched decodes): the median of 8 steps of k tokens
  // (new ids each step, with the item's sampling and logits as set) after three of warm-up. The first steps of a
  // new size are slower (a step that records its graph; once, on an H100, a third step of 16 tokens took 14 ms with
  // or without graphs), and a mean would carry them.
  auto time_steps = [&](int k) {
    std::vector<double> ts;
    for (int i = 0; i < 11; ++i) {
      items[0].tokens.resize(k);
      for (int j = 0; j < k; ++j) items[0].tokens[j] = int32_t((i * 31 + j * 7 + 1) % c.V);
      const double t = now();
      m->step(items, out);
      if (i >= 3) ts.push_back(now() - t);
    }
    std::nth_element(ts.begin(), ts.begin() + ts.size() / 2, ts.end());
    return ts[ts.size() / 2];
  };
  for (int k : listed) {
    std::printf("steps of %d tokens, ms:", k);
    for (int i = 0; i < 10; ++i) {
      items[0].tokens.resize(size_t(k));
      for (int j = 0; j < k; ++j) items[0].tokens[size_t(j)] = int32_t((i * 31 + j * 7 + 1) % c.V);
      const double t = now();
      m->step(items, out);
      std::printf(" %.3f", (now() - t) * 1e3);
    }
    std::printf("\n");
  }
  const int kMulti[] = {2, 4, 6, 8, 16, 32, 64};
  double multi[7] = {};
  for (int mi = 0; mi < 7; ++mi) multi[mi] = time_steps(kMulti[mi]);
  // greedy rows (a verify block's or a batch's shape): steps of k tokens sampling all k rows at T = 0, and draft
  // passes of B − 1 rows, each with the argmax on the backend (only ids come back) and on the host (whole rows)
  auto greedy = [](int k) {
    auto r = std::make_shared<sampler::Request>();
    r->rows.resize(size_t(k));
    return r;
  };
  double rows_t[3][2] = {}, draft_t[2] = {};
  const int kRows[] = {1, 4, 8};
  for (int backend : {1, 0}) {
    m->set_pick_on_backend(backend);
    for (int mi = 0; mi < 3; ++mi) {
      const int k = kRows[mi];
      items[0].sample = greedy(k);
      items[0].logits = 0;
      rows_t[mi][backend] = time_steps(k);
    }
    items[0].sample.reset();
    items[0].logits = 1;
    if (m->has_draft()) {
      int32_t ds = m->create_sequence(256);
      std::vector<StepItem> di(1);
      di[0].seq = seq_of(*m, ds);
      di[0].capture = true;
      for (int i = 0; i < 64; ++i) di[0].tokens.push_back(int32_t((i * 7919 + 3) % c.V));
      m->step(di, out);
      std::vector<DraftItem> dr(1);
      dr[0].seq = di[0].seq;
      dr[0].anchor = 1;
      dr[0].n = m->draft_config().B - 1;
      dr[0].logits = false;
      dr[0].sample = greedy(dr[0].n);
      for (int i = 0; i < 2; ++i) m->draft(dr, out);
      const double t = now();
      for (int i = 0; i < 8; ++i) m->draft(dr, out);
      draft_t[backend] = (now() - t) / 8;
      m->free_sequence(ds);
    }
  }
  m->set_pick_on_backend(true);
  std::printf("greedy rows, argmax on the backend / on the host: steps of 1 / 4 / 8 tokens sampling every row %.3f / %.3f"
              " / %.3f ms against %.3f / %.3f / %.3f ms; draft passes of %d rows %.3f against %.3f ms\n",
              rows_t[0][1] * 1e3, rows_t[1][1] * 1e3, rows_t[2][1] * 1e3, rows_t[0][0] * 1e3, rows_t[1][0] * 1e3,
              rows_t[2][0] * 1e3, m->has_draft() ? m->draft_config().B - 1 : 0, draft_t[1] * 1e3, draft_t[0] * 1e3);
  // sampled rows: steps of k tokens sampling all k rows at T = 0.7 with top-k 20 and top-p 0.95 (Qwen's suggested
  // settings) and at T = 1 without filters, the backend's sampler (only ids come back) against the host's
  double samp_t[2][3][2] = {};
  for (int backend : {1, 0}) {
    m->set_sample_on_backend(backend);
    for (int pi = 0; pi < 2; ++pi)
      for (int mi = 0; mi < 3; ++mi) {
        const int k = kRows[mi];
        auto r = std::make_shared<sampler::Request>();
        r->params.temperature = pi == 0 ? 0.7f : 1.f;
        if (pi == 0) r->params.top_k = 20, r->params.top_p = 0.95;
        r->rows.resize(size_t(k));
        for (int j = 0; j < k; ++j) r->rows[size_t(j)].uniform = (j * 0.37 + 0.11) - std::floor(j * 0.37 + 0.11);
        items[0].sample = r;
        items[0].logits = 0;
        samp_t[pi][mi][backend] = time_steps(k);
      }
  }
  items[0].sample.reset();
  items[0].logits = 1;
  m->set_sample_on_backend(true);
  for (int pi = 0; pi < 2; ++pi)
    std::printf("sampled rows (%s), the backend's sampler / the host's: steps of 1 / 4 / 8 tokens sampling every row"
                " %.3f / %.3f / %.3f ms against %.3f / %.3f / %.3f ms\n", pi == 0 ? "T 0.7, top-k 20, top-p 0.95" : "T 1",
                samp_t[pi][0][1] * 1e3, samp_t[pi][1][1] * 1e3, samp_t[pi][2][1] * 1e3, samp_t[pi][0][0] * 1e3,
                samp_t[pi][1][0] * 1e3, samp_t[pi][2][0] * 1e3);
  // Weight elements one token multiplies (routed experts: top-k of E), from the config.
  double elems = double(c.V) * c.H;  // lm_head
  for (int l = 0; l < c.L; ++l) {
    if (c.linear[l]) elems += double(c.H) * (c.conv_ch() + c.Dv() + 2 * c.nv) + double(c.Dv()) * c.H;
    else elems += double(c.H) * (double(c.nh) * c.hd * (c.attn_gate ? 2 : 1) + 2.0 * c.nkv * c.hd) + double(c.nh) * c.hd * c.H;
    if (c.E > 0) elems += double(c.H) * c.E + 3.0 * c.topk * c.Im * c.H + (c.Is > 0 ? 3.0 * c.Is * c.H + c.H : 0);
    else elems += 3.0 * c.I * c.H;
  }
  // bytes per element of the package's linear weights (packed values + scales + biases), from lm_head
  const TensorInfo* lw = m->package().find(c.tie ? "embed_tokens.weight" : "lm_head.weight");
  double bpe = 2;
  if (lw && lw->dtype == "U32") {
    const std::string base = c.tie ? "embed_tokens" : "lm_head";
    const TensorInfo* sc = m->package().find(base + ".scales");
    bpe = double(lw->bytes + 2 * sc->bytes) / (double(c.V) * c.H);
  } else if (lw && lw->dtype == "F32") {
    bpe = 4;
  }
  // a decode step reads those weights, the GDN states (read and written), the KV rows so far, one embedding row
  const double step_bytes = elems * bpe + 2.0 * double(m->gdn_bytes()) +
                            double(m->kv_bytes_per_token()) * (prompt + n / 2) + double(c.H) * bpe;
  // matmul FLOPs only (attention/GDN not counted); the prefill takes the lm_head for its last token alone
  const double head = double(c.V) * c.H;
  const double tflops = 2.0 * ((elems - head) * prompt + head) / pf / 1e12;
  std::printf("%s [%s kernels]: %d layers, weights %.2f GB; prefill %d tokens %.3f s = %.0f tok/s, %.0f TFLOP/s of matmul;"
              " decode %.3f ms/token = %.1f tok/s, %.0f GB/s (%.2f GB per step); without graphs %.3f ms/token;"
              " steps of 2 / 4 / 6 / 8 / 16 / 32 / 64 tokens %.3f / %.3f / %.3f / %.3f / %.3f / %.3f / %.3f ms\n",
              dir.c_str(), m->specialised_kernels().empty() ? "generic" : m->specialised_kernels().c_str(), c.L,
              m->weight_bytes() / 1e9, prompt, pf, prompt / pf, tflops, dc * 1e3, 1 / dc,
              step_bytes / dc / 1e9, step_bytes / 1e9, dc_direct * 1e3, multi[0] * 1e3, multi[1] * 1e3, multi[2] * 1e3,
              multi[3] * 1e3, multi[4] * 1e3, multi[5] * 1e3, multi[6] * 1e3);
}

// The GDN op alone at the prefill shapes (27B: 48 v-heads; 35B-A3B: 32; 16 key heads, dk = dv = 128): the recurrent
// kernels against the chunked ones (SPLASH_GDN_CHUNKED=1 forces them at every T), ms per call over a run of calls
// (host clock around them, after a warm-up), and the two outputs and states from one start compared.
void bench_gdn(Be& g, const std::vector<int>& tokens) {
  const int nk = 16, dk = 128, dv = 128, Tmax = *std::max_element(tokens.begin(), tokens.end());
  for (int nv : {48, 32}) {
    const int64_t stride = 2 * nk * dk + nv * dv;
    const size_t sn = size_t(nv) * dk * dv, on = size_t(Tmax) * nv * dv;
    float* dq = g.up(randv(size_t(Tmax) * stride));
    float* db = g.up(randv(size_t(Tmax) * nv, 0.f, 1.f));
    float* dg = g.up(randv(size_t(Tmax) * nv, -0.1f, 0.f));
    float* s0 = g.up(randv(sn, -0.1f, 0.1f));
    float* ds = static_cast<float*>(g.alloc(sn * 4));
    float* dout = static_cast<float*>(g.alloc(on * 4));
    for (int T : tokens) {
      splash_gdn_args a{T, nk, nv, dk, dv, dq, dq + nk * dk, dq + 2 * nk * dk, db, dg, stride, stride, ds, dout};
      auto reset = [&] { g.i->copy2d(g.c, ds, 0, s0, 0, sn * 4, 1); };
      auto measure = [&](bool chunked) {
        const int reps = T >= 1024 && !chunked ? 3 : 20;
        KeepOptions keep(*g.b);
        if (chunked) keep.o.gdn_chunked = 1;
        auto call = [&] { chunked ? g.i->gdn_chunked(g.c, &a) : g.i->gdn_recurrent(g.c, &a); };
        reset();
        call();
        std::vector<float> o = g.down(dout, size_t(T) * nv * dv), st = g.down(ds, sn);
        call();
        g.i->synchronize(g.c);
        const double t0 = now();
        for (int i = 0; i < reps; ++i) call();
        g.i->synchronize(g.c);
        const double t = (now() - t0) / reps;
        return std::make_tuple(t, o, st);
      };
      auto [tr, orr, sr] = measure(false);
      auto [tc, oc, sc] = measure(true);
      std::printf("gdn nv=%d nk=%d dk=dv=%d T=%5d: recurrent %8.3f ms, chunked %7.3f ms (%.1fx)\n", nv, nk, dk, T,
                  tr * 1e3, tc * 1e3, tr / tc);
      char what[80];
      std::snprintf(what, sizeof what, "  chunked vs recurrent nv=%d T=%d out", nv, T);
      report(what, orr, oc, 1e-4);
      std::snprintf(what, sizeof what, "  chunked vs recurrent nv=%d T=%d state", nv, T);
      report(what, sr, sc, 1e-4);
    }
    for (float* p : {dq, db, dg, s0, ds, dout}) g.i->buffer_free(g.c, p);
  }
}

// The routed experts of one MoE layer at the 35B-A3B shape (256 experts, top 8, hidden 2048, expert width 512,
// q4), the op alone: the expert-grouped form against the host-routed one (same bf16 operands, so they agree to
// rounding), host clock over repeated calls after a warm-up.
void bench_moe(Be& g, const std::vector<int>& tokens) {
  const int E = 256, K = 8, H = 2048, I = 512, Nmax = *std::max_element(tokens.begin(), tokens.end());
  W wg = make_weight(g, SPLASH_Q4, I, H, E), wu = make_weight(g, SPLASH_Q4, I, H, E), wd = make_weight(g, SPLASH_Q4, H, I, E);
  float* dx = g.up(randv(size_t(Nmax) * H));
  float* dl = g.up(randv(size_t(Nmax) * E, -2, 2));
  float* dout = static_cast<float*>(g.alloc(size_t(Nmax) * H * 4));
  KeepOptions keep(*g.b);
  for (int N : tokens) {
    splash_moe_args a{N, E, K, 1, dx, dl, &wg.d, &wu.d, &wd.d, dout};
    auto measure = [&](bool host) {
      keep.o.moe_grouped = !host;
      const int reps = host ? 3 : 20;
      g.i->moe(g.c, &a);
      std::vector<float> o = g.down(dout, size_t(N) * H);
      g.i->synchronize(g.c);
      const double t0 = now();
      for (int i = 0; i < reps; ++i) g.i->moe(g.c, &a);
      g.i->synchronize(g.c);
      const double t = (now() - t0) / reps;
      keep.o.moe_grouped = true;
      return std::make_pair(t, o);
    };
    keep.o.moe_gemv_max = 0;
    // the expert GEMM's other forms first (cuda_expert_gemm.cu), then the default
    double tf[3];
    std::vector<float> of[3];
    const char* forms[3] = {"wmma", "w2", "w1-noglu"};
    for (int f = 0; f < 3; ++f) {
      set_expert_form(keep.o, forms[f]);
      std::tie(tf[f], of[f]) = measure(false);
      set_expert_form(keep.o, nullptr);
    }
    auto [tg, og] = measure(false);
    auto [th, oh] = measure(true);
    keep.o.moe_gemv_max = 100000;  // the expert-indexed GEMVs (the decode form) at this many tokens
    auto [tv, ov] = N <= 256 ? measure(false) : std::make_pair(0.0, og);
    keep.o.moe_gemv_max = cuda::CudaOptions().moe_gemv_max;
    const double flop = 2.0 * N * K * 3.0 * H * I;
    std::printf("moe E=%d k=%d H=%d I=%d q4 T=%5d: grouped %8.3f ms (%6.1f TFLOP/s), host-routed %8.3f ms (%.1fx), "
                "GEMVs %8.3f ms; grouped wmma %8.3f ms (%6.1f), w2 %8.3f ms (%6.1f), w1 without GLU %8.3f ms (%6.1f)\n",
                E, K, H, I, N, tg * 1e3, flop / tg * 1e-12, th * 1e3, th / tg, tv * 1e3, tf[0] * 1e3,
                flop / tf[0] * 1e-12, tf[1] * 1e3, flop / tf[1] * 1e-12, tf[2] * 1e3, flop / tf[2] * 1e-12);
    for (int f = 0; f < 3; ++f) {
      char wf[80];
      std::snprintf(wf, sizeof wf, "  grouped %s vs host-routed T=%d", forms[f], N);
      report(wf, oh, of[f], 2e-2);
    }
    if (N <= 256) {
      char w2[80];
      std::snprintf(w2, sizeof w2, "  GEMVs vs host-routed T=%d", N);
      report(w2, oh, ov, 2e-2);
    }
    char what[80];
    std::snprintf(what, sizeof what, "  grouped vs host-routed T=%d", N);
    report(what, oh, og, 2e-2);
  }
  for (float* p : {dx, dl, dout}) g.i->buffer_free(g.c, p);
}

// One attention call's random fp32 q and cache on the device (head_dim 256), and its timing: the median of 15
// calls by CUDA events after 3 warm-up calls.
struct AttnCase {
  Be& g;
  float *dq, *dk, *dv, *dout;
  size_t on;
  splash_attn_args a;
  AttnCase(Be& g_, int nh, int nkv, int T, int start, int hd) : g(g_) {
    const size_t len = size_t(start) + T;
    on = size_t(T) * nh * hd;
    dq = g.up(randv(on));
    dk = g.up(randv(len * nkv * hd));
    dv = g.up(randv(len * nkv * hd));
    dout = static_cast<float*>(g.alloc(on * 4));
    a = splash_attn_args{T, nh, nkv, hd, start, dq, int64_t(nh) * hd, dk, dv, dout, 1.f / std::sqrt(float(hd))};
  }
  ~AttnCase() {
    for (float* p : {dq, dk, dv, dout}) g.i->buffer_free(g.c, p);
  }
  double median_ms(float (*event_ms)(void*, int)) {
    for (int i = 0; i < 3; ++i) g.i->attention(g.c, &a);
    std::vector<float> ms;
    for (int i = 0; i < 15; ++i) {
      event_ms(g.c, 0);
      g.i->attention(g.c, &a);
      ms.push_back(event_ms(g.c, 1));
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  }
  std::vector<float> out() { return g.down(dout, on); }
};

// The attention op alone at the prefill shapes (head_dim 256; 27B: 24 q / 4 kv heads, 35B-A3B: 16 / 2), random fp32
// q and cache: the tensor-core form (SPLASH_ATTN_TC=1) and the split fp32 form (=0), and their outputs compared.
// FLOPs: 4·T·ctx·hd·heads, ctx the mean number of positions a row sees. Then few tokens (decode, verify blocks):
// the default (verify blocks packed on the tensor cores, one token in fp32 with the K/V head's query heads
// together), fp32 only (SPLASH_ATTN_TC=0), and fp32 with a block per query head (also SPLASH_ATTN_GQA=0); GB/s
// counts the K/V rows read once.
void bench_attn(Be& g) {
  auto event_ms = reinterpret_cast<float (*)(void*, int)>(g.i->get_proc_address(g.c, "splash_cuda_event_ms"));
  if (!event_ms) throw std::runtime_error("the CUDA module has no event timer");
  struct Shape {
    int nh, nkv, T, start;
  };
  const int hd = 256;
  const Shape shapes[] = {{24, 4, 4096, 0}, {24, 4, 512, 31744}, {24, 4, 139, 31800}, {16, 2, 4096, 0}};
  for (const Shape& s : shapes) {
    AttnCase ac(g, s.nh, s.nkv, s.T, s.start, hd);
    const double flops = 4.0 * s.T * (s.start + (s.T + 1) / 2.0) * hd * s.nh;
    std::printf("attention hd=%d heads=%d/%d T=%4d start=%5d:", hd, s.nh, s.nkv, s.T, s.start);
    std::vector<float> out[2];
    KeepOptions keep(*g.b);
    for (int tc : {1, 0}) {
      keep.o.attn_tc = tc;
      const double t = ac.median_ms(event_ms);
      std::printf("  %s %8.3f ms %6.1f TFLOP/s", tc ? "tensor cores" : "split fp32", t, flops / (t * 1e-3) / 1e12);
      out[tc] = ac.out();
    }
    std::printf("\n");
    report("  tensor cores vs split fp32", out[0], out[1], 5e-3);
  }
  const Shape few[] = {{24, 4, 1, 2048}, {24, 4, 1, 31800}, {24, 4, 8, 31800}, {24, 4, 16, 31800}, {16, 2, 1, 31800},
                       {16, 2, 16, 31800}, {24, 4, 16, 2048}};
  for (const Shape& s : few) {
    AttnCase ac(g, s.nh, s.nkv, s.T, s.start, hd);
    const double bytes = 2.0 * (double(s.start) + s.T) * s.nkv * hd * 4;
    std::printf("attention hd=%d heads=%d/%d T=%4d start=%5d:", hd, s.nh, s.nkv, s.T, s.start);
    std::vector<float> out[3];
    const char* names[] = {"default", "fp32", "fp32 per head"};
    KeepOptions keep(*g.b);
    for (int v = 0; v < 3; ++v) {
      if (v > 0) keep.o.attn_tc = 0;
      if (v > 1) keep.o.attn_gqa = false;
      const double t = ac.median_ms(event_ms);
      std::printf("  %s %7.3f ms %5.0f GB/s", names[v], t, bytes / (t * 1e-3) / 1e9);
      out[v] = ac.out();
    }
    std::printf("\n");
    report("  default vs fp32", out[1], out[0], s.T > 1 ? 5e-3 : 1e-5);
    report("  fp32: shared vs per head", out[2], out[1], 1e-5);
  }
}

}  // namespace splash::gputest
