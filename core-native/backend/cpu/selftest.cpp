#include "backend/cpu/selftest.h"

#include <chrono>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/isa.h"
#include "backend/gdn_args.h"
#include "runtime/error.h"
#include "runtime/thread_pool.h"

namespace splash::cpu {
namespace {

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return uint16_t(u >> 16);
}

// Random weight storage for one dtype.
struct RandWeight {
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales, biases;
  splash_weight w{};
  RandWeight(int dtype, int64_t rows, int64_t cols, std::mt19937& rng) {
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    std::uniform_int_distribution<int> byte(0, 255);
    w.dtype = dtype;
    w.rows = rows;
    w.cols = cols;
    size_t bytes = dtype == SPLASH_F32 ? rows * cols * 4 : dtype == SPLASH_BF16 ? rows * cols * 2
                   : dtype == SPLASH_Q8 ? rows * cols : rows * cols / 2;
    data.resize(bytes + 64);
    if (dtype == SPLASH_F32) {
      for (int64_t i = 0; i < rows * cols; ++i) {
        float v = u(rng);
        std::memcpy(&data[i * 4], &v, 4);
      }
    } else if (dtype == SPLASH_BF16) {
      for (int64_t i = 0; i < rows * cols; ++i) {
        uint16_t v = f32_to_bf16(u(rng));
        std::memcpy(&data[i * 2], &v, 2);
      }
    } else {
      for (size_t i = 0; i < bytes; ++i) data[i] = uint8_t(byte(rng));
      const int64_t G = rows * cols / 64;
      scales.resize(G);
      biases.resize(G);
      for (int64_t g = 0; g < G; ++g) {
        scales[g] = f32_to_bf16(0.01f + 0.05f * std::fabs(u(rng)));
        biases[g] = f32_to_bf16(0.5f * u(rng));
      }
      w.scales = scales.data();
      w.biases = biases.data();
    }
    w.data = data.data();
  }
};

const char* dtype_name(int d) {
  switch (d) {
    case SPLASH_F32: return "f32";
    case SPLASH_BF16: return "bf16";
    case SPLASH_Q8: return "q8";
    default: return "q4";
  }
}

// Batch invariance: an n-token call, with its rows split unevenly (as threads split them), must give
// every (row, token) exactly the bits of a one-token call on that token alone, for every ISA, dtype and
// activation mode. max_err = number of mismatching outputs; tolerance 0.
void batch_invariance(std::mt19937& rng, std::vector<SelfTestResult>& out) {
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int dtype : {SPLASH_F32, SPLASH_BF16, SPLASH_Q8, SPLASH_Q4}) {
    const bool quant = dtype == SPLASH_Q8 || dtype == SPLASH_Q4;
    for (int64_t rows : {37, 6}) {
      const int64_t cols = quant ? 64 * 5 : 203;
      RandWeight rw(dtype, rows, cols, rng);
      for (int nt : {2, 3, 5, 9, 16}) {
        std::vector<float> x(nt * cols);
        for (auto& v : x) v = nd(rng);
        for (int levels : {0, 1, 2}) {
          if (levels > 0 && !quant) continue;
          for (auto* isa : isa_available()) {
            ActBuf buf;
            Act a;
            prepare_act(&rw.w, x.data(), nt, levels, buf, a);
            std::vector<float> y(nt * rows, NAN);
            const int64_t splits[] = {0, std::min<int64_t>(3, rows), std::min<int64_t>(10, rows), rows};
            for (int s = 0; s < 3; ++s) isa->rows(&rw.w, a, splits[s], splits[s + 1], y.data(), rows);
            int64_t bad = 0;
            for (int t = 0; t < nt; ++t) {
              ActBuf b1;
              Act a1;
              prepare_act(&rw.w, x.data() + t * cols, 1, levels, b1, a1);
              std::vector<float> y1(rows, NAN);
              isa->rows(&rw.w, a1, 0, rows, y1.data(), rows);
              for (int64_t r = 0; r < rows; ++r) bad += std::memcmp(&y1[r], &y[t * rows + r], 4) != 0;
            }
            std::string name = std::string("batch_") + dtype_name(dtype) + (quant ? (levels == 2 ? "_i8x2" : levels == 1 ? "_i8" : "_f32") : "") +
                               "_nt" + std::to_string(nt) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
            out.push_back({name, isa->name, "one-token", double(bad), 0.0, bad == 0});
          }
        }
      }
    }
  }
}

}  // namespace

