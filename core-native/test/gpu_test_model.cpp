// splash_gpu_test's whole-model checks: a package's logits on CUDA against the CPU backend (prefill, decode
// steps as graphs, a verify step, a rollback, the draft, a restored prefix), and a package's specialised
// kernels against the generic ones.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/loader.h"
#include "model/model.h"
#include "test/gpu_test_util.h"

namespace splash::gputest {

namespace {

// Verify blocks as recorded graphs: a speculative loop (verify blocks of 5 and 16 tokens, each rolled back to a
// varying accepted prefix, then a decode) on CUDA with step graphs and without (SPLASH_CUDA_GRAPHS=0), for both
// rollback methods: every step's logits the same bits, and the loop's later verify blocks replayed as graphs. A
// graph's steps take the fp32 attention (the tensor-core form needs the start on the host), its first step too, so
// the run without graphs turns the tensor cores off after the prompt (SPLASH_ATTN_TC=0): on a package whose head_dim
// they take (the default package's 64), the first verify block of a shape would differ from its replays otherwise.
void verify_graphs(const std::string& dir) {
  const char* methods[] = {"states", "replay"};
  for (const char* method : methods) {
    setenv("SPLASH_GDN_ROLLBACK", method, 1);
    auto gpu = Model::open(dir, 0, nullptr, 0, true, "cuda");
    unsetenv("SPLASH_GDN_ROLLBACK");
    const int V = gpu->config().V;
    auto launches = reinterpret_cast<int64_t (*)(void*)>(
        gpu->backend().iface->get_proc_address(gpu->backend().ctx, "splash_cuda_graph_launches"));
    auto run = [&](std::vector<std::vector<float>>& all, bool tc_off) {
      OneSeq one(*gpu, 256);
      auto& items = one.items;
      auto step = [&](std::vector<int32_t> toks, int logits, bool verify) {
        items[0].tokens = std::move(toks);
        items[0].logits = logits;
        items[0].verify = verify;
        gpu->step(items, one.out);
        all.push_back(one.out[0]);
      };
      std::vector<int32_t> prompt;
      for (int i = 0; i < 23; ++i) prompt.push_back((i * 37 + 11) % V);
      step(prompt, 1, false);
      KeepOptions keep(gpu->backend());
      if (tc_off) keep.o.attn_tc = 0;
      for (int r = 0; r < 8; ++r) {
        const int n = r < 5 ? 5 : 16;
        std::vector<int32_t> block;
        for (int i = 0; i < n; ++i) block.push_back(int32_t((r * 31 + i * 7 + 3) % V));
        step(block, 2, true);
        gpu->truncate_sequence(one.id, gpu->find(one.id)->len - n + 1 + (r % 3));  // keep 1 to 3 tokens
        step({int32_t((r * 13 + 5) % V)}, 1, false);
      }
    };
    std::vector<std::vector<float>> a, b;
    const int64_t l0 = launches(gpu->backend().ctx);
    run(a, false);
    const int64_t used = launches(gpu->backend().ctx) - l0;
    gpu->set_step_graphs(false);
    run(b, true);
    gpu->set_step_graphs(true);
    const std::string name = dir.substr(dir.rfind('/') + 1) + " [" + method + "]: ";
    // 8 decodes and verify blocks of 5 (five) and 16 (three): at least decodes 3–8, blocks of 5 from the third
    const bool replayed = used >= 9;
    std::printf("%-44s %lld graph launches  %s\n", (name + "verify graphs").c_str(), (long long)used, replayed ? "ok" : "FAIL");
    g_fail += !replayed;
    for (size_t k = 0; k < a.size(); ++k)
      report((name + "graph vs direct, step " + std::to_string(k)).c_str(), b[k], a[k], 0);
  }
}

}  // namespace

// Whole model: prefill of a prompt (all logits), decode steps, a verify step and a rollback, a prefill keeping
// states inside it and a prefix restored from one, CUDA against
// the CPU backend with fp32 activations. `precise`: every CUDA matmul on fp32 activations too, so the
// kernels of the whole graph are checked tightly; otherwise the default (int8x2 GEMVs, bf16 GEMMs).
void test_model(const std::string& dir, bool precise) {
  auto cpu = Model::open(dir, 0, nullptr, 0, true, "cpu");
  auto gpu = Model::open(dir, 0, nullptr, 0, true, "cuda");
  {
    cuda_options(gpu->backend()).precise = precise;
  }
  const int V = cpu->config().V;
  std::vector<int32_t> prompt;
  for (int i = 0; i < 23; ++i) prompt.push_back((i * 37 + 11) % V);
  auto run = [&](Model& m, std::vector<std::vector<float>>& all) {
    OneSeq one(m, 64);
    const int32_t id = one.id;
    auto& items = one.items;
    auto& out = one.out;
    items[0].tokens = prompt;
    items[0].logits = 2;
    m.step(items, out);
    all.push_back(out[0]);
    for (int s = 0; s < 4; ++s) {
      items[0].tokens = {int32_t((s * 13 + 5) % V)};
      items[0].logits = 1;
      m.step(items, out);
      all.push_back(out[0]);
    }
    items[0].tokens = {3 % V, 9 % V, 27 % V};
    items[0].logits = 2;
    items[0].verify = true;
    m.step(items, out);
    all.push_back(out[0]);
    m.truncate_sequence(id, m.find(id)->len - 2);  // roll back inside the verify step
    items[0].tokens = {5 % V};
    items[0].logits = 1;
    items[0].verify = false;
    m.step(items, out);
    all.push_back(out[0]);
    // states kept inside a step (the prefix cache's anchors): the prompt in one step keeping lengths 9 and 17, a
    // prefix of 17 saved from the kept state and restored into a fresh sequence, which then decodes
    OneSeq kept(m, 64), back(m, 64);
    kept.items[0].tokens = prompt;
    kept.items[0].logits = 2;
    kept.items[0].snaps = {9, 17};
    m.step(kept.items, kept.out);
    all.push_back(kept.out[0]);
    const int64_t rows = m.save_rows(kept.id, 0, 17), st = m.save_state(kept.id, 17);
    m.restore(back.id, {rows}, st);
    back.items[0].tokens = {5 % V};
    back.items[0].logits = 1;
    m.step(back.items, back.out);
    all.push_back(back.out[0]);
    m.free_saved(rows);
    m.free_saved(st);
  };
  // with a draft: capture the context, draft a block, one more captured step, draft again
  auto run_draft = [&](Model& m, std::vector<std::vector<float>>& all) {
    OneSeq one(m, 64);
    const int32_t id = one.id;
    auto& items = one.items;
    auto& out = one.out;
    items[0].tokens = prompt;
    items[0].logits = 0;
    items[0].capture = true;
    m.step(items, out);
    std::vector<DraftItem> d(1);
    d[0].seq = items[0].seq;
    d[0].anchor = 5 % V;
    d[0].n = m.draft_config().B - 1;
    m.draft(d, out);
    all.push_back(out[0]);
    items[0].tokens = {5 % V};
    m.step(items, out);
    d[0].anchor = 7 % V;
    d[0].n = 3;
    m.draft(d, out);
    all.push_back(out[0]);
  };
  if (precise) {  // device memory: reported from cudaMemGetInfo and this backend's own count; --max-memory caps it
    Model::DeviceMemory dm;
    const bool has = gpu->device_memory(dm);
    const bool ok = has && dm.total > 0 && dm.free <= dm.total && dm.used > 0 && dm.used <= dm.total && dm.limit == 0;
    std::printf("%-44s free %.1f of %.1f GB, model %.3f GB  %s\n", (dir.substr(dir.rfind('/') + 1) + ": device memory").c_str(),
                dm.free / 1e9, dm.total / 1e9, dm.used / 1e9, ok ? "ok" : "FAIL");
    g_fail += !ok;
    std::string refusal;
    try {
      Model::open(dir, 0, nullptr, 0, true, "cuda", dm.used / 2);
    } catch (const Error& e) {
      refusal = std::string(e.code) + ": " + e.what();
    }
    const bool refused = refusal.rfind("out_of_memory", 0) == 0 && refusal.find("--max-memory") != std::string::npos;
    std::printf("%-44s %s  %s\n", (dir.substr(dir.rfind('/') + 1) + ": a cap of half the weights").c_str(),
                refusal.empty() ? "(loaded)" : refusal.substr(0, 90).c_str(), refused ? "ok" : "FAIL");
    g_fail += !refused;
  }
  // prefix cache: rows and state saved from one sequence and restored into another continue identically
  if (precise) {
    Model& m = *gpu;
    int32_t ida = m.create_sequence(64), idb = m.create_sequence(64);
    std::vector<StepItem> items(1);
    std::vector<std::vector<float>> out, oa, ob;
    items[0].seq = seq_of(m, ida);
    items[0].tokens = prompt;
    m.step(items, out);
    const int64_t rows = m.save_rows(ida, 0, int32_t(prompt.size())), st = m.save_state(ida);
    m.restore(idb, {rows}, st);
    items[0].tokens = {5 % V};
    items[0].logits = 1;
    m.step(items, oa);
    items[0].seq = seq_of(m, idb);
    m.step(items, ob);
    report((dir.substr(dir.rfind('/') + 1) + ": restored prefix continues as the original").c_str(), oa[0], ob[0], 0);
    m.free_saved(rows);
    m.free_saved(st);
    m.free_sequence(ida);
    m.free_sequence(idb);
  }
  std::vector<std::vector<float>> a, b;
  auto launches = reinterpret_cast<int64_t (*)(void*)>(
      gpu->backend().iface->get_proc_address(gpu->backend().ctx, "splash_cuda_graph_launches"));
  const int64_t l0 = launches(gpu->backend().ctx);
  run(*cpu, a);
  run(*gpu, b);
  {
    // decode steps replay the recorded step (not with host-routed MoE layers): at least decodes 3 and 4 (a shape
    // is recorded on its second step; a scratch buffer grown by the first decode forgets the graphs once)
    const int64_t used = launches(gpu->backend().ctx) - l0;
    // MoE layers route on the device outside precise mode (q4/q8 experts by the expert-indexed GEMVs, others by
    // the expert-grouped GEMM); in precise mode the step needs the host
    bool host_moe = false;
    for (int l = 0; l < cpu->config().L; ++l)
      if (cpu->package().find("layers." + std::to_string(l) + ".mlp.experts.gate_proj.weight")) host_moe |= precise;
    const bool ok = host_moe ? used == 0 : used >= 2;
    std::printf("%-44s %lld graph launches  %s\n", (dir.substr(dir.rfind('/') + 1) + ": decode graphs").c_str(),
                (long long)used, ok ? "ok" : "FAIL");
    g_fail += !ok;
  }
  if (cpu->has_draft()) {
    run_draft(*cpu, a);
    run_draft(*gpu, b);
  }
  const std::string name = dir.substr(dir.rfind('/') + 1) + (precise ? " [precise]: " : " [default]: ");
  const char* what[] = {"prefill 23 tokens",   "decode 1",          "decode 2",        "decode 3",
                        "decode 4",            "verify 3",          "after rollback",  "prefill keeping 9, 17",
                        "restored kept state", "draft block",       "draft after a step"};
  for (size_t i = 0; i < a.size(); ++i) {
    // default mode: the prefill GEMMs round activations to bf16, and these random-weight fixtures amplify
    // that through the layers (the per-op bounds above are the tight ones)
    report((name + what[i]).c_str(), a[i], b[i], precise ? 1e-4 : 1.5e-1);
  }
  if (cpu->vision()) test_image(*cpu, *gpu, name, precise);
  if (!precise) verify_graphs(dir);
}


// A package with specialised kernels (`splash package kernels` / tools/build_spec_kernels.py): the CUDA model
// with them against the CUDA model without (SPLASH_SPEC_KERNELS=0), the same steps on both: prefill, one-token
// decode steps (replayed as graphs after the second), steps of 2, 3 (verify) and 6 tokens (the kernels' 2-, 4-
// and 8-token forms), a rollback. The kernels do the generic kernel's arithmetic in its order, so the logits
// should be the same bits; the bound is 1e-6 and the line says whether they are identical.
void test_spec(const std::string& dir) {
  unsetenv("SPLASH_SPEC_KERNELS");
  auto spec = Model::open(dir, 0, nullptr, 0, false, "cuda");
  setenv("SPLASH_SPEC_KERNELS", "0", 1);
  auto gen = Model::open(dir, 0, nullptr, 0, false, "cuda");
  unsetenv("SPLASH_SPEC_KERNELS");
  const bool loaded = spec->specialised_kernels() == "cuda-sm90" && gen->specialised_kernels().empty();
  std::printf("%-44s %s\n", ("spec kernels loaded: " + dir).c_str(), loaded ? "ok" : "FAIL");
  g_fail += !loaded;
  const int V = spec->config().V;
  auto run = [&](Model& m, std::vector<std::vector<float>>& all) {
    OneSeq one(m, 128);
    const int32_t id = one.id;
    auto& items = one.items;
    auto& out = one.out;
    auto step = [&](std::vector<int32_t> toks, int logits, bool verify) {
      items[0].tokens = std::move(toks);
      items[0].logits = logits;
      items[0].verify = verify;
      m.step(items, out);
      all.push_back(out[0]);
    };
    std::vector<int32_t> prompt;
    for (int i = 0; i < 23; ++i) prompt.push_back((i * 37 + 11) % V);
    step(prompt, 1, false);
    for (int s = 0; s < 5; ++s) step({int32_t((s * 13 + 5) % V)}, 1, false);
    step({7 % V, 8 % V}, 2, false);
    step({3 % V, 9 % V, 27 % V}, 2, true);
    m.truncate_sequence(id, m.find(id)->len - 2);
    step({5 % V, 6 % V, 1 % V, 2 % V, 4 % V, 10 % V}, 2, false);
    step({11 % V}, 1, false);
  };
  std::vector<std::vector<float>> a, b;
  run(*spec, a);
  run(*gen, b);
  for (size_t k = 0; k < a.size(); ++k) {
    bool same = a[k].size() == b[k].size();
    for (size_t j = 0; same && j < a[k].size(); ++j) same = a[k][j] == b[k][j];
    char what[96];
    std::snprintf(what, sizeof what, "spec vs generic step %zu%s", k, same ? " (identical)" : "");
    report(what, b[k], a[k], 1e-6);
  }
}

}  // namespace splash::gputest
