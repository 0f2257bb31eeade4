import t from 'tap'
import type {Test} from 'tap'
import {mkdtempSync, readFileSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {buildPackage} from '../../src/package/builder/builder.js'
import {readManifest} from '../../src/package/manifest.js'
import {fromBf16} from '../../src/package/builder/quantize.js'
import {SafetensorsReader} from '../../src/package/safetensors.js'
import {checkPackage} from '../../src/package/verify.js'
import {modelLayout} from '../../src/package/layout.js'
import {specsFor, storageFor} from '../../src/package/builder/weights.js'
import {flushFixtures, writeFixture, type Fixture, type FixtureOptions} from '../fixtures/package/checkpoints.js'
import type {Quant} from '../../src/package/manifest.js'

const root = mkdtempSync(join(tmpdir(), 'splash-build-'))
let n = 0

/** Compares every tensor of the package with the truth; returns the largest error seen on quantized tensors. */
/** The tensors of every weights file, behind one reader-like object. */
async function openAll(pkg: string, files: string[]) {
  const readers = await Promise.all(files.map(f => SafetensorsReader.open(join(pkg, f))))
  const of = (n: string) => readers.find(r => r.has(n)) ?? readers[0]
  return {
    has: (n: string) => readers.some(r => r.has(n)),
    info: (n: string) => of(n).info(n),
    read: (n: string) => of(n).read(n),
    readFloat32: (n: string) => of(n).readFloat32(n),
    names: () => readers.flatMap(r => r.names()),
    close: () => Promise.all(readers.map(r => r.close())),
  }
}

async function compare(t: Test, fx: Fixture, pkg: string, quant: Quant, files = ['model.safetensors']): Promise<number> {
  const r = await openAll(pkg, files)
  const expected = new Set<string>()
  let worst = 0
  for (const [name, tr] of fx.truth) {
    const cols = tr.shape[tr.shape.length - 1]
    if (!tr.linear) {
      expected.add(name)
      const info = r.info(name)
      t.equal(info.dtype, 'F32', `${name} F32`)
      t.same(info.shape, tr.shape, `${name} shape`)
      const got = await r.readFloat32(name)
      let same = got.length === tr.data.length
      for (let i = 0; same && i < got.length; i++) same = got[i] === tr.data[i]
      t.ok(same, `${name} exact`)
      continue
    }
    if (r.has(`${name}.scales`)) {
      for (const p of ['weight', 'scales', 'biases']) expected.add(`${name}.${p}`)
      const w = r.info(`${name}.weight`)
      const sc = r.info(`${name}.scales`)
      t.same(sc.shape, [...tr.shape.slice(0, -1), cols / 64], `${name} scales shape`)
      const bits = (32 * w.shape[w.shape.length - 1]) / (64 * sc.shape[sc.shape.length - 1])
      const wantBits = quant === 'q8' || name.endsWith('router') || name.endsWith('shared_expert_gate') ? 8 : 4
      t.equal(bits, wantBits, `${name} ${bits}-bit`)
      const words = new Uint32Array(new Uint8Array(await r.read(`${name}.weight`)).buffer)
      const s = await r.readFloat32(`${name}.scales`)
      const b = await r.readFloat32(`${name}.biases`)
      let ok = true
      for (let i = 0; i < tr.data.length; i++) {
        const q = (words[Math.floor((i * bits) / 32)] >>> (bits * (i % (32 / bits)))) & ((1 << bits) - 1)
        const g = Math.floor(i / 64)
        const err = Math.abs(s[g] * q + b[g] - tr.data[i])
        if (err > worst) worst = err
        if (err > Math.abs(s[g]) * 0.5 + Math.abs(b[g]) / 128 + 1e-6) ok = false
      }
      t.ok(ok, `${name} within the quantization error`)
    } else {
      expected.add(`${name}.weight`)
      const info = r.info(`${name}.weight`)
      t.equal(info.dtype, 'BF16', `${name} bf16`)
      t.same(info.shape, tr.shape, `${name} shape`)
      const got = fromBf16(new Uint16Array(new Uint8Array(await r.read(`${name}.weight`)).buffer))
      let ok = true
      for (let i = 0; i < got.length; i++) if (Math.abs(got[i] - tr.data[i]) > Math.abs(tr.data[i]) / 256 + 1e-30) ok = false
      t.ok(ok, `${name} bf16 values`)
    }
  }
  t.same(r.names().sort(), [...expected].sort(), 'exactly the Splash tensors')
  await r.close()
  return worst
}

async function build(t: Test, o: FixtureOptions, quant: Quant) {
  const src = join(root, `src${n}`)
  const out = join(root, `pkg${n++}`)
  const fx = writeFixture(src, o)
  await flushFixtures()
  const lines: string[] = []
  const m = await buildPackage({checkpoint: src, out, quant, log: l => lines.push(l), shardSize: o.shards ? 100_000 : undefined})
  t.same(await checkPackage(out, m), [], 'package verifies')
  t.same(await readManifest(out), m, 'splash.json written')
  const worst = await compare(t, fx, out, quant, m.weights.files)
  // the builder and synth agree on the contract: the package holds exactly the layout of its config
  const r = await openAll(out, m.weights.files)
  const want = modelLayout(m.config).flatMap(e => specsFor(e.name, e.shape, storageFor(e.kind, e.shape, quant, e.q8)))
  t.same(r.names().sort(), want.map(w => w.name).sort(), 'names match layout.ts')
  t.ok(want.every(w => JSON.stringify(r.info(w.name).shape) === JSON.stringify(w.shape) && r.info(w.name).dtype === w.dtype), 'shapes and dtypes match layout.ts')
  await r.close()
  return {m, fx, out, worst, lines}
}

const layouts: [string, FixtureOptions, Quant, string][] = [
  ['Qwen3_5ForConditionalGeneration (model.language_model.*, vision and mtp skipped)', {kind: 'dense', names: 'vl'}, 'q4', 'qwen3_5'],
  ['Qwen3_5ForCausalLM, 2 shards, tied, old rope keys', {kind: 'dense', names: 'text', tie: true, shards: 2, oldRope: true}, 'bf16', 'qwen3_5'],
  ['Qwen3_5MoeForCausalLM, packed experts', {kind: 'moe', names: 'text', experts: 'packed'}, 'q4', 'qwen3_5_moe'],
  ['Qwen3_5MoeForConditionalGeneration, per-expert', {kind: 'moe', names: 'vl', experts: 'per'}, 'q8', 'qwen3_5_moe'],
  ['Qwen3NextForCausalLM, fused projections', {kind: 'next', names: 'text', experts: 'per'}, 'bf16', 'qwen3_next'],
  ['Qwen3NextForCausalLM q4', {kind: 'next', names: 'text', experts: 'per'}, 'q4', 'qwen3_next'],
  ['Qwen3ForCausalLM untied', {kind: 'qwen3', names: 'text'}, 'q4', 'qwen3'],
  ['Qwen3ForCausalLM tied', {kind: 'qwen3', names: 'text', tie: true}, 'bf16', 'qwen3'],
  ['MLX Qwen3.5 q4 → q4 (pass-through)', {kind: 'dense', names: 'mlx'}, 'q4', 'qwen3_5'],
  ['MLX Qwen3.5 q4 → bf16 (dequantized)', {kind: 'dense', names: 'mlx'}, 'bf16', 'qwen3_5'],
  ['MLX Qwen3.5-MoE switch_mlp q4 → q8 (requantized)', {kind: 'moe', names: 'mlx', experts: 'switch'}, 'q8', 'qwen3_5_moe'],
  ['MLX Qwen3-Next fused, quantized', {kind: 'next', names: 'mlx', experts: 'switch'}, 'q4', 'qwen3_next'],
  ['MLX Qwen3 q4', {kind: 'qwen3', names: 'mlx', tie: true}, 'q4', 'qwen3'],
]

for (const [title, o, quant, family] of layouts) {
  t.test(`${title} → ${quant}`, async t => {
    const {m, worst, lines} = await build(t, o, quant)
    if (o.names === 'vl') t.match(lines.join('\n'), /not in the package: model\.visual\.\* \(1\), mtp\.fc\.\* \(1\)/, 'vision and MTP left out')
    else if (o.kind === 'qwen3' || o.names === 'mlx') t.notMatch(lines.join('\n'), /not in the package/, 'every tensor used')
    t.equal(m.family, family)
    t.equal(m.weights.quant, quant)
    t.equal(m.config.tie_word_embeddings, !!o.tie)
    t.equal(m.config.vocab_size, 96)
    t.equal(m.provenance.kind, 'converted')
    t.same(m.tokenizer.eos_token_ids.sort(), [94, 95])
    t.equal(m.tokenizer.pad_token_id, 94)
    if (o.kind !== 'qwen3') {
      t.same(m.config.layer_types, ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'])
      t.equal(m.config.partial_rotary_factor, 0.25)
      t.equal(m.config.qk_norm, 'zero_centred')
      t.equal(m.config.attn_output_gate, true)
      t.equal(m.config.rope_theta, o.oldRope || o.kind === 'next' ? 5000000 : 10000000)
    } else {
      t.equal(m.config.qk_norm, 'plain')
      t.equal(m.config.attn_output_gate, false)
    }
    if (o.kind === 'moe' || o.kind === 'next') {
      t.equal(m.config.num_experts, 4)
      t.equal(m.config.intermediate_size, 0)
    }
    if (o.names === 'mlx' && quant === 'q4') t.equal(worst, 0, 'MLX quantized tensors pass through unchanged')
    if (o.shards) t.match(m.weights.files, [/^model-00001-of-0000\d\.safetensors$/, /^model-00002-of-0000\d\.safetensors$/], 'sharded weights')
    else t.same(m.weights.files, ['model.safetensors'])
  })
}

t.test('chat template file and draft', async t => {
  const src = join(root, 'draftsrc')
  writeFixture(src, {kind: 'qwen3', names: 'text'})
  // a DFlash draft: fc over 2 taps, one Qwen3 layer
  const {writeSafetensors} = await import('../../src/package/safetensors.js')
  const {toBf16} = await import('../../src/package/builder/quantize.js')
  const H = 64
  const ones = (n: number) => toBf16(new Float32Array(n).fill(0.5))
  const d = join(root, 'draft')
  const {mkdirSync} = await import('node:fs')
  mkdirSync(d, {recursive: true})
  const ts = [
    {name: 'fc.weight', dtype: 'BF16' as const, shape: [H, 2 * H], data: ones(2 * H * H)},
    {name: 'hidden_norm.weight', dtype: 'BF16' as const, shape: [H], data: ones(H)},
    {name: 'norm.weight', dtype: 'BF16' as const, shape: [H], data: ones(H)},
    {name: 'layers.0.input_layernorm.weight', dtype: 'BF16' as const, shape: [H], data: ones(H)},
    {name: 'layers.0.post_attention_layernorm.weight', dtype: 'BF16' as const, shape: [H], data: ones(H)},
    {name: 'layers.0.self_attn.q_proj.weight', dtype: 'BF16' as const, shape: [64, H], data: ones(64 * H)},
    {name: 'layers.0.self_attn.k_proj.weight', dtype: 'BF16' as const, shape: [32, H], data: ones(32 * H)},
    {name: 'layers.0.self_attn.v_proj.weight', dtype: 'BF16' as const, shape: [32, H], data: ones(32 * H)},
    {name: 'layers.0.self_attn.o_proj.weight', dtype: 'BF16' as const, shape: [H, 64], data: ones(64 * H)},
    {name: 'layers.0.self_attn.q_norm.weight', dtype: 'BF16' as const, shape: [32], data: ones(32)},
    {name: 'layers.0.self_attn.k_norm.weight', dtype: 'BF16' as const, shape: [32], data: ones(32)},
    {name: 'layers.0.mlp.gate_proj.weight', dtype: 'BF16' as const, shape: [128, H], data: ones(128 * H)},
    {name: 'layers.0.mlp.up_proj.weight', dtype: 'BF16' as const, shape: [128, H], data: ones(128 * H)},
    {name: 'layers.0.mlp.down_proj.weight', dtype: 'BF16' as const, shape: [H, 128], data: ones(128 * H)},
  ]
  await writeSafetensors(join(d, 'model.safetensors'), ts)
  writeFileSync(join(d, 'config.json'), JSON.stringify({
    architectures: ['DFlashDraftModel'], hidden_size: H, intermediate_size: 128, num_hidden_layers: 1, num_attention_heads: 2,
    num_key_value_heads: 1, head_dim: 32, rope_theta: 1000000, rms_norm_eps: 1e-6, block_size: 16,
    dflash_config: {mask_token_id: 90, target_layer_ids: [1, 2]},
  }))
  // template from chat_template.jinja when tokenizer_config has none
  writeFileSync(join(src, 'tokenizer_config.json'), JSON.stringify({eos_token: '<|im_end|>'}))
  writeFileSync(join(src, 'chat_template.jinja'), 'TEMPLATE')
  await flushFixtures()
  const out = join(root, 'withdraft')
  const m = await buildPackage({checkpoint: src, out, quant: 'q4', draft: d, name: 'splash/tiny'})
  t.equal(m.name, 'splash/tiny')
  t.equal(readFileSync(join(out, 'chat_template.jinja'), 'utf8'), 'TEMPLATE')
  t.same(m.draft?.config.target_layer_ids, [1, 2])
  t.equal(m.draft?.config.mask_token_id, 90)
  t.equal(m.draft?.config.block_size, 16)
  t.same(m.draft?.files, ['draft.safetensors'])
  const r = await SafetensorsReader.open(join(out, 'draft.safetensors'))
  t.same(r.info('fc.weight').shape, [H, (2 * H * 4) / 32], 'fc quantized q4')
  t.same([...(await r.readFloat32('hidden_norm'))].slice(0, 2), [0.5, 0.5], 'plain draft norms kept as is')
  await r.close()
  t.same(await checkPackage(out, m), [])
  // a draft tapping a layer the target lacks is refused
  writeFileSync(join(d, 'config.json'), JSON.stringify({...JSON.parse(readFileSync(join(d, 'config.json'), 'utf8')), dflash_config: {mask_token_id: 90, target_layer_ids: [9]}}))
  await t.rejects(buildPackage({checkpoint: src, out: join(root, 'bad'), quant: 'q4', draft: d}), /taps layer 9/)
})

t.test('DFlash 2 draft (z-lab DFlash2DraftModel layout)', async t => {
  const src = join(root, 'draft2src')
  writeFixture(src, {kind: 'qwen3', names: 'text'})
  await flushFixtures()
  const V = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8')).vocab_size as number
  const {writeSafetensors} = await import('../../src/package/safetensors.js')
  const {toBf16} = await import('../../src/package/builder/quantize.js')
  const {mkdirSync} = await import('node:fs')
  const H = 64
  const bf = (shape: number[]) => ({name: '', dtype: 'BF16' as const, shape, data: toBf16(new Float32Array(shape.reduce((a, b) => a * b, 1)).fill(0.25))})
  const at = (name: string, shape: number[]) => ({...bf(shape), name})
  const d = join(root, 'draft2')
  mkdirSync(d, {recursive: true})
  const ts = [at('fc.weight', [H, 2 * H]), at('hidden_norm.weight', [H]), at('norm.weight', [H])]
  for (let i = 0; i < 2; i++) {
    const p = `layers.${i}`
    ts.push(at(`${p}.input_layernorm.weight`, [H]), at(`${p}.post_attention_layernorm.weight`, [H]))
    for (const [x, rows] of [['q_proj', 64], ['k_proj', 32], ['v_proj', 32]] as const) ts.push(at(`${p}.self_attn.${x}.weight`, [rows, H]))
    ts.push(at(`${p}.self_attn.o_proj.weight`, [H, 64]), at(`${p}.self_attn.q_norm.weight`, [32]), at(`${p}.self_attn.k_norm.weight`, [32]))
    ts.push(at(`${p}.mlp.gate_proj.weight`, [128, H]), at(`${p}.mlp.up_proj.weight`, [128, H]), at(`${p}.mlp.down_proj.weight`, [H, 128]))
    for (const c of ['attention_conv', 'mlp_conv']) ts.push(at(`${p}.${c}.base_kernel`, [2, 2, H]), at(`${p}.${c}.kernel_projection.weight`, [(2 * 2 * H) / 16, H]))
  }
  // the codebooks are stored without ".weight" (the reference code maps the names when it loads them)
  ts.push(at('candidate_selector.hidden_projection.weight', [64, H]))
  ts.push(at('candidate_selector.predecessor_codebook', [V, 64]), at('candidate_selector.successor_codebook', [V, 64]))
  await writeSafetensors(join(d, 'model.safetensors'), ts)
  const config = {
    architectures: ['DFlash2DraftModel'], hidden_size: H, intermediate_size: 128, num_hidden_layers: 2, num_attention_heads: 2,
    num_key_value_heads: 1, head_dim: 32, rms_norm_eps: 1e-5, rope_parameters: {rope_theta: 500000, rope_type: 'default'},
    is_causal: false, layer_types: ['sliding_attention', 'full_attention'], sliding_window: 2048, use_sliding_window: true, vocab_size: V,
    dflash_config: {
      block_size: 16, conv_group_size: 16, conv_kernel_size: 2, final_logit_softcapping: 20, mask_token_id: 90,
      output_multiplier: 0.19611613513818404, selector_rank: 64, selector_top_k: 16, target_layer_ids: [1, 2],
    },
  }
  writeFileSync(join(d, 'config.json'), JSON.stringify(config))
  const out = join(root, 'withdraft2')
  const m = await buildPackage({checkpoint: src, out, quant: 'q4', draft: d})
  t.match(m.draft?.config, {
    block_size: 16, sliding_window: 2048, layer_types: ['sliding_attention', 'full_attention'], is_causal: false, rope_theta: 500000,
    conv_kernel_size: 2, conv_group_size: 16, selector_rank: 64, selector_top_k: 16, output_multiplier: 0.19611613513818404, final_logit_softcapping: 20,
  })
  const r = await SafetensorsReader.open(join(out, 'draft.safetensors'))
  t.same([...(await r.readFloat32('layers.1.mlp_conv.base_kernel'))].slice(0, 2), [0.25, 0.25], 'conv base kernels stored F32')
  t.same(r.info('layers.0.attention_conv.kernel_projection.weight').shape, [16, (H * 4) / 32], 'kernel projection quantized q4')
  t.same(r.info('candidate_selector.successor_codebook.weight').shape, [V, (64 * 4) / 32], 'codebooks stored like embeddings')
  await r.close()
  t.same(await checkPackage(out, m), [])
  // codebooks over another vocabulary, a conv group that does not divide the hidden size, a window without a kind
  const write = (c: object) => writeFileSync(join(d, 'config.json'), JSON.stringify(c))
  write({...config, dflash_config: {...config.dflash_config, conv_group_size: 24}})
  await t.rejects(buildPackage({checkpoint: src, out: join(root, 'bad2'), quant: 'q4', draft: d}), /not a multiple of conv_group_size/)
  write({...config, is_causal: undefined, use_sliding_window: false})
  await t.rejects(buildPackage({checkpoint: src, out: join(root, 'bad3'), quant: 'q4', draft: d}), /without a sliding window/)
  await writeSafetensors(join(d, 'model.safetensors'), ts.map(x => (x.name.endsWith('_codebook') ? at(x.name, [V + 1, 64]) : x)))
  write(config)
  await t.rejects(buildPackage({checkpoint: src, out: join(root, 'bad4'), quant: 'q4', draft: d}), /codebooks have/)
})

t.test('quantized checkpoints other than MLX affine are refused', async t => {
  const src = join(root, 'fp8')
  writeFixture(src, {kind: 'qwen3', names: 'text'})
  await flushFixtures()
  const cfg = JSON.parse(readFileSync(join(src, 'config.json'), 'utf8'))
  writeFileSync(join(src, 'config.json'), JSON.stringify({...cfg, quantization_config: {quant_method: 'fp8'}}))
  await t.rejects(buildPackage({checkpoint: src, out: join(root, 'y'), quant: 'q4'}), /fp8 checkpoints are not supported/)
  writeFileSync(join(src, 'config.json'), JSON.stringify({...cfg, quantization: {group_size: 32, bits: 4, mode: 'mxfp4'}}))
  await t.rejects(buildPackage({checkpoint: src, out: join(root, 'y'), quant: 'q4'}), /"mxfp4" quantization is not supported/)
})

t.test('unsupported architecture lists the supported ones', async t => {
  const src = join(root, 'llama')
  writeFixture(src, {kind: 'qwen3', names: 'text'})
  await flushFixtures()
  writeFileSync(join(src, 'config.json'), JSON.stringify({architectures: ['LlamaForCausalLM'], hidden_size: 64}))
  await t.rejects(
    buildPackage({checkpoint: src, out: join(root, 'x'), quant: 'q4'}),
    /unsupported architecture LlamaForCausalLM; supported: (?=.*Qwen3_5ForConditionalGeneration)(?=.*Qwen3_5MoeForCausalLM)(?=.*Qwen3NextForCausalLM)(?=.*Qwen3ForCausalLM)/,
  )
})

t.test("generation_config.json's sampling becomes the package's defaults", async t => {
  const cases: [string, object, unknown][] = [
    ['none set', {eos_token_id: [95]}, undefined],
    ['greedy (do_sample false)', {eos_token_id: [95], do_sample: false, temperature: 0.7}, {temperature: 0}],
    ['sampled', {eos_token_id: [95], do_sample: true, temperature: 0.6, top_p: 0.95, top_k: 20, min_p: 0, max_length: 9}, {temperature: 0.6, top_p: 0.95, top_k: 20, min_p: 0}],
  ]
  for (const [title, gen, want] of cases) {
    const src = join(root, `gen-${n}`)
    writeFixture(src, {kind: 'qwen3', names: 'text'})
    await flushFixtures()
    writeFileSync(join(src, 'generation_config.json'), JSON.stringify(gen))
    const out = join(root, `gen-out-${n++}`)
    const m = await buildPackage({checkpoint: src, out, quant: 'q8'})
    t.same(m.sampling, want, title)
    t.same((await readManifest(out)).sampling, want, `${title}: in splash.json`)
  }
})
