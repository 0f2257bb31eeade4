#!/usr/bin/env node
// Builds llama.cpp's CUDA backend for the H200 (sm_90) from the source node-llama-cpp ships, and packs node-llama-cpp
// with it for `scripts/gpu-http-bench.sh`, so that `splash bench --peer llama.cpp` runs side by side on the GPU.
//
// Why: node-llama-cpp's prebuilt CUDA backend (a 159 MB libggml-cuda.so for sm_86/89/120/121, no sm_90) does not fit
// what the GPU machine carries, and nothing can be built from a download there. This machine has nvcc but no GPU, so
// the backend is compiled here, for sm_90 only, from the llama.cpp release bundled in the node-llama-cpp package
// (llama/gitRelease.bundle), and replaces the prebuilt one next to the prebuilt libggml-base.so it was built with.
//
// To compile in reasonable time on a small machine, only the kernel instances a Splash GGUF export can reach are
// built: matmul (MMQ) for Q4_0 and Q8_0, flash attention for head sizes 128 and 256. The other instances are
// defined by a stub that aborts, so a model outside that set fails loudly instead of running something else.
// Nothing else is changed: the kernels that are built are llama.cpp's own, with its default options.
//
// Needs: the peer installed (`NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm i --prefix /tmp/peer -E node-llama-cpp@3.21.1`)
// with its optional @node-llama-cpp/linux-x64-cuda package; cuBLAS 13 headers and library for linking
// (`pip download --no-deps nvidia-cublas==13.1.1.3` and unzip it; CUBLAS_DIR = its nvidia/cu13 folder); nvcc 13.
// Usage: CUBLAS_DIR=… node scripts/peer-cuda.mjs build [peer prefix] [work dir]   (about an hour on 2 cores)
//        node scripts/peer-cuda.mjs pack [peer prefix] [work dir] OUT               (OUT/peer.tar.xz)
import {spawnSync} from 'node:child_process'
import {existsSync, readFileSync, readdirSync, statSync, writeFileSync, mkdirSync, cpSync, rmSync} from 'node:fs'
import {cpus} from 'node:os'
import path from 'node:path'

const [verb, prefix = '/tmp/peer', work = '/tmp/peer-cuda', out] = process.argv.slice(2)
const lib = path.join(prefix, 'node_modules/node-llama-cpp')
const bins = path.join(prefix, 'node_modules/@node-llama-cpp/linux-x64-cuda/bins/linux-x64-cuda')
const src = path.join(work, 'src')
const build = path.join(work, 'build')
const instances = path.join(src, 'ggml/src/ggml-cuda/template-instances')

/** What a Splash GGUF export needs: its quant types and the head sizes of the families' attention. */
const MMQ_TYPES = new Set(['q4_0', 'q8_0'])
const HEAD_SIZES = new Set([128, 256])

function run(cmd, args, opts = {}) {
  console.log(`$ ${cmd} ${args.join(' ')}`)
  const r = spawnSync(cmd, args, {stdio: 'inherit', ...opts})
  if (r.status !== 0) throw new Error(`${cmd} failed (${r.status})`)
}

