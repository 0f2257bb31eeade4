// splash_gpu_test ops: sample_rows (the sampler on the device, cuda_sample.cu) against the CPU backend's, which is the
// host sampler itself. Rows of several shapes (flat, spread, one peak, two near-equal peaks) at the tiny and the
// Qwen3.5 vocabulary, under the filter settings that take each path (small top-k sorted in shared memory, large top-k,
// top-p and min-p without top-k, none), with penalties, for plain rows, draft rows that keep their distribution and
// verify rows with a draft. The device sums weights in another order than the host (fixed point there, double
// here), so a draw whose target falls on a boundary between two candidates may differ: a different token passes
// only when the host itself gives it with the uniforms moved by 1e-6. Also times a call of 8 rows.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "test/gpu_test_util.h"

namespace splash::gputest {

namespace {

struct Config {
  const char* name;
  float T;
  int top_k;
  double top_p, min_p;
  float rep, freq, pres;
  bool masked = false;  // a grammar mask allowing about a third of the tokens (the rows' peaks among the refused)
  bool after = false;   // the mask after the filters (mask_after, retry: a constrained row at T > 0)
};

// one row of logits of the given shape
void fill_row(float* row, int64_t V, int shape, std::mt19937& r) {
  std::normal_distribution<float> n(0.f, shape == 0 ? 0.3f : 2.5f);
  for (int64_t i = 0; i < V; ++i) row[i] = n(r);
  if (shape == 2) row[(V * 7) / 11] += 14.f;
  if (shape == 3) row[V / 3] += 9.f, row[V / 3 + 17] += 9.f - 1e-3f, row[V - 2] += 8.f;
}

enum Kind { kPlain, kDraft, kVerify };

}  // namespace

void test_sample(Be& cpu, Be& g) {
  const Config configs[] = {
      {"T=0.7 top-k 20 top-p 0.95", 0.7f, 20, 0.95, 0.0, 1.f, 0.f, 0.f},
      {"T=1", 1.f, 0, 1.0, 0.0, 1.f, 0.f, 0.f},
      {"T=0.6 top-p 0.9 min-p 0.05", 0.6f, 0, 0.9, 0.05, 1.f, 0.f, 0.f},
      {"T=0.8 top-k 3000 top-p 0.8", 0.8f, 3000, 0.8, 0.0, 1.f, 0.f, 0.f},
      {"T=1 penalties", 1.f, 0, 0.95, 0.0, 1.3f, 0.4f, 0.5f},
      {"T=0 penalties", 0.f, 0, 1.0, 0.0, 1.5f, 0.f, 1.f},
      {"T=0.7 top-k 20 top-p 0.95 masked", 0.7f, 20, 0.95, 0.0, 1.f, 0.f, 0.f, true},
      {"T=1 masked", 1.f, 0, 1.0, 0.0, 1.f, 0.f, 0.f, true},
      {"T=0 masked", 0.f, 0, 1.0, 0.0, 1.f, 0.f, 0.f, true},
      {"T=0.7 top-k 20 top-p 0.95 masked after", 0.7f, 20, 0.95, 0.0, 1.f, 0.f, 0.f, true, true},
      {"T=1 masked after", 1.f, 0, 1.0, 0.0, 1.f, 0.f, 0.f, true, true},
      {"T=0.6 top-p 0.9 min-p 0.05 masked after", 0.6f, 0, 0.9, 0.05, 1.f, 0.f, 0.f, true, true},
      {"T=0.8 top-k 3000 top-p 0.8 masked after", 0.8f, 3000, 0.8, 0.0, 1.f, 0.f, 0.f, true, true},
      {"T=1 penalties masked after", 1.f, 0, 0.95, 0.0, 1.3f, 0.4f, 0.5f, true, true},
      // top-1 keeps only the peak, which the mask refuses in half the rows: F gives the allowed tokens no mass
      {"T=0.7 top-k 1 masked after", 0.7f, 1, 1.0, 0.0, 1.f, 0.f, 0.f, true, true},
  };
  std::mt19937 r(7);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  for (int64_t V : {int64_t(1000), int64_t(248320)}) {
    const int R = V > 100000 ? 32 : 64;  // rows: 4 shapes × R / 4 uniforms
    std::vector<float> x(size_t(R) * V);
    for (int i = 0; i < R; ++i) fill_row(x.data() + size_t(i) * V, V, i % 4, r);
    std::vector<int32_t> pairs;  // (id, count) pairs of the penalised rows: 40 distinct ids
    for (int j = 0; int(pairs.size()) < 80; ++j) {
      const int32_t id = int32_t(r() % V);
      bool seen = false;
      for (size_t k = 0; k < pairs.size(); k += 2) seen = seen || pairs[k] == id;
      if (!seen) pairs.push_back(id), pairs.push_back(j % 3);
    }
    const int n_pen = int(pairs.size() / 2);
    const int64_t mask_at = int64_t(pairs.size());  // the mask's words follow the pairs
    for (int64_t w = 0; w < (V + 31) / 32; ++w) {
      uint32_t bits = uint32_t(r()) & uint32_t(r());  // a quarter of the bits, plus the thirds below
      for (int b = 0; b < 32; ++b)
        if ((w * 32 + b) % 3 == 0) bits |= 1u << b;
      pairs.push_back(int32_t(bits));
    }
    for (int64_t id : {(V * 7) / 11, V / 3, V - 2})  // the planted peaks are refused
      pairs[size_t(mask_at + id / 32)] &= ~(1u << (id % 32));
    float* dx = static_cast<float*>(g.alloc(x.size() * 4));
    float* dq = static_cast<float*>(g.alloc(x.size() * 4));  // q rows (verify) / q_out rows (draft)
    auto* dout = static_cast<int32_t*>(g.alloc(size_t(R) * 4));
    for (const Config& cf : configs) {
      if (cf.top_k >= V) continue;
      for (Kind kind : {kPlain, kDraft, kVerify}) {
        if ((cf.T <= 0.f || cf.after) && kind != kPlain) continue;
        // q for verify rows: the host's distribution of another row under the same filters, its draft a token of q
        std::vector<float> q(kind == kVerify ? x.size() : 0);
        std::vector<splash_sample_desc> hd(static_cast<size_t>(R));
        for (int i = 0; i < R; ++i) {
          splash_sample_desc& d = hd[size_t(i)];
          d = {};
          d.row = i, d.temperature = cf.T, d.top_k = cf.top_k, d.top_p = cf.top_p, d.min_p = cf.min_p;
          d.repetition = cf.rep, d.frequency = cf.freq, d.presence = cf.pres;
          d.n_penalized = (cf.rep != 1.f || cf.freq != 0.f || cf.pres != 0.f) ? n_pen : 0;
          d.uniform = U(r), d.draft = -1;
          d.mask_at = cf.masked ? mask_at : -1;
          if (cf.after) d.mask_after = 1, d.retry = U(r);
        }
        if (kind == kVerify) {
          std::vector<splash_sample_desc> qd = hd;
          std::vector<int32_t> tmp(static_cast<size_t>(R));
          for (int i = 0; i < R; ++i) qd[size_t(i)].row = (i + 4) % R, qd[size_t(i)].q_out = q.data() + size_t(i) * V;
          std::vector<float> xs = x;
          cpu.i->sample_rows(cpu.c, xs.data(), V, qd.data(), R, pairs.data(), int64_t(pairs.size()), tmp.data());
          for (int i = 0; i < R; ++i) hd[size_t(i)].draft = tmp[size_t((i + 4) % R)], hd[size_t(i)].accept = U(r);
          g.i->copy_to_device(g.c, dq, q.data(), q.size() * 4);
        }
        std::vector<splash_sample_desc> cd = hd, gd = hd;
        std::vector<float> cq(kind == kDraft ? x.size() : 0);
        for (int i = 0; i < R; ++i) {
          if (kind == kVerify) cd[size_t(i)].q = q.data() + size_t(i) * V, gd[size_t(i)].q = dq + size_t(i) * V;
          if (kind == kDraft) cd[size_t(i)].q_out = cq.data() + size_t(i) * V, gd[size_t(i)].q_out = dq + size_t(i) * V;
        }
        std::vector<int32_t> want(static_cast<size_t>(R)), got(static_cast<size_t>(R));
        {
          std::vector<float> xs = x;
          cpu.i->sample_rows(cpu.c, xs.data(), V, cd.data(), R, pairs.data(), int64_t(pairs.size()), want.data());
        }
        g.i->copy_to_device(g.c, dx, x.data(), x.size() * 4);
        g.i->sample_rows(g.c, dx, V, gd.data(), R, pairs.data(), int64_t(pairs.size()), dout);
        g.i->copy_to_host(g.c, got.data(), dout, size_t(R) * 4);
        int same = 0, moved = 0, wrong = 0;
        for (int i = 0; i < R; ++i) {
          if (got[size_t(i)] == want[size_t(i)]) {
            ++same;
            continue;
          }
          // the host's tokens with the uniforms moved by ±1e-6: a boundary between two candidates
          bool explained = false;
          for (double du : {-1e-6, 1e-6})
            for (int which : {0, 1, 2}) {
              splash_sample_desc d = cd[size_t(i)];
              std::vector<float> cq2(kind == kDraft ? size_t(V) : 0);
              if (kind == kDraft) d.q_out = cq2.data();
              if (which == 0) d.uniform = std::clamp(d.uniform + du, 0.0, 1.0 - 1e-12);
              else if (which == 1) d.accept = std::clamp(d.accept + du, 0.0, 1.0 - 1e-12);
              else d.retry = std::clamp(d.retry + du, 0.0, 1.0 - 1e-12);
              d.row = 0;
              std::vector<float> xs(x.begin() + i * V, x.begin() + (i + 1) * V);
              int32_t t = -1;
              cpu.i->sample_rows(cpu.c, xs.data(), V, &d, 1, pairs.data(), int64_t(pairs.size()), &t);
              explained = explained || t == got[size_t(i)];
            }
          ++(explained ? moved : wrong);
        }
        // draft rows: the kept distribution, within 1e-6 (+ 1e-5 relative) where both keep a token; the host and
        // the device may put the top-p cut one candidate apart when the target falls on a boundary, so a token
        // only one side keeps must be the lightest (≤ every token both keep) and the counts one apart
        double qerr = 0;
        int cut_moved = 0, q_wrong = 0;
        if (kind == kDraft) {
          auto gq = g.down(dq, x.size());
          for (int i = 0; i < R; ++i) {
            const float *c = cq.data() + size_t(i) * V, *gg = gq.data() + size_t(i) * V;
            int kc = 0, kg = 0, one_side = 0;
            float lightest = 2.f, heaviest_one_side = 0.f;
            for (int64_t j = 0; j < V; ++j) {
              kc += c[j] > 0.f, kg += gg[j] > 0.f;
              if (c[j] > 0.f && gg[j] > 0.f) {
                lightest = std::min(lightest, c[j]);
                const double e = std::fabs(double(gg[j]) - c[j]);
                qerr = std::max(qerr, e);
                q_wrong += e > 1e-6 + 1e-5 * c[j];
              } else if (c[j] > 0.f || gg[j] > 0.f) {
                ++one_side, heaviest_one_side = std::max(heaviest_one_side, std::max(c[j], gg[j]));
              }
            }
            if (one_side == 0) continue;
            if (std::abs(kc - kg) <= 1 && one_side == 1 && heaviest_one_side <= lightest * 1.01f) ++cut_moved;
            else ++q_wrong;
          }
        }
        const bool ok = wrong == 0 && want[0] >= 0 && q_wrong == 0;
        std::printf("%s sample_rows V=%lld %s %s: %d same, %d on a boundary, %d wrong%s\n", ok ? "ok  " : "FAIL",
                    (long long)V, cf.name, kind == kPlain ? "plain" : kind == kDraft ? "draft" : "verify", same, moved,
                    wrong, kind == kDraft ? (" (q max error " + std::to_string(qerr) + ", top-p cut one candidate apart in " +
                                            std::to_string(cut_moved) + " rows)").c_str() : "");
        g_fail += !ok;
      }
    }
    // time: 8 rows, each setting, plain rows (no penalties: x unchanged between calls)
    if (V > 100000)
      for (const Config& cf : configs) {
        if (cf.rep != 1.f || cf.T <= 0.f || (cf.masked && !cf.after) || cf.top_k == 1) continue;
        std::vector<splash_sample_desc> d(8);
        for (int i = 0; i < 8; ++i) {
          d[size_t(i)] = {};
          d[size_t(i)].row = i, d[size_t(i)].temperature = cf.T, d[size_t(i)].top_k = cf.top_k;
          d[size_t(i)].top_p = cf.top_p, d[size_t(i)].min_p = cf.min_p, d[size_t(i)].repetition = 1.f;
          d[size_t(i)].uniform = U(r), d[size_t(i)].draft = -1, d[size_t(i)].mask_at = -1;
          if (cf.after) d[size_t(i)].mask_at = mask_at, d[size_t(i)].mask_after = 1, d[size_t(i)].retry = U(r);
        }
        g.i->copy_to_device(g.c, dx, x.data(), x.size() * 4);
        int32_t sink[8];
        g.i->sample_rows(g.c, dx, V, d.data(), 8, pairs.data(), int64_t(pairs.size()), dout);
        g.i->copy_to_host(g.c, sink, dout, 32);
        const int iters = 50;
        const auto t0 = std::chrono::steady_clock::now();
        for (int it = 0; it < iters; ++it)
          g.i->sample_rows(g.c, dx, V, d.data(), 8, pairs.data(), int64_t(pairs.size()), dout);
        g.i->copy_to_host(g.c, sink, dout, 32);
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / iters;
        std::printf("time sample_rows V=%lld rows=8 %s: %.1f us a call\n", (long long)V, cf.name, us);
      }
    for (void* p : {static_cast<void*>(dx), static_cast<void*>(dq), static_cast<void*>(dout)}) g.i->buffer_free(g.c, p);
  }
}

}  // namespace splash::gputest
