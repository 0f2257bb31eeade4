// Vision parity with transformers (test/fixtures/reference/qwen3_5-vl-image, made by
// tools/reference/make_vision_fixture.py on the GPU machine): the fixture checkpoint, built into a package with its
// vision tower, must turn HF's processor patches into HF's image embeddings, reproduce HF's fp32 logits for a
// prompt holding two images (embeddings replacing the pad rows, HF's M-RoPE positions) and continue it greedily
// exactly as HF's generate did (decode positions shifted by the rope delta).
import t from 'tap'
import {cp, mkdtemp, rm, writeFile} from 'node:fs/promises'
import {readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {buildPackage} from '../../src/package/builder/builder.js'
import {readManifest} from '../../src/package/manifest.js'
import {SafetensorsReader} from '../../src/package/safetensors.js'
import {makeTokenizer, SYNTH_CHAT_TEMPLATE} from '../../src/package/synth/synth-tokenizer.js'
import {native} from '../../src/native/native.js'

const FIXTURE = new URL('../fixtures/reference/qwen3_5-vl-image/', import.meta.url).pathname
/** Observed: embeddings 2.4e-6, prompt logits 1.1e-5, decode logits 7.8e-6 (HF's own CPU vs GPU difference is 1.4e-5). */
const TOL = 1e-4

interface Reference {
  input_ids: number[]
  greedy_fp32: number[]
  vision_token_ids: {vision_start: number; vision_end: number; image_pad: number}
  metrics: {grid_thw: number[][]}
}

function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]))
  return m
}

function argmax(a: Float32Array, row: number, V: number): number {
  let best = 0
  for (let j = 1; j < V; j++) if (a[row * V + j] > a[row * V + best]) best = j
  return best
}

let work: string
t.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'splash-vision-parity-'))
})
t.teardown(() => rm(work, {recursive: true, force: true}))

t.test('qwen3_5-vl-image: encoder, prompt with two images, greedy decode', async t => {
  const ref = JSON.parse(readFileSync(join(FIXTURE, 'reference.json'), 'utf8')) as Reference
  const tensors = await SafetensorsReader.open(join(FIXTURE, 'reference.safetensors'))
  t.teardown(() => tensors.close())
  const ck = join(work, 'ck')
  await cp(FIXTURE, ck, {recursive: true})
  const tok = makeTokenizer(300)
  await writeFile(join(ck, 'tokenizer.json'), tok.json)
  await writeFile(join(ck, 'tokenizer_config.json'), JSON.stringify({chat_template: SYNTH_CHAT_TEMPLATE, eos_token: '<|im_end|>'}))
  await writeFile(join(ck, 'generation_config.json'), JSON.stringify({eos_token_id: [tok.specials['<|im_end|>']]}))
  const pkg = join(work, 'pkg')
  await buildPackage({checkpoint: ck, out: pkg, quant: 'bf16'})
  const manifest = await readManifest(pkg)
  t.same(manifest.vision?.tokens, ref.vision_token_ids, 'manifest records the prompt token ids')
  t.same(manifest.vision?.preprocessor, {min_pixels: 1024, max_pixels: 65536, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5]})
  t.equal(manifest.vision?.config.depth, 2)

  const h = await native.openModel(pkg, {activations: 'f32'})
  t.teardown(() => native.closeModel(h))
  const info = native.modelInfo(h)
  t.same(info.vision, {patchDim: 1536, mergeSize: 2, patchSize: 16, temporalPatchSize: 2})
  const V = info.vocabSize
  const H = info.hiddenSize

  // encoder: HF's processor patches → HF's merger output
  const pixels = await tensors.readFloat32('pixel_values')
  const expectedEmb = await tensors.readFloat32('image_embeds_fp32')
  const grids = ref.metrics.grid_thw as [number, number, number][]
  const embeds: Float32Array[] = []
  let row = 0
  let out = 0
  for (const [i, grid] of grids.entries()) {
    const n = grid[0] * grid[1] * grid[2]
    const emb = await native.encodeImage(h, {pixels: pixels.subarray(row * 1536, (row + n) * 1536), grid})
    const want = expectedEmb.subarray(out * H, (out + n / 4) * H)
    t.equal(emb.length, want.length, `image ${i}: ${n / 4} embeddings`)
    const d = maxAbsDiff(emb, want)
    t.ok(d <= TOL, `image ${i}: max |Δembedding| ${d.toExponential(2)} ≤ ${TOL}`)
    embeds.push(emb)
    row += n
    out += n / 4
  }

  // the prompt: embeddings replace the pad rows; positions are HF's (T, H, W) ids
  const ids = Int32Array.from(ref.input_ids)
  const pos = new Int32Array(new Uint8Array(await tensors.read('position_ids')).buffer) // a copy: aligned for int32
  const T = ids.length
  const positions = new Int32Array(3 * T)
  for (let i = 0; i < T; i++) for (let d = 0; d < 3; d++) positions[3 * i + d] = pos[d * T + i]
  const embedAt = Int32Array.from([...ids.keys()].filter(i => ids[i] === ref.vision_token_ids.image_pad))
  const allEmbeds = new Float32Array(embedAt.length * H)
  let at = 0
  for (const e of embeds) allEmbeds.set(e, (at += e.length) - e.length)
  const seq = native.createSequence(h, {maxLength: T + 16})
  const got = (await native.step(h, [{seq, tokens: ids, logits: 'all', embedAt, embeds: allEmbeds, positions}]))[0].logits!
  const expected = await tensors.readFloat32('logits_fp32')
  const d = maxAbsDiff(got, expected)
  t.ok(d <= TOL, `prompt logits: max |Δlogit| ${d.toExponential(2)} ≤ ${TOL}`)

  // without the images the logits after the first image differ: the embeddings do reach the model
  const seq2 = native.createSequence(h, {maxLength: T})
  const plain = (await native.step(h, [{seq: seq2, tokens: ids, logits: 'all', positions}]))[0].logits!
  t.ok(maxAbsDiff(plain.subarray((embedAt[0] + 1) * V), expected.subarray((embedAt[0] + 1) * V)) > 0.01, 'pad embeddings alone give other logits')
  native.freeSequence(h, seq2)

  // greedy decode: positions continue from max(prompt positions) + 1 (the rope delta)
  let maxPos = 0
  for (const p of positions) maxPos = Math.max(maxPos, p)
  const delta = maxPos + 1 - T
  const greedy = [argmax(got, T - 1, V)]
  const greedyLogits = await tensors.readFloat32('greedy_logits_fp32')
  let worst = 0
  for (let s = 1; s < ref.greedy_fp32.length; s++) {
    const p = T + s - 1 + delta
    const rowLogits = (await native.step(h, [{seq, tokens: Int32Array.of(greedy[s - 1]), logits: 'last', positions: Int32Array.of(p, p, p)}]))[0].logits!
    worst = Math.max(worst, maxAbsDiff(rowLogits, greedyLogits.subarray(s * V, (s + 1) * V)))
    greedy.push(argmax(rowLogits, 0, V))
  }
  t.same(greedy, ref.greedy_fp32, 'greedy continuation equals transformers\'')
  t.ok(worst <= TOL, `decode logits: max |Δlogit| ${worst.toExponential(2)} ≤ ${TOL}`)
  native.freeSequence(h, seq)
})