/** Keeps the instances named above and turns every other one into an explicit instantiation of an aborting stub. */
function trim() {
  const stubs = {mmq: [], tile: [], mma: []}
  for (const f of readdirSync(instances)) {
    const file = path.join(instances, f)
    let m
    if ((m = /^mmq-instance-(\w+)\.cu$/.exec(f))) {
      if (MMQ_TYPES.has(m[1])) continue
      stubs.mmq.push(...[...readFileSync(file, 'utf8').matchAll(/DECL_MMQ_CASE\((\w+)\);/g)].map(x => x[1]))
      writeFileSync(file, '// trimmed by scripts/peer-cuda.mjs: see mmq-peer-stubs.cu\n')
    } else if (/^fattn-(tile|mma-f16)-instance-/.test(f)) {
      const kind = f.startsWith('fattn-tile') ? 'tile' : 'mma'
      const text = readFileSync(file, 'utf8')
      const re = kind === 'tile' ? /DECL_FATTN_TILE_CASE\(\s*(\d+),\s*(\d+)\);/g : /DECL_FATTN_MMA_F16_CASE\((\d+), (\d+), (\d+), (\d+)\);/g
      const kept = text.replace(re, (line, dkq, ...rest) => {
        if (HEAD_SIZES.has(Number(dkq))) return line
        stubs[kind].push([dkq, ...rest.slice(0, kind === 'tile' ? 1 : 3)].join(', '))
        return `// ${line} (stub)`
      })
      writeFileSync(file, kept)
    }
  }
  const stub = [
    '// Written by scripts/peer-cuda.mjs: kernel instances this peer build leaves out. Each aborts when called.',
    '#include <cstdio>',
    '#include <cstdlib>',
    '#include <cuda_runtime.h>',
    '#include "ggml.h"',
    'struct ggml_backend_cuda_context;',
    'struct mmq_args;',
    'static void missing(const char * what) { fprintf(stderr, "peer build: %s was not compiled (scripts/peer-cuda.mjs)\\n", what); abort(); }',
    'template <ggml_type type> void mul_mat_q_case(ggml_backend_cuda_context &, const mmq_args &, cudaStream_t) { missing("mul_mat_q_case"); }',
    'template <int DKQ, int DV> void ggml_cuda_flash_attn_ext_tile_case(ggml_backend_cuda_context &, ggml_tensor *) { missing("flash attention (tile)"); }',
    'template <int DKQ, int DV, int ncols1, int ncols2> void ggml_cuda_flash_attn_ext_mma_f16_case(ggml_backend_cuda_context &, ggml_tensor *) { missing("flash attention (mma)"); }',
    ...stubs.mmq.map(t => `template void mul_mat_q_case<${t}>(ggml_backend_cuda_context &, const mmq_args &, cudaStream_t);`),
    ...stubs.tile.map(a => `template void ggml_cuda_flash_attn_ext_tile_case<${a}>(ggml_backend_cuda_context &, ggml_tensor *);`),
    ...stubs.mma.map(a => `template void ggml_cuda_flash_attn_ext_mma_f16_case<${a}>(ggml_backend_cuda_context &, ggml_tensor *);`),
  ]
  writeFileSync(path.join(instances, 'mmq-peer-stubs.cu'), stub.join('\n') + '\n')
  console.log(`stubbed ${stubs.mmq.length} MMQ types, ${stubs.tile.length} tile and ${stubs.mma.length} MMA flash-attention instances`)
}

function doBuild() {
  const cublas = process.env.CUBLAS_DIR
  if (!cublas || !existsSync(path.join(cublas, 'include/cublas_v2.h'))) throw new Error('CUBLAS_DIR must name a folder with include/cublas_v2.h and lib/libcublas.so.13')
  if (!existsSync(src)) run('git', ['clone', '-q', path.join(lib, 'llama/gitRelease.bundle'), src])
  if (!existsSync(path.join(instances, 'mmq-peer-stubs.cu'))) trim()
  // libcuda is linked by name only; the driver's own is loaded at run time on the GPU machine
  const stubDir = path.join(work, 'libcuda-stub')
  mkdirSync(stubDir, {recursive: true})
  const syms = ['cuDeviceGet', 'cuDeviceGetAttribute', 'cuGetErrorString', 'cuMemAddressFree', 'cuMemAddressReserve', 'cuMemCreate',
    'cuMemGetAllocationGranularity', 'cuMemMap', 'cuMemRelease', 'cuMemSetAccess', 'cuMemUnmap']
  writeFileSync(path.join(stubDir, 'stub.c'), syms.map(s => `int ${s}(void) { return 999; }\n`).join(''))
  run('gcc', ['-shared', '-fPIC', '-o', path.join(stubDir, 'libcuda.so'), '-Wl,-soname,libcuda.so.1', path.join(stubDir, 'stub.c')])
  run('cmake', ['-S', src, '-B', build, '-DCMAKE_BUILD_TYPE=Release', '-DGGML_CUDA=ON', '-DGGML_BACKEND_DL=ON', '-DGGML_NATIVE=OFF',
    '-DGGML_CPU=OFF', '-DBUILD_SHARED_LIBS=ON', '-DCMAKE_CUDA_ARCHITECTURES=90-real', '-DCMAKE_PLATFORM_NO_VERSIONED_SONAME=ON',
    '-DLLAMA_BUILD_TESTS=OFF', '-DLLAMA_BUILD_EXAMPLES=OFF', '-DLLAMA_BUILD_TOOLS=OFF', '-DLLAMA_BUILD_SERVER=OFF', '-DLLAMA_CURL=OFF', '-DLLAMA_OPENSSL=OFF',
    `-DCUDA_cublas_LIBRARY=${cublas}/lib/libcublas.so.13`, `-DCUDA_cublasLt_LIBRARY=${cublas}/lib/libcublasLt.so.13`,
    `-DCUDA_cuda_driver_LIBRARY=${stubDir}/libcuda.so`, `-DCMAKE_CUDA_FLAGS=-I${cublas}/include`, `-DCMAKE_CXX_FLAGS=-I${cublas}/include`])
  run('cmake', ['--build', build, '--target', 'ggml-cuda', '-j', String(cpus().length)])
}

