// Package-specialised CUDA kernels: the shapes found in a package, the generated source, and a real nvcc build
// into a tiny synthetic package (nvcc is present wherever the CUDA backend builds: /usr/local/cuda/bin/nvcc here
// and on CI). Whether the kernels run right is checked on a GPU (splash_gpu_test model / bench).
import t from 'tap'
import {mkdirSync, mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {
  buildKernels,
  coreNativeDir,
  CUDA_SM90_FILE,
  findNvcc,
  gemvShapes,
  packageGemvShapes,
  specAbi,
  specSource,
} from '../../src/package/builder/kernels-cuda.js'
import {readManifest} from '../../src/package/manifest.js'
import {native} from '../../src/native/native.js'
import {synthPackage} from '../../src/package/synth/synth.js'
import {checkPackage} from '../../src/package/verify.js'

const root = mkdtempSync(join(tmpdir(), 'splash-kernels-'))

t.test('gemvShapes: q4/q8 pairs of weight and scales, stacked experts, bf16 and odd tensors ignored', async t => {
  const shapes = gemvShapes([
    {name: 'a.weight', dtype: 'U32', shape: [256, 5120 / 8]},
    {name: 'a.scales', dtype: 'BF16', shape: [256, 5120 / 64]},
    {name: 'a.biases', dtype: 'BF16', shape: [256, 5120 / 64]},
    {name: 'b.weight', dtype: 'U32', shape: [100, 5120 / 8]}, // same shape as a: once
    {name: 'b.scales', dtype: 'BF16', shape: [100, 5120 / 64]},
    {name: 'r.weight', dtype: 'U32', shape: [16, 5120 / 4]}, // q8
    {name: 'r.scales', dtype: 'BF16', shape: [16, 5120 / 64]},
    {name: 'e.weight', dtype: 'U32', shape: [8, 64, 512 / 8]}, // stacked experts
    {name: 'e.scales', dtype: 'BF16', shape: [8, 64, 512 / 64]},
    {name: 'd.weight', dtype: 'U32', shape: [64, 17408 / 8]},
    {name: 'd.scales', dtype: 'BF16', shape: [64, 17408 / 64]},
    {name: 'f.weight', dtype: 'BF16', shape: [64, 128]}, // bf16
    {name: 'n.weight', dtype: 'U32', shape: [64, 16]}, // no scales
    {name: 'w.weight', dtype: 'U32', shape: [64, 128 / 2]}, // 16 bits: not a GEMV shape
    {name: 'w.scales', dtype: 'BF16', shape: [64, 2]},
    {name: 'norm', dtype: 'F32', shape: [64]},
  ])
  t.same(shapes, [
    {bits: 4, cols: 512},
    {bits: 4, cols: 5120},
    {bits: 4, cols: 17408},
    {bits: 8, cols: 5120},
  ])
  t.same(gemvShapes([]), [])
  const src = specSource(shapes)
  t.match(src, '#include "backend/cuda/gemv_q.cuh"')
  t.match(src, 'SPLASH_SPEC_TABLE(4, 4, 512, 4, 5120, 4, 17408, 8, 5120)')
  t.match(src, 'SPLASH_SPEC_GEMV(8, 5120)')
  t.throws(() => specSource([]))
})

t.test('the ABI comes from the header; a missing nvcc is a clear error', async t => {
  const abi = await specAbi()
  t.ok(Number.isInteger(abi) && abi >= 1, `SPLASH_SPEC_ABI ${abi}`)
  t.throws(() => findNvcc({SPLASH_NVCC: join(root, 'no-such-nvcc')}), {code: 'nvcc_missing'})
  t.ok(coreNativeDir().endsWith('core-native'))
})

const nvcc = findNvcc()

t.test('a q4 synthetic package gets its kernels: manifest entry, files, verification, kernel names', async t => {
  const out = join(root, 'tiny-q4')
  await synthPackage({preset: 'tiny-hybrid', out, quant: 'q4'})
  const before = await readManifest(out)
  const shapes = await packageGemvShapes(out, before)
  t.ok(shapes.length >= 2, `${shapes.length} shapes: ${JSON.stringify(shapes)}`)
  t.ok(shapes.some(s => s.bits === 4 && s.cols === 64), 'hidden 64 (q4)')
  t.ok(shapes.some(s => s.bits === 4 && s.cols === 128), 'intermediate 128 (q4)')

  const lines: string[] = []
  const m = await buildKernels(out, {nvcc, log: l => lines.push(l)})
  const abi = await specAbi()
  t.same(m.kernels, [{backend: 'cuda', arch: 'sm_90', abi, file: CUDA_SM90_FILE}])
  const entry = m.files.find(f => f.path === CUDA_SM90_FILE)
  t.ok(entry && entry.size > 0, 'listed in files')
  t.same(await readManifest(out), m, 'written to splash.json')
  t.same(await checkPackage(out, m), [], 'every file verifies (size and sha256)')
  // the other files' entries are kept as they were
  for (const f of before.files) t.same(m.files.find(g => g.path === f.path), f, `${f.path} unchanged`)

  const image = readFileSync(join(out, CUDA_SM90_FILE))
  const text = image.toString('latin1')
  t.match(text, 'splash_spec_table')
  for (const s of shapes)
    for (const nt of [1, 2, 4, 8]) {
      const name = `splash_spec${abi}_gemv_q${s.bits}_k${s.cols}_t${nt}`
      t.ok(text.includes(`${name}\0`), name)
    }
  t.ok(lines.some(l => l.startsWith('compiling')), 'logs the compile')

  // the package opens and steps; the CPU backend ignores the entry, the CUDA one (on a GPU host) uses it
  const h = await native.openModel(out, {threads: 2})
  try {
    const info = native.modelInfo(h)
    t.equal(info.specialisedKernels, info.backend === 'cuda' ? 'cuda-sm90' : null, `specialisedKernels on ${info.backend}`)
    const seq = native.createSequence(h, {maxLength: 16})
    const [r] = await native.step(h, [{seq, tokens: Int32Array.from([1, 2, 3]), logits: 'last'}])
    t.equal(r?.logits?.length, m.config.vocab_size, 'a step runs')
  } finally {
    native.closeModel(h)
  }

  // building again replaces the entry (no second one) and the file verifies again
  const again = await buildKernels(out, {nvcc})
  t.equal(again.kernels.length, 1)
  t.equal(again.files.filter(f => f.path === CUDA_SM90_FILE).length, 1)
  t.same(await checkPackage(out, again), [])

  // a changed kernel file fails verification
  writeFileSync(join(out, CUDA_SM90_FILE), Buffer.concat([image.subarray(0, image.length - 1), Buffer.from([image[image.length - 1] ^ 1])]))
  const problems = await checkPackage(out, again)
  t.equal(problems.length, 1)
  t.match(problems[0]?.detail ?? '', CUDA_SM90_FILE)
})

t.test('a bf16 package has nothing to specialise; a compile failure names nvcc', async t => {
  const out = join(root, 'tiny-bf16')
  await synthPackage({preset: 'tiny-hybrid', out, quant: 'bf16'})
  await t.rejects(buildKernels(out, {nvcc}), {code: 'no_kernels'})
  t.same((await readManifest(out)).kernels, [])

  const q4 = join(root, 'tiny-q4-broken')
  await synthPackage({preset: 'tiny-hybrid', out: q4, quant: 'q4', draft: 'dflash'})
  const fake = join(root, 'fake-core')
  mkdirSync(join(fake, 'backend', 'cuda'), {recursive: true})
  mkdirSync(join(fake, 'include'), {recursive: true})
  writeFileSync(join(fake, 'backend', 'cuda', 'gemv_q.cuh'), '#define SPLASH_SPEC_ABI 1\nthis is not C++\n')
  await t.rejects(buildKernels(q4, {nvcc, coreDir: fake}), {code: 'kernel_build_failed', message: /nvcc failed/})
  t.same((await readManifest(q4)).kernels, [], 'the manifest is untouched')
  await t.rejects(buildKernels(q4, {nvcc: join(root, 'no-such-nvcc')}), {code: 'nvcc_missing'})
})