// Causal attention (attention_tile, the clone this CPU runs) against an fp64 softmax, for head dims with a
// register-resident output (64, 128, 256) and one without (40), one and three query heads per KV head, calls that
// cross a key block; and every row of a multi-token call bit for bit equal to the same row computed alone.
static void attention_check(std::mt19937& rng, std::vector<SelfTestResult>& out) {
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int32_t hd : {64, 128, 256, 40})
    for (int32_t G : {1, 3})
      for (auto [start, T] : {std::pair{70, 5}, std::pair{0, 20}}) {
        const int32_t nkv = 2, nh = nkv * G, len = start + T;
        const int64_t kvs = int64_t(nkv) * hd;
        std::vector<float> q(size_t(T) * nh * hd), k(size_t(len) * kvs), v(size_t(len) * kvs);
        for (auto* a : {&q, &k, &v})
          for (float& x : *a) x = nd(rng);
        splash_attn_args args{};
        args.n_tokens = T, args.n_heads = nh, args.n_kv_heads = nkv, args.head_dim = hd, args.start = start;
        args.q = q.data(), args.q_stride = int64_t(nh) * hd, args.k_cache = k.data(), args.v_cache = v.data();
        args.scale = 1.f / std::sqrt(float(hd));
        std::vector<float> y(size_t(T) * nh * hd);
        args.out = y.data();
        for (int32_t h = 0; h < nkv; ++h) attention_tile(&args, h, 0, T);
        double err = 0, mag = 0;
        int64_t differ = 0;
        std::vector<float> one(size_t(nh) * hd);
        for (int32_t t = 0; t < T; ++t) {
          for (int32_t h = 0; h < nh; ++h) {
            const float* qr = q.data() + (size_t(t) * nh + h) * hd;
            const int32_t kh = h / G, n = start + t + 1;
            std::vector<double> s(static_cast<size_t>(n));
            double m = -INFINITY, z = 0;
            for (int32_t p = 0; p < n; ++p) {
              double d = 0;
              for (int32_t i = 0; i < hd; ++i) d += double(qr[i]) * k[size_t(p) * kvs + size_t(kh) * hd + i];
              s[size_t(p)] = d * args.scale;
              m = std::max(m, s[size_t(p)]);
            }
            for (double& x : s) z += (x = std::exp(x - m));
            for (int32_t i = 0; i < hd; ++i) {
              double r = 0;
              for (int32_t p = 0; p < n; ++p) r += s[size_t(p)] / z * v[size_t(p) * kvs + size_t(kh) * hd + i];
              err = std::max(err, std::abs(r - y[(size_t(t) * nh + h) * hd + i]));
              mag = std::max(mag, std::abs(r));
            }
          }
          splash_attn_args a1 = args;
          a1.n_tokens = 1, a1.start = start + t, a1.q = q.data() + size_t(t) * nh * hd, a1.out = one.data();
          for (int32_t h = 0; h < nkv; ++h) attention_tile(&a1, h, 0, 1);
          for (size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &y[size_t(t) * nh * hd + i], 4) != 0;
        }
        const std::string name = "attention_hd" + std::to_string(hd) + "_g" + std::to_string(G) + "_at" + std::to_string(start);
        const double e = err / (mag + 1e-30);
        out.push_back({name, "auto", "reference", e, 1e-5, e <= 1e-5});
        out.push_back({name, "auto", "one-token", double(differ), 0.0, differ == 0});
      }
}

