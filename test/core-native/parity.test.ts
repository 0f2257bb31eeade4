// Parity with transformers: every reference fixture (tools/reference/make_fixtures.py, run on the GPU
// machine) is built into a package with the project's builder and run on the native engine. The engine
// must reproduce HF's fp32 logits for both prompts (prefill, chunked GDN), pick the same top-1 wherever the
// reference is not a near-tie, and continue each prompt greedily exactly as HF's generate did (decode,
// recurrent GDN).
import t from 'tap'
import {cp, mkdtemp, writeFile, rm} from 'node:fs/promises'
import {readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {buildPackage} from '../../src/package/builder/builder.js'
import {SafetensorsReader} from '../../src/package/safetensors.js'
import {makeTokenizer, SYNTH_CHAT_TEMPLATE} from '../../src/package/synth/synth-tokenizer.js'
import {native} from '../../src/native/native.js'
import type {Quant} from '../../src/package/manifest.js'

const FIXTURES = new URL('../fixtures/reference/', import.meta.url).pathname
// [variant, package quant, max |Δlogit| allowed]. bf16 packages hold the reference weights exactly (they
// were rounded to bf16 before HF ran), so only fp32 summation order separates engine and reference. The
// MLX variant's reference was computed from its dequantized 4-bit weights, which a q4 package keeps as is.
const CASES: Array<[string, Quant, number]> = [
  ['qwen3_5-dense', 'bf16', 1e-4],
  ['qwen3_5-dense-r3', 'bf16', 1e-4],
  ['qwen3_5-vl', 'bf16', 1e-4],
  ['qwen3_5_moe', 'bf16', 1e-4],
  ['qwen3_5_moe-packed', 'bf16', 1e-4],
  ['qwen3_next', 'bf16', 1e-4],
  ['qwen3-tied', 'bf16', 1e-4],
  ['qwen3-untied', 'bf16', 1e-4],
  ['qwen3_5-dense-mlx4', 'q4', 1e-4],
]
const MARGIN = 1e-3

interface Reference {
  prompt_ids: number[][]
  greedy_fp32: number[][]
  tensors_file: string
}

let work: string
t.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'splash-parity-'))
})
t.teardown(() => rm(work, {recursive: true, force: true}))

/** The fixture checkpoint plus a tokenizer and template (prompts are ids; a package must still carry them). */
async function checkpointWithTokenizer(variant: string): Promise<string> {
  const dir = join(work, `ck-${variant}`)
  await cp(join(FIXTURES, variant), dir, {recursive: true})
  const tok = makeTokenizer(300)
  await writeFile(join(dir, 'tokenizer.json'), tok.json)
  await writeFile(join(dir, 'tokenizer_config.json'), JSON.stringify({chat_template: SYNTH_CHAT_TEMPLATE, eos_token: '<|im_end|>'}))
  await writeFile(join(dir, 'generation_config.json'), JSON.stringify({eos_token_id: [tok.specials['<|im_end|>']]}))
  return dir
}

function argmaxRow(a: Float32Array, row: number, V: number): number {
  let best = 0
  for (let j = 1; j < V; j++) if (a[row * V + j] > a[row * V + best]) best = j
  return best
}

function margin(a: Float32Array, row: number, V: number): number {
  let m1 = -Infinity
  let m2 = -Infinity
  for (let j = 0; j < V; j++) {
    const x = a[row * V + j]
    if (x > m1) [m1, m2] = [x, m1]
    else if (x > m2) m2 = x
  }
  return m1 - m2
}

for (const [variant, quant, tol] of CASES) {
  t.test(`${variant} (${quant} package)`, async t => {
    const ref = JSON.parse(readFileSync(join(FIXTURES, variant, 'reference.json'), 'utf8')) as Reference
    const tensors = await SafetensorsReader.open(join(FIXTURES, variant, ref.tensors_file))
    t.teardown(() => tensors.close())
    const pkg = join(work, `pkg-${variant}`)
    await buildPackage({checkpoint: await checkpointWithTokenizer(variant), out: pkg, quant})
    const h = await native.openModel(pkg, {int8: false})
    t.teardown(() => native.closeModel(h))
    const V = native.modelInfo(h).vocabSize

    for (const [p, prompt] of ref.prompt_ids.entries()) {
      const expected = await tensors.readFloat32(`p${p}.logits_fp32`)
      const seq = native.createSequence(h, {maxLength: prompt.length + 32})
      const got = (await native.step(h, [{seq, tokens: Int32Array.from(prompt), logits: 'all'}]))[0].logits!
      t.equal(got.length, expected.length, `prompt ${p}: logits shape`)
      let maxDiff = 0
      for (let i = 0; i < got.length; i++) maxDiff = Math.max(maxDiff, Math.abs(got[i] - expected[i]))
      t.ok(maxDiff <= tol, `prompt ${p}: max |Δlogit| ${maxDiff.toExponential(2)} ≤ ${tol}`)
      let mismatched = 0
      for (let r = 0; r < prompt.length; r++) {
        if (margin(expected, r, V) > MARGIN && argmaxRow(got, r, V) !== argmaxRow(expected, r, V)) mismatched++
      }
      t.equal(mismatched, 0, `prompt ${p}: same top-1 at every position with a clear margin`)

      // Greedy continuation through single-token decode steps.
      const out: number[] = [argmaxRow(got, prompt.length - 1, V)]
      while (out.length < ref.greedy_fp32[p].length) {
        const row = (await native.step(h, [{seq, tokens: Int32Array.of(out[out.length - 1]), logits: 'last'}]))[0].logits!
        out.push(argmaxRow(row, 0, V))
      }
      t.same(out, ref.greedy_fp32[p], `prompt ${p}: greedy continuation equals transformers'`)
      native.freeSequence(h, seq)
    }
  })
}
