// splash_gpu_test ops, continued: a speculative verify's GDN layers on the device. One conv call and one stepwise
// recurrence of T tokens that keeps the state after each token (the rollback's slots) must give the bits of T
// one-token calls, the kernels a decode runs, so that greedy output with the draft equals it without; and the kept
// states match the CPU's within the recurrence's tolerance.
#include <algorithm>
#include <string>
#include <tuple>

#include "backend/gdn_args.h"
#include "test/gpu_test_util.h"

namespace splash::gputest {

void test_verify(Be& cpu, Be& g) {
  auto verify_case = [&](int dk, int dv, int T) {
    const int nk = 2, nv = 6, Cc = 2 * nk * dk + nv * dv, K = 4;
    const size_t S = size_t(nv) * dk * dv;
    auto x = randv(size_t(T) * Cc), w = randv(size_t(Cc) * K), cst = randv(size_t(K - 1) * Cc);
    auto beta = randv(size_t(T) * nv, 0.f, 1.f), gg = randv(size_t(T) * nv, -2.f, 0.f);
    auto st = randv(S, -0.1f, 0.1f);
    auto args = [&](int n, const float* y, const float* bt, const float* gt, float* state, float* o) {
      return gdn_call(n, nk, nv, dk, dv, y, Cc, bt, gt, state, o);
    };
    float *dx = g.up(x), *dw = g.up(w), *db = g.up(beta), *dg = g.up(gg);
    float *c1 = g.up(cst), *y1 = static_cast<float*>(g.alloc(x.size() * 4)), *s1 = g.up(st);
    float *o1 = static_cast<float*>(g.alloc(size_t(T) * nv * dv * 4)), *states = static_cast<float*>(g.alloc(T * S * 4));
    g.i->conv1d_silu(g.c, dx, T, Cc, K, dw, c1, y1);
    splash_gdn_args a = args(T, y1, db, dg, s1, o1);
    a.stepwise = 1, a.states = states, a.states_stride = int64_t(S);
    g.i->gdn_recurrent(g.c, &a);
    float *c2 = g.up(cst), *y2 = static_cast<float*>(g.alloc(x.size() * 4)), *s2 = g.up(st);
    float* o2 = static_cast<float*>(g.alloc(size_t(T) * nv * dv * 4));
    std::vector<float> each(T * S), all = g.down(states, T * S);
    for (int t = 0; t < T; ++t) {
      g.i->conv1d_silu(g.c, dx + size_t(t) * Cc, 1, Cc, K, dw, c2, y2 + size_t(t) * Cc);
      splash_gdn_args b = args(1, y2 + size_t(t) * Cc, db + t * nv, dg + t * nv, s2, o2 + size_t(t) * nv * dv);
      g.i->gdn_recurrent(g.c, &b);
      auto now = g.down(s2, S);
      std::copy(now.begin(), now.end(), each.begin() + t * S);
    }
    const std::string name = "verify dk=" + std::to_string(dk) + " dv=" + std::to_string(dv) + " T=" + std::to_string(T);
    report((name + " conv out (one-token)").c_str(), g.down(y2, x.size()), g.down(y1, x.size()), 0);
    report((name + " conv state (one-token)").c_str(), g.down(c2, cst.size()), g.down(c1, cst.size()), 0);
    report((name + " gdn out (one-token)").c_str(), g.down(o2, size_t(T) * nv * dv), g.down(o1, size_t(T) * nv * dv), 0);
    report((name + " states (one-token)").c_str(), each, all, 0);
    report((name + " final state (one-token)").c_str(), g.down(s2, S), g.down(s1, S), 0);
    // the CPU's stepwise call keeps the same states, within the recurrence's tolerance
    std::vector<float> cs = cst, cy(x.size()), ss = st, co(size_t(T) * nv * dv), cstates(T * S);
    cpu.i->conv1d_silu(cpu.c, x.data(), T, Cc, K, w.data(), cs.data(), cy.data());
    splash_gdn_args h = args(T, cy.data(), beta.data(), gg.data(), ss.data(), co.data());
    h.stepwise = 1, h.states = cstates.data(), h.states_stride = int64_t(S);
    cpu.i->gdn_recurrent(cpu.c, &h);
    report((name + " states (CPU)").c_str(), cstates, all, 1e-4);
  };
  // blocks of 16 and 3 (the few-token form a decode takes), of 20 (past it: the form forced by `stepwise`), odd head
  // sizes (dk 48; dk 40, not a multiple of 16, the block form with 32 rows per warp)
  for (auto [dk, dv, T] : {std::tuple{128, 128, 16}, std::tuple{128, 128, 3}, std::tuple{64, 128, 20}, std::tuple{48, 64, 9},
                           std::tuple{40, 32, 5}})
    verify_case(dk, dv, T);
}

}  // namespace splash::gputest