t.test('a q4 package keeps the vision tower in bf16: same embeddings', async t => {
  const pkg = join(work, 'pkg-q4')
  const lines: string[] = []
  await buildPackage({checkpoint: join(work, 'ck'), out: pkg, quant: 'q4', log: l => lines.push(l)})
  t.match(lines.join('\n'), /vision tower: 2 blocks, hidden 64 \(bf16\)/)
  t.notMatch(lines.join('\n'), /not in the package: model\.visual/, 'every vision tensor is used')
  const st = await SafetensorsReader.open(join(pkg, 'model.safetensors'))
  t.teardown(() => st.close())
  t.equal(st.info('visual.blocks.0.attn.qkv.weight').dtype, 'BF16')
  t.equal(st.info('visual.blocks.0.attn.qkv.bias').dtype, 'F32')
  t.equal(st.info('visual.patch_embed.weight').dtype, 'BF16')
  t.same(st.info('visual.patch_embed.weight').shape, [64, 1536], 'the Conv3d flattened to a linear')
  t.equal(st.info('layers.0.linear_attn.in_proj_qkv.weight').dtype, 'U32', 'text linears are quantized')
  const ref = await SafetensorsReader.open(join(FIXTURE, 'reference.safetensors'))
  t.teardown(() => ref.close())
  const h = await native.openModel(pkg, {activations: 'f32'})
  t.teardown(() => native.closeModel(h))
  const emb = await native.encodeImage(h, {pixels: (await ref.readFloat32('pixel_values')).subarray(0, 24 * 1536), grid: [1, 4, 6]})
  const d = maxAbsDiff(emb, (await ref.readFloat32('image_embeds_fp32')).subarray(0, 6 * 64))
  t.ok(d <= TOL, `image 0 in the q4 package: max |Δembedding| ${d.toExponential(2)}`)
})

t.test('encodeImage and multimodal step fields refuse bad input', async t => {
  const pkg = join(work, 'pkg')
  const h = await native.openModel(pkg, {activations: 'f32'})
  t.teardown(() => native.closeModel(h))
  await t.rejects(native.encodeImage(h, {pixels: new Float32Array(10), grid: [1, 2, 2]}), {code: 'invalid_argument'})
  await t.rejects(native.encodeImage(h, {pixels: new Float32Array(3 * 1536), grid: [1, 1, 3]}), {code: 'invalid_argument'})
  const seq = native.createSequence(h, {maxLength: 8})
  await t.rejects(native.step(h, [{seq, tokens: Int32Array.of(1, 2), embedAt: Int32Array.of(5), embeds: new Float32Array(64)}]), {code: 'invalid_argument'})
  await t.rejects(native.step(h, [{seq, tokens: Int32Array.of(1, 2), embedAt: Int32Array.of(0), embeds: new Float32Array(3)}]), {code: 'invalid_argument'})
  await t.rejects(native.step(h, [{seq, tokens: Int32Array.of(1, 2), positions: Int32Array.of(0, 0, 0)}]), {code: 'invalid_argument'})
  native.freeSequence(h, seq)
})