// A speculative verify runs its tokens through one conv call and one stepwise recurrence (with the state after each
// token kept); the rollback copies one of those states back. Both must give the bits of one-token decodes.
static void gdn_verify_check(std::mt19937& rng, std::vector<SelfTestResult>& out) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> un(0.f, 1.f);
  for (auto [dk, dv] : {std::pair{32, 32}, std::pair{64, 48}}) {
    const int32_t T = 6, nk = 2, nv = 4, K = 4, C = 2 * nk * dk + nv * dv;
    const size_t S = size_t(nv) * dk * dv;
    std::vector<float> x(size_t(T) * C), w(size_t(C) * K), cst(size_t(K - 1) * C), beta(size_t(T) * nv), g(size_t(T) * nv), st(S);
    for (auto* a : {&x, &w, &cst, &st})
      for (float& v : *a) v = 0.3f * nd(rng);
    for (float& v : beta) v = un(rng);
    for (float& v : g) v = -2.f * un(rng);
    // one call of T tokens
    std::vector<float> c1 = cst, y1(size_t(T) * C), s1 = st, o1(size_t(T) * nv * dv), states(size_t(T) * S);
    conv1d_silu_ref(x.data(), T, C, K, w.data(), c1.data(), y1.data());
    auto args = [&](int32_t n, const float* y, const float* bt, const float* gt, float* state, float* o) {
      return gdn_call(n, nk, nv, dk, dv, y, C, bt, gt, state, o);
    };
    splash_gdn_args a = args(T, y1.data(), beta.data(), g.data(), s1.data(), o1.data());
    a.stepwise = 1, a.states = states.data(), a.states_stride = int64_t(S);
    for (int32_t h = 0; h < nv; ++h) gdn_recurrent_head(&a, h);
    // T calls of one token
    std::vector<float> c2 = cst, y2(size_t(T) * C), s2 = st, o2(size_t(T) * nv * dv);
    int64_t differ = 0;
    for (int32_t t = 0; t < T; ++t) {
      conv1d_silu_ref(x.data() + size_t(t) * C, 1, C, K, w.data(), c2.data(), y2.data() + size_t(t) * C);
      const float* yt = y2.data() + size_t(t) * C;
      splash_gdn_args b = args(1, yt, beta.data() + t * nv, g.data() + t * nv, s2.data(), o2.data() + size_t(t) * nv * dv);
      for (int32_t h = 0; h < nv; ++h) gdn_recurrent_head(&b, h);
      differ += std::memcmp(s2.data(), states.data() + size_t(t) * S, S * 4) != 0;
    }
    differ += std::memcmp(y1.data(), y2.data(), y1.size() * 4) != 0;
    differ += std::memcmp(c1.data(), c2.data(), c1.size() * 4) != 0;
    differ += std::memcmp(o1.data(), o2.data(), o1.size() * 4) != 0;
    differ += std::memcmp(s1.data(), s2.data(), S * 4) != 0;
    const std::string name = "gdn_verify_dk" + std::to_string(dk) + "_dv" + std::to_string(dv);
    out.push_back({name, "auto", "one-token", double(differ), 0.0, differ == 0});
  }
}

std::vector<SelfTestResult> kernel_self_test(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<SelfTestResult> out;
  const auto isas = isa_available();
  for (int shape = 0; shape < 3; ++shape)
  for (int dtype : {SPLASH_F32, SPLASH_BF16, SPLASH_Q8, SPLASH_Q4}) {
    const bool quant = dtype == SPLASH_Q8 || dtype == SPLASH_Q4;
    // odd group count and ragged tails; a single group; two groups
    const int64_t rows = shape == 0 ? 37 : shape == 1 ? 5 : 130;
    const int64_t cols = shape == 0 ? (quant ? 64 * 7 : 203) : shape == 1 ? 64 : 128;
    RandWeight rw(dtype, rows, cols, rng);
    for (int nt : {1, 3}) {
      std::vector<float> x(nt * cols);
      for (auto& v : x) v = nd(rng);
      x[5] = 40.f;  // an outlier, as real activations have
      // fp64 reference and per-(t,r) magnitude
      std::vector<double> ref(nt * rows), mag(nt * rows);
      std::vector<float> row(cols);
      for (int64_t r = 0; r < rows; ++r) {
        dequant_row_ref(&rw.w, r, row.data());
        for (int t = 0; t < nt; ++t) {
          double s = 0, m = 0;
          for (int64_t c = 0; c < cols; ++c) {
            s += double(row[c]) * x[t * cols + c];
            m += std::fabs(double(row[c]) * x[t * cols + c]);
          }
          ref[t * rows + r] = s;
          mag[t * rows + r] = m;
        }
      }
      for (int levels : {0, 1, 2}) {
        const bool i8 = levels > 0;
        if (i8 && !quant) continue;
        ActBuf buf;
        Act a;
        prepare_act(&rw.w, x.data(), nt, levels, buf, a);
        std::vector<float> ys(nt * rows);
        isa_scalar()->rows(&rw.w, a, 0, rows, ys.data(), rows);
        for (auto* isa : isas) {
          std::vector<float> y(nt * rows, NAN);
          // split the rows in two ranges to exercise r0/r1
          const int64_t split = std::min<int64_t>(11, rows);
          isa->rows(&rw.w, a, 0, split, y.data(), rows);
          isa->rows(&rw.w, a, split, rows, y.data(), rows);
          double e_ref = 0, e_sc = 0;
          for (int64_t i = 0; i < nt * rows; ++i) {
            const double m = mag[i] + 1e-30;
            double er = std::fabs(double(y[i]) - ref[i]) / m;
            double es = std::fabs(double(y[i]) - double(ys[i])) / m;
            if (!std::isfinite(y[i])) er = es = INFINITY;
            e_ref = std::max(e_ref, er);
            e_sc = std::max(e_sc, es);
          }
          std::string name = std::string("matmul_") + dtype_name(dtype) + (quant ? (levels == 2 ? "_i8x2" : levels == 1 ? "_i8" : "_f32") : "") +
                             "_nt" + std::to_string(nt) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
          const double tol_ref = levels == 1 ? 5e-2 : levels == 2 ? 2e-4 : 1e-5;  // int8: the 40σ outlier coarsens its group
          out.push_back({name, isa->name, "reference", e_ref, tol_ref, e_ref <= tol_ref});
          if (std::strcmp(isa->name, "scalar") != 0)
            out.push_back({name, isa->name, "scalar", e_sc, 1e-5, e_sc <= 1e-5});
        }
      }
    }
  }
  batch_invariance(rng, out);
  attention_check(rng, out);
  gdn_verify_check(rng, out);
  return out;
}