function doPack() {
  if (!out) throw new Error('pack needs an output folder')
  const built = path.join(build, 'bin/libggml-cuda.so')
  if (!existsSync(built)) throw new Error(`missing ${built}: run build first`)
  const stage = path.join(work, 'stage')
  rmSync(stage, {recursive: true, force: true})
  const nm = path.join(stage, 'node_modules')
  mkdirSync(nm, {recursive: true})
  // node-llama-cpp and its dependencies, without the llama.cpp sources and the other platforms' builds
  for (const d of readdirSync(path.join(prefix, 'node_modules'))) {
    if (d === '@node-llama-cpp' || d === '.bin' || d.startsWith('.')) continue
    cpSync(path.join(prefix, 'node_modules', d), path.join(nm, d), {recursive: true, filter: p => !p.startsWith(path.join(prefix, 'node_modules/node-llama-cpp/llama'))})
  }
  cpSync(path.join(lib, 'llama/binariesGithubRelease.json'), path.join(nm, 'node-llama-cpp/llama/binariesGithubRelease.json'))
  cpSync(path.join(lib, 'llama/llama.cpp.info.json'), path.join(nm, 'node-llama-cpp/llama/llama.cpp.info.json'))
  const cudaPkg = path.join(prefix, 'node_modules/@node-llama-cpp/linux-x64-cuda')
  const dest = path.join(nm, '@node-llama-cpp/linux-x64-cuda')
  // the CPU variants: the x64 baseline and the one the GPU machine's cores take (Sapphire Rapids or Zen 4 class)
  const keepCpu = /libggml-cpu-(x64|haswell|icelake|sapphirerapids|zen4)\.so$/
  cpSync(cudaPkg, dest, {recursive: true, filter: p => !/libggml-cuda\.so$/.test(p) && (!/libggml-cpu-/.test(p) || keepCpu.test(p))})
  cpSync(built, path.join(dest, 'bins/linux-x64-cuda/libggml-cuda.so'))
  mkdirSync(out, {recursive: true})
  run('tar', ['-C', stage, '-cJf', path.join(out, 'peer.tar.xz'), 'node_modules'], {env: {...process.env, XZ_OPT: '-T0 -9'}})
  console.log(`packed ${path.join(out, 'peer.tar.xz')}: ${(statSync(path.join(out, 'peer.tar.xz')).size / 2 ** 20).toFixed(1)} MiB`)
}

if (verb === 'build') doBuild()
else if (verb === 'pack') doPack()
else throw new Error('usage: node scripts/peer-cuda.mjs build|pack [peer prefix] [work dir] [OUT]')
