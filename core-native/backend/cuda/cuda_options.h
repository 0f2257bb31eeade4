// The CUDA backend's options: every setting that changes which kernel runs, in one typed object. It is read from
// the environment once, when the backend is created (cuda_options_from_env), and kept in the backend's context;
// tests and benchmarks change it afterwards through get_proc_address("splash_cuda_options"), which returns a pointer
// to it. Plain C++ (no CUDA headers): the kernel choice (kernel_choice.h) and the CPU tests read it too.
// docs/native-core.md lists the environment variables with their defaults and who needs them.
#pragma once
#include <cstdlib>
#include <cstring>
#include <string>

namespace splash::cuda {

struct CudaOptions {
  // ---- matmuls (kernel_choice.h)
  bool precise = false;  // fp32 activations in every matmul (no int8 levels, no bf16 GEMM): the parity checks
  bool cublas = true;    // prefill GEMMs through cuBLAS when it loads ($SPLASH_CUBLAS=0: the built-in WMMA GEMM)
  // q4/q8 GEMV launches of this many tokens up to 8 run on the integer tensor cores, fewer on dp4a (0: never;
  // $SPLASH_GEMV_MMA). Measured faster at 8 tokens, slower at 4 and 1.
  int gemv_mma = 8;
  // q4/q8 GEMV launches of up to this many tokens stream the weights through shared memory (cuda_gemv_stream.cu;
  // 0 = never, at most 4). Measured faster at 1 and 2 tokens, slower at 4.
  int gemv_stream = 2;
  // q4 matmuls of qgemm_min..qgemm_max tokens take the fused bf16 GEMM (cuda_qgemm.cu; $SPLASH_QGEMM_MIN / _MAX, a
  // max of 0 turns it off); qgemm_ks: columns a stage, 128 or 256 ($SPLASH_QGEMM_KS)
  int qgemm_min = 5, qgemm_max = 64, qgemm_ks = 128;
  // the dp4a GEMV's schedule: rows per warp (1, 2 or 4) and the one-token column-loop unroll (2 or 4); the
  // benchmark compares them (gpu_bench.cpp), the defaults are the measured best
  int gemv_rows = 4, gemv_unroll = 2;
  // ---- other kernels
  int attn_tc = -1;        // tensor-core attention: -1 by shape, 0 never, 1 whenever the shape allows ($SPLASH_ATTN_TC)
  bool attn_gqa = true;    // few-token attention: all query heads of a K/V head in one block ($SPLASH_ATTN_GQA=0: not)
  int gdn_chunked = -1;    // chunked GDN: -1 past kGdnFewTokens, 0 never, 1 from 2 tokens on ($SPLASH_GDN_CHUNKED)
  bool moe_grouped = true;  // the expert-grouped GEMM for MoE prefill ($SPLASH_MOE_GROUPED=0: the host's routing)
  int moe_gemv_max = 128;   // MoE layers of up to this many tokens take the expert-indexed GEMVs ($SPLASH_MOE_GEMV_MAX)
  int moe_fused_max = 2;    // MoE layers of up to this many tokens take the two-launch fused form ($SPLASH_MOE_FUSED)
  int expert_q4 = 1;        // q4 expert GEMM form: 0 wmma, 1 one warp along the slots, 2 two ($SPLASH_EXPERT_Q4)
  bool expert_glu = true;   // q4 experts: gate, up and SwiGLU in one launch ($SPLASH_EXPERT_GLU=0: apart)
  bool pdl_small = true;    // the decode step's small kernels with programmatic dependent launch ($SPLASH_PDL_SMALL=0)
  bool fuse_gates = true;   // the GDN gates as the b/a GEMVs' epilogue ($SPLASH_GATES_FUSED=0: their own kernel)
  // measurement only (cuda_probe.cu): the backend slots that run twice or not at all, comma-separated
  // ($SPLASH_CUDA_TWICE, $SPLASH_CUDA_SKIP; applied when the backend is created), and from them the few-row GEMV
  // launched 1 (normal), 0 (skip) or 2 times
  std::string probe_twice, probe_skip;
  int probe_f_row = 0;
};

// The options as the environment sets them (unset or empty variables keep the defaults above).
inline CudaOptions cuda_options_from_env() {
  CudaOptions o;
  auto env = [](const char* name) -> const char* {
    const char* v = std::getenv(name);
    return v && *v ? v : nullptr;
  };
  auto flag = [&](const char* name, bool& out) {
    if (const char* v = env(name)) out = v[0] != '0';
  };
  auto num = [&](const char* name, int& out) {
    if (const char* v = env(name)) out = std::atoi(v);
  };
  auto force = [&](const char* name, int& out) {  // 1 / 0 force a path on or off; unset: by shape
    if (const char* v = env(name)) out = v[0] == '1' ? 1 : v[0] == '0' ? 0 : -1;
  };
  flag("SPLASH_CUBLAS", o.cublas);
  num("SPLASH_GEMV_MMA", o.gemv_mma);
  num("SPLASH_QGEMM_MIN", o.qgemm_min);
  num("SPLASH_QGEMM_MAX", o.qgemm_max);
  num("SPLASH_QGEMM_KS", o.qgemm_ks);
  force("SPLASH_ATTN_TC", o.attn_tc);
  flag("SPLASH_ATTN_GQA", o.attn_gqa);
  force("SPLASH_GDN_CHUNKED", o.gdn_chunked);
  flag("SPLASH_MOE_GROUPED", o.moe_grouped);
  num("SPLASH_MOE_GEMV_MAX", o.moe_gemv_max);
  num("SPLASH_MOE_FUSED", o.moe_fused_max);
  if (const char* v = env("SPLASH_EXPERT_Q4"))
    o.expert_q4 = std::strcmp(v, "wmma") == 0 ? 0 : std::strcmp(v, "w2") == 0 ? 2 : 1;
  flag("SPLASH_EXPERT_GLU", o.expert_glu);
  flag("SPLASH_PDL_SMALL", o.pdl_small);
  flag("SPLASH_GATES_FUSED", o.fuse_gates);
  if (const char* v = env("SPLASH_CUDA_TWICE")) o.probe_twice = v;
  if (const char* v = env("SPLASH_CUDA_SKIP")) o.probe_skip = v;
  return o;
}

}  // namespace splash::cuda