BenchResult bench_matmul(int64_t rows, int64_t cols, const std::string& dtype, int threads, int int8, int iters,
                         const char* isa, int nt) {
  int d = dtype == "q4" ? SPLASH_Q4 : dtype == "q8" ? SPLASH_Q8 : dtype == "bf16" ? SPLASH_BF16 : dtype == "f32" ? SPLASH_F32 : -1;
  if (d < 0) throw Error("invalid_argument", "dtype must be q4, q8, bf16 or f32");
  if (rows <= 0 || cols <= 0 || cols % 64 || rows * cols > (int64_t(1) << 31) || iters <= 0 || iters > 10000)
    throw Error("invalid_argument", "bad benchmark shape");
  if (nt < 1 || nt > 4096) throw Error("invalid_argument", "nt must be in [1, 4096]");
  std::mt19937 rng(1);
  RandWeight rw(d, rows, cols, rng);
  splash_backend* be = splash_backend_cpu_create(threads, isa, int8);
  if (!be) throw Error("unsupported", "ISA not supported on this CPU");
  std::vector<float> x(size_t(cols) * nt), y(size_t(rows) * nt);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = nd(rng);
  BenchResult r;
  r.isa = be->iface->variant;
  ThreadPool pool(threads);
  r.threads = pool.size();
  r.rows = rows;
  r.cols = cols;
  r.dtype = dtype;
  r.int8 = int8;
  r.nt = nt;
  r.weight_bytes = double(rw.data.size() - 64) + 2.0 * 2.0 * double(rw.scales.size());
  using clk = std::chrono::steady_clock;
  be->iface->matmul(be->ctx, &rw.w, x.data(), nt, y.data(), rows);  // warm up
  double s = 0;
  if (nt == 1) {
    auto t0 = clk::now();
    for (int i = 0; i < iters; ++i) be->iface->matmul(be->ctx, &rw.w, x.data(), nt, y.data(), rows);
    s = std::chrono::duration<double>(clk::now() - t0).count() / iters;
  } else {  // several tokens: the fastest call (compute-bound; on a shared machine the mean measures the neighbours)
    s = INFINITY;
    for (int i = 0; i < iters; ++i) {
      auto t0 = clk::now();
      be->iface->matmul(be->ctx, &rw.w, x.data(), nt, y.data(), rows);
      s = std::min(s, std::chrono::duration<double>(clk::now() - t0).count());
    }
  }
  r.seconds_per_matvec = s;
  r.matvec_gbps = r.weight_bytes / s / 1e9;
  splash_backend_cpu_free(be);
  // plain parallel read of the same number of bytes
  {
    const size_t n = size_t(r.weight_bytes) / 8;
    std::vector<uint64_t> buf(n, 1);
    std::vector<uint64_t> sums(pool.size());
    auto rd = [&] {
      pool.parallel_for(int64_t(n), [&](int64_t b, int64_t e, int ti) {
        uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        int64_t i = b;
        for (; i + 4 <= e; i += 4) {
          a0 += buf[i];
          a1 += buf[i + 1];
          a2 += buf[i + 2];
          a3 += buf[i + 3];
        }
        for (; i < e; ++i) a0 += buf[i];
        sums[ti] += a0 + a1 + a2 + a3;
      }, 1024);
    };
    rd();
    auto t1 = clk::now();
    for (int i = 0; i < iters; ++i) rd();
    double sr = std::chrono::duration<double>(clk::now() - t1).count() / iters;
    r.read_gbps = double(n * 8) / sr / 1e9;
    if (sums[0] == 42) r.read_gbps += 0;  // keep the sums alive
  }
  {
    const size_t n = size_t(r.weight_bytes);
    std::vector<uint8_t> a(n, 1), b(n, 2);
    std::memcpy(b.data(), a.data(), n);
    auto t1 = clk::now();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(b.data(), a.data(), n);
      a[i % n] = b[(i * 7) % n];
    }
    double sm = std::chrono::duration<double>(clk::now() - t1).count() / iters;
    r.memcpy_gbps = 2.0 * double(n) / sm / 1e9;
  }
  return r;
}

}  // namespace splash::cpu
