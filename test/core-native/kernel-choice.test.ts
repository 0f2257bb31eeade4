// The CUDA backend's matmul kernel choice (core-native/backend/cuda/kernel_choice.h) is a pure function of the shape,
// the device and the options: the kernel test binary built beside the addon runs the real function on any machine
// (`splash_kernel_test kernel-choice`), and these are the choices the backend makes on an H100/H200 (132 SMs).
import t from 'tap'
import {spawnSync} from 'node:child_process'
import path from 'node:path'
import {addonPath} from '../../src/native/native.js'

const exe = path.join(path.dirname(addonPath), '..', 'splash_kernel_test')

function choose(...args: string[]): Map<string, string> {
  const r = spawnSync(exe, ['kernel-choice', ...args], {encoding: 'utf8', timeout: 60_000})
  if (r.status !== 0) throw new Error(`splash_kernel_test kernel-choice ${args.join(' ')}: ${r.status} ${r.stderr}`)
  const out = new Map<string, string>()
  for (const line of r.stdout.trim().split('\n')) {
    const sp = line.indexOf(' ')
    out.set(line.slice(0, sp), line.slice(sp + 1))
  }
  return out
}

t.test('decode and prefill shapes under the default options', async t => {
  const want: Record<string, string> = {
    // q4 GEMVs: the streaming form for 1–2 tokens where the columns allow it, dp4a otherwise
    'q4:10240:5120:1': 'gemv_q4 groups=1 launch=1 forms=stream',
    'q4:10240:5120:2': 'gemv_q4 groups=1 launch=2 forms=stream',
    'q4:10240:5120:3': 'gemv_q4 groups=1 launch=3 forms=dp4a',
    'q4:10240:2560:1': 'gemv_q4 groups=1 launch=1 forms=dp4a',
    // 5 to 64 q4 tokens: the fused GEMM, grouped too
    'q4:10240:5120:5': 'qgemm groups=1 launch=5 forms=-',
    'q4:17408:5120:64': 'qgemm groups=1 launch=64 forms=-',
    // q8 up to 32 tokens stays GEMVs in launches of 8: the tensor cores at 8 tokens, dp4a below
    'q8:10240:5120:8': 'gemv_q8 groups=1 launch=8 forms=mma',
    'q8:10240:5120:20': 'gemv_q8 groups=1 launch=20 forms=mma,mma,dp4a',
    // more tokens: the bf16 tensor-core GEMM
    'q8:10240:5120:33': 'gemm_bf16 groups=0 launch=33 forms=-',
    'q4:10240:5120:65': 'gemm_bf16 groups=0 launch=65 forms=-',
    'bf16:10240:5120:100': 'gemm_bf16 groups=0 launch=100 forms=-',
    // exact weights with few rows (GDN b/a, routers): fp32 activations, a block per row, grouped
    'q4:48:5120:1:1': 'gemv_row_f groups=1 launch=1 forms=-',
    // many rows in fp32 activations (an LM head in bf16): a warp per row
    'bf16:248320:5120:1': 'gemv_f groups=0 launch=1 forms=-',
    'bf16:1000:1001:3': 'gemv_scalar groups=0 launch=3 forms=-',
    // f32 weights or exact ones with many tokens: cuBLAS in fp32
    'f32:100:64:20': 'sgemm groups=0 launch=20 forms=-',
    'q4:48:5120:40:1': 'sgemm groups=0 launch=40 forms=-',
  }
  const got = choose(...Object.keys(want))
  for (const [shape, choice] of Object.entries(want)) t.equal(got.get(shape), choice, shape)
})

t.test('the options and the device move the choice', async t => {
  t.equal(choose('cublas=0', 'f32:100:64:20').get('f32:100:64:20'), 'gemv_row_f groups=0 launch=8 forms=-', 'no cuBLAS: few-row GEMVs of 8 tokens')
  t.equal(choose('cublas=0', 'sms=8', 'f32:100:64:20').get('f32:100:64:20'), 'gemv_f groups=0 launch=8 forms=-', 'a small device: rows ≥ 4 × SMs')
  const precise = choose('precise=1', 'q4:10240:5120:1', 'q4:10240:5120:40', 'q4:10240:5120:8')
  t.equal(precise.get('q4:10240:5120:1'), 'gemv_f groups=0 launch=1 forms=-', 'precise: fp32 activations')
  t.equal(precise.get('q4:10240:5120:40'), 'sgemm groups=0 launch=40 forms=-', 'precise: no bf16 GEMM')
  t.equal(precise.get('q4:10240:5120:8'), 'gemv_f groups=0 launch=8 forms=-', 'precise: no fused q4 GEMM')
  t.equal(choose('qgemm_max=0', 'q4:10240:5120:8').get('q4:10240:5120:8'), 'gemv_q4 groups=1 launch=8 forms=mma', 'fused GEMM off')
  t.equal(choose('gemv_mma=0', 'q8:10240:5120:8').get('q8:10240:5120:8'), 'gemv_q8 groups=1 launch=8 forms=dp4a', 'tensor-core GEMV off')
  t.equal(choose('gemv_stream=4', 'q4:10240:5120:3').get('q4:10240:5120:3'), 'gemv_q4 groups=1 launch=3 forms=stream')
  t.equal(choose('gemv_rows=2', 'q4:10240:5120:1').get('q4:10240:5120:1'), 'gemv_q4 groups=1 launch=1 forms=dp4a', 'the benchmark schedules run on dp4a')
  t.equal(choose('gemv_unroll=4', 'q4:10240:5120:1', 'q4:10240:5120:2').get('q4:10240:5120:2'), 'gemv_q4 groups=1 launch=2 forms=stream', 'unroll 4 is one token only')
})

t.test('bad arguments are refused', async t => {
  for (const bad of ['q3:1:1:1', 'q4:1:1', 'warp=2']) {
    const r = spawnSync(exe, ['kernel-choice', bad], {encoding: 'utf8'})
    t.equal(r.status, 2, bad)
    t.match(r.stderr, /kernel-choice: /)
  }
})
