// splash_gpu_test ops, continued: steps that the CUDA backend runs as one kernel where the CPU runs several (the
// GDN gates as the b/a GEMV's epilogue, the b/a rows riding in a q4 GEMV's launch, the gated RMSNorm joining a
// decode step's recurrence), against the CPU's separate slots, and against the CUDA backend's own unfused kernels
// where those give the same bits.
#include "test/gpu_test_util.h"

namespace splash::gputest {

void test_fused(Be& cpu, Be& g) {
  DefaultGemvs pin(g);
  // the gates as the epilogue of the b/a GEMVs that wait for them (decode steps: 1 to 8 tokens; 10240 columns
  // reach past the weights read before the PDL wait), alone or riding in the launch of a q4 GEMV on the same
  // activations (the streaming GEMV's 1- and 2-token launches; 3 and 8 tokens launch them after it), against the
  // CPU's matmuls and gates
  for (int nt : {1, 2, 3, 8})
    for (int with_q : {0, 1}) {
      const int C = 10240, nvh = 48, R = 1040;
      W wb = make_weight(g, SPLASH_F32, nvh, C), wa = make_weight(g, SPLASH_F32, nvh, C), wq = make_weight(g, SPLASH_Q4, R, C);
      auto xx = randv(size_t(nt) * C), al2 = randv(nvh), db2 = randv(nvh);
      std::vector<float> cb(size_t(nt) * nvh), ca(cb.size()), cq(size_t(nt) * R);
      if (with_q) cpu.i->matmul(cpu.c, &wq.h, xx.data(), nt, cq.data(), R);
      cpu.i->matmul(cpu.c, &wb.h, xx.data(), nt, cb.data(), nvh);
      cpu.i->matmul(cpu.c, &wa.h, xx.data(), nt, ca.data(), nvh);
      cpu.i->gdn_gates(cpu.c, cb.data(), ca.data(), al2.data(), db2.data(), nt, nvh);
      float* dxx = g.up(xx);
      float *db_ = static_cast<float*>(g.alloc(cb.size() * 4)), *da_ = static_cast<float*>(g.alloc(ca.size() * 4));
      float* dq = static_cast<float*>(g.alloc(cq.size() * 4));
      if (with_q) g.i->matmul(g.c, &wq.d, dxx, nt, dq, R);
      g.i->matmul(g.c, &wb.d, dxx, nt, db_, nvh);
      g.i->matmul(g.c, &wa.d, dxx, nt, da_, nvh);
      g.i->gdn_gates(g.c, db_, da_, g.up(al2), g.up(db2), nt, nvh);
      const std::string tag = std::string(with_q ? " (b/a riding a q4 GEMV, " : " (b/a GEMV epilogue, ") +
                              std::to_string(nt) + " tokens)";
      report(("gdn_gates beta" + tag).c_str(), cb, g.down(db_, cb.size()), 1e-5);
      report(("gdn_gates g" + tag).c_str(), ca, g.down(da_, ca.size()), 1e-4);
      // (5 tokens and more take the fused q4 GEMM, bf16 products: bf16 tolerance)
      if (with_q) report(("q4 GEMV" + tag).c_str(), cq, g.down(dq, cq.size()), qgemm_takes(nt) ? 1e-2 : 1e-4);
      for (float* p : {dxx, db_, da_, dq}) g.i->buffer_free(g.c, p);
      free_weight(g, wb);
      free_weight(g, wa);
      free_weight(g, wq);
    }
  // few-row GEMVs without gates riding a q4 GEMV (a MoE layer's shared-expert gate/up with the router's 256 rows and
  // the shared expert's one-row gate, forward.cpp mlp)
  for (int nt : {1, 2}) {
    const int C = 2048, R = 1024;
    W wq = make_weight(g, SPLASH_Q4, R, C), wr = make_weight(g, SPLASH_F32, 256, C), w1 = make_weight(g, SPLASH_BF16, 1, C);
    auto xx = randv(size_t(nt) * C);
    std::vector<float> cq(size_t(nt) * R), cr(size_t(nt) * 256), c1(static_cast<size_t>(nt), 0.f);
    cpu.i->matmul(cpu.c, &wq.h, xx.data(), nt, cq.data(), R);
    cpu.i->matmul(cpu.c, &w1.h, xx.data(), nt, c1.data(), 1);
    cpu.i->matmul(cpu.c, &wr.h, xx.data(), nt, cr.data(), 256);
    float* dxx = g.up(xx);
    float *dq = static_cast<float*>(g.alloc(cq.size() * 4)), *dr = static_cast<float*>(g.alloc(cr.size() * 4));
    float* d1 = static_cast<float*>(g.alloc(c1.size() * 4));
    g.i->matmul(g.c, &wq.d, dxx, nt, dq, R);
    g.i->matmul(g.c, &w1.d, dxx, nt, d1, 1);
    g.i->matmul(g.c, &wr.d, dxx, nt, dr, 256);
    const std::string tag = " (rows riding a q4 GEMV, " + std::to_string(nt) + " tokens)";
    report(("q4 GEMV" + tag).c_str(), cq, g.down(dq, cq.size()), 1e-4);
    report(("256-row fp32 GEMV" + tag).c_str(), cr, g.down(dr, cr.size()), 1e-5);
    report(("1-row bf16 GEMV" + tag).c_str(), c1, g.down(d1, c1.size()), 1e-5);
    for (float* p : {dxx, dq, dr, d1}) g.i->buffer_free(g.c, p);
    free_weight(g, wq);
    free_weight(g, wr);
    free_weight(g, w1);
  }
  // the recurrence of a decode step (1 or 2 tokens; 3 are not fused) followed by the gated RMSNorm over its output
  // (in place, as the model calls it); a synchronize between the two keeps them apart (the same bits expected)
  for (int T : {1, 2, 3}) {
    const int nk = 2, nv = 6, dk = 128, dv = 128;
    const int64_t stride = 2 * nk * dk + nv * dv;
    auto qkv = randv(size_t(T) * stride), beta = randv(size_t(T) * nv, 0.f, 1.f), gg = randv(size_t(T) * nv, -2.f, 0.f);
    auto st = randv(size_t(nv) * dk * dv, -0.1f, 0.1f), z = randv(size_t(T) * nv * dv), w = randv(dv);
    std::vector<float> out(size_t(T) * nv * dv);
    auto sr = st;
    splash_gdn_args a{T, nk, nv, dk, dv, qkv.data(), qkv.data() + nk * dk, qkv.data() + 2 * nk * dk, beta.data(),
                      gg.data(), stride, stride, sr.data(), out.data()};
    cpu.i->gdn_recurrent(cpu.c, &a);
    cpu.i->gated_rmsnorm(cpu.c, out.data(), z.data(), w.data(), T * nv, dv, 1e-6f, out.data());
    std::vector<float> got[2], gst[2];
    float *dq = g.up(qkv), *db = g.up(beta), *dg = g.up(gg), *dz = g.up(z), *dw = g.up(w);
    for (int apart : {0, 1}) {
      float *ds = g.up(st), *dout = static_cast<float*>(g.alloc(out.size() * 4));
      splash_gdn_args ad{T, nk, nv, dk, dv, dq, dq + nk * dk, dq + 2 * nk * dk, db, dg, stride, stride, ds, dout};
      g.i->gdn_recurrent(g.c, &ad);
      if (apart) g.i->synchronize(g.c);
      g.i->gated_rmsnorm(g.c, dout, dz, dw, T * nv, dv, 1e-6f, dout);
      got[apart] = g.down(dout, out.size());
      gst[apart] = g.down(ds, sr.size());
      g.i->buffer_free(g.c, ds);
      g.i->buffer_free(g.c, dout);
    }
    const std::string tag = " (gdn + gated_rmsnorm, " + std::to_string(T) + " tokens)";
    report(("out" + tag).c_str(), out, got[0], 1e-4);
    report(("state" + tag).c_str(), sr, gst[0], 1e-4);
    const bool same = got[0] == got[1] && gst[0] == gst[1];
    std::printf("%s the unfused kernels' bits%s\n", same ? "ok  " : "FAIL", tag.c_str());
    g_fail += !same;
    for (float* p : {dq, db, dg, dz, dw}) g.i->buffer_free(g.c, p);
  }
}

// The MoE layer with its shared expert in two launches (cuda_moe_fused.cu) against the CPU, and against the unfused
// path (SPLASH_MOE_FUSED=0: routing, expert GEMVs, SwiGLU, combine, then the shared expert's SwiGLU, down GEMV and
// gated add), whose bits it keeps at 1–4 tokens; also without a shared expert, with 400 experts (16 per lane), and
// with ties across the top-k boundary.
void test_moe_fused(Be& cpu, Be& g) {
  DefaultGemvs pin(g);
  struct Case {
    int N;
    splash_dtype dt;
    int E, K, H, I, Is;
  };
  const Case cases[] = {{1, SPLASH_Q4, 64, 8, 256, 128, 128}, {2, SPLASH_Q4, 64, 8, 256, 128, 64},
                        {3, SPLASH_Q8, 32, 4, 256, 192, 128}, {4, SPLASH_Q4, 64, 10, 512, 128, 256},
                        {1, SPLASH_Q4, 64, 8, 256, 128, 0},   {2, SPLASH_Q4, 400, 8, 256, 128, 128}, {1, SPLASH_Q8, 32, 5, 256, 128, 128},
                        {16, SPLASH_Q4, 64, 8, 256, 128, 128}};
  for (const Case& cs : cases) {
    const int N = cs.N, E = cs.E, K = cs.K, H = cs.H, I = cs.I, Is = cs.Is;
    W wg = make_weight(g, cs.dt, I, H, E), wu = make_weight(g, cs.dt, I, H, E), wd = make_weight(g, cs.dt, H, I, E);
    W sd = make_weight(g, cs.dt, H, Is > 0 ? Is : 64);
    const auto x = randv(size_t(N) * H);
    auto lg = randv(size_t(N) * E, -2, 2);
    if (E == 64 && K == 8)  // ten experts tie at the top: the eight lowest of them are routed, in ascending order
      for (int t = 0; t < N; ++t)
        for (int e : {60, 3, 35, 40, 9, 50, 17, 22, 61, 1}) lg[size_t(t) * E + e] = 2.5f;
    const auto sgv = randv(size_t(N) * (Is > 0 ? Is : 1), -2, 2), suv = randv(size_t(N) * (Is > 0 ? Is : 1), -2, 2);
    const auto gate = randv(size_t(N), -2, 2);
    std::vector<float> out(size_t(N) * H), shc(size_t(N) * H);
    auto lr = lg, sgc = sgv;
    splash_moe_args a{N, E, K, 1, x.data(), lr.data(), &wg.h, &wu.h, &wd.h, out.data()};
    if (Is > 0) a.sh_g = sgc.data(), a.sh_u = suv.data(), a.sh_down = &sd.h, a.sh_gate = gate.data(), a.sh_out = shc.data();
    cpu.i->moe(cpu.c, &a);
    std::vector<float> got[2];
    for (int unfused = 0; unfused < 2; ++unfused) {
      float* dout = static_cast<float*>(g.alloc(out.size() * 4));
      float* dsh = static_cast<float*>(g.alloc(out.size() * 4));
      float *dx = g.up(x), *dl = g.up(lg), *dsg = g.up(sgv), *dsu = g.up(suv), *dgate = g.up(gate);
      splash_moe_args ad{N, E, K, 1, dx, dl, &wg.d, &wu.d, &wd.d, dout};
      if (Is > 0) ad.sh_g = dsg, ad.sh_u = dsu, ad.sh_down = &sd.d, ad.sh_gate = dgate, ad.sh_out = dsh;
      {
        KeepOptions keep(*g.b);
        keep.o.moe_fused_max = unfused ? 0 : 128;
        g.i->moe(g.c, &ad);
      }
      got[unfused] = g.down(dout, out.size());
      for (float* p : {dout, dsh, dx, dl, dsg, dsu, dgate}) g.i->buffer_free(g.c, p);
    }
    char what[96];
    std::snprintf(what, sizeof what, "moe fused %s E=%d k=%d H=%d I=%d shared=%d tokens=%d", cs.dt == SPLASH_Q4 ? "q4" : "q8", E,
                  K, H, I, Is, N);
    report(what, out, got[0], 3e-4);
    // the unfused path's shared down projection takes the bf16 q4 GEMM from 5 tokens
    report((std::string(what) + " (unfused)").c_str(), out, got[1], N > 4 ? 1e-2 : 3e-4);
    if (N <= 4) {
      const bool same = got[0] == got[1];
      std::printf("%s the unfused kernels' bits (%s)\n", same ? "ok  " : "FAIL", what);
      g_fail += !same;
    }
    for (W* w : {&wg, &wu, &wd, &sd}) free_weight(g, *w);
  }
}

}  // namespace splash::gputest
