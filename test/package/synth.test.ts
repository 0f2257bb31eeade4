import t from 'tap'
import {mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {Tokenizer} from '@huggingface/tokenizers'
import {Template} from '@huggingface/jinja'
import {draftLayout, modelLayout} from '../../src/package/layout.js'
import {readManifest} from '../../src/package/manifest.js'
import {PRESETS, withLayers} from '../../src/package/presets.js'
import {SafetensorsReader} from '../../src/package/safetensors.js'
import {synthPackage} from '../../src/package/synth/synth.js'
import {checkPackage} from '../../src/package/verify.js'
import {specsFor, storageFor} from '../../src/package/builder/weights.js'

const root = mkdtempSync(join(tmpdir(), 'splash-synth-'))
const params = (entries: {shape: number[]}[]) => entries.reduce((n, e) => n + e.shape.reduce((a, b) => a * b, 1), 0)

t.test('big presets have the real shapes (no files written)', async t => {
  const p27 = PRESETS['qwen3.8-27b']
  t.equal(p27.config.layer_types.filter(x => x === 'full_attention').length, 16)
  t.equal(p27.config.layer_types.indexOf('full_attention'), 3)
  const l27 = modelLayout(p27.config)
  const n27 = params(l27)
  t.ok(n27 > 26e9 && n27 < 28e9, `27B has ${(n27 / 1e9).toFixed(2)}B parameters`)
  const byName = new Map(l27.map(e => [e.name, e]))
  t.same(byName.get('layers.0.linear_attn.in_proj_qkv')?.shape, [10240, 5120])
  t.same(byName.get('layers.3.self_attn.q_proj')?.shape, [12288, 5120])
  t.same(byName.get('layers.0.linear_attn.conv1d')?.shape, [10240, 4])
  t.same(byName.get('layers.0.mlp.down_proj')?.shape, [5120, 17408])
  const d27 = params(draftLayout(p27.draft, 5120, p27.config.vocab_size))
  t.ok(d27 > 1.5e9 && d27 < 1.9e9, `27B draft has ${(d27 / 1e9).toFixed(2)}B parameters`)
  const p35 = PRESETS['qwen3.6-35b-a3b']
  const l35 = modelLayout(p35.config)
  const n35 = params(l35)
  t.ok(n35 > 34e9 && n35 < 36e9, `35B-A3B has ${(n35 / 1e9).toFixed(2)}B parameters`)
  const m35 = new Map(l35.map(e => [e.name, e]))
  t.same(m35.get('layers.0.mlp.experts.gate_proj')?.shape, [256, 512, 2048])
  t.same(m35.get('layers.0.mlp.experts.down_proj')?.shape, [256, 2048, 512])
  t.same(m35.get('layers.0.linear_attn.in_proj_qkv')?.shape, [8192, 2048])
  t.same(storageFor('linear', [256, 2048], 'q4', true), {type: 'q', bits: 8}, 'router q8 in q4')
  t.same(specsFor('x', [256, 512, 2048], {type: 'q', bits: 4}).map(s => s.shape), [[256, 512, 256], [256, 512, 32], [256, 512, 32]])
  // --layers keeps shapes, maps taps inside the model
  const four = withLayers(p27, 4)
  t.equal(four.config.num_hidden_layers, 4)
  t.same(four.config.layer_types, ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'])
  t.ok(four.draft.target_layer_ids.every(l => l < 4))
  t.equal(four.draft.target_layer_ids.length, 5)
  const p08 = PRESETS['qwen3.5-0.8b']
  const n08 = params(modelLayout(p08.config))
  t.ok(n08 > 0.6e9 && n08 < 0.95e9, `0.8B has ${(n08 / 1e9).toFixed(2)}B parameters (without vision)`)
  const n4 = params(modelLayout(PRESETS['qwen3.5-4b'].config))
  t.ok(n4 > 3.5e9 && n4 < 4.5e9, `4B has ${(n4 / 1e9).toFixed(2)}B parameters (without vision)`)
})

t.test('qwen3.5-0.8b --layers 1 writes a valid q4 package', async t => {
  const out = join(root, '08b')
  const m = await synthPackage({preset: 'qwen3.5-0.8b', out, quant: 'q4', layers: 1})
  t.equal(m.provenance.kind, 'synthetic')
  t.equal(m.config.num_hidden_layers, 1)
  t.equal(m.config.vocab_size, 248320)
  t.same(m.tokenizer.eos_token_ids, [248046, 248044])
  t.same(await checkPackage(out, m), [], 'sizes and sha256 computed while writing are right')
  const r = await SafetensorsReader.open(join(out, 'model.safetensors'))
  t.same(r.info('embed_tokens.weight').shape, [248320, 128])
  t.same(r.info('embed_tokens.scales').shape, [248320, 16])
  await r.close()
  const tok = new Tokenizer(JSON.parse(readFileSync(join(out, 'tokenizer.json'), 'utf8')), {})
  const ids = tok.encode('<|im_start|>user\nhi<|im_end|>', {add_special_tokens: false}).ids
  t.equal(ids[0], 248045)
  t.equal(ids[ids.length - 1], 248046)
  t.equal(tok.token_to_id('</think>'), 248069)
})

for (const preset of ['tiny-hybrid', 'tiny-moe']) {
  t.test(`full ${preset} synth`, async t => {
    const out = join(root, preset)
    const m = await synthPackage({preset, out, quant: 'q4', seed: 3})
    t.same(await readManifest(out), m)
    t.same(await checkPackage(out, m), [])
    const r = await SafetensorsReader.open(join(out, 'model.safetensors'))
    const want = modelLayout(m.config).flatMap(e => specsFor(e.name, e.shape, storageFor(e.kind, e.shape, 'q4', e.q8)))
    t.same(r.names().sort(), want.map(s => s.name).sort(), 'exactly the layout tensors')
    for (const s of want) t.same(r.info(s.name).shape, s.shape, `${s.name} shape`)
    const norm = await r.readFloat32('norm')
    t.ok(norm.every(x => x > 0.8 && x < 1.2), 'norm multipliers near 1')
    const sc = await r.readFloat32('embed_tokens.scales')
    t.ok(sc.every(x => x > 0 && Number.isFinite(x)), 'positive finite scales')
    await r.close()
    const d = await SafetensorsReader.open(join(out, 'draft.safetensors'))
    t.same(d.info('fc.weight').shape, [64, (m.draft!.config.target_layer_ids.length * 64 * 4) / 32])
    await d.close()
    const tok = new Tokenizer(JSON.parse(readFileSync(join(out, 'tokenizer.json'), 'utf8')), {})
    t.equal(tok.token_to_id('<|im_end|>'), 482)
    const text = new Template(readFileSync(join(out, 'chat_template.jinja'), 'utf8')).render({
      messages: [{role: 'user', content: 'hi'}], add_generation_prompt: true, enable_thinking: false,
    })
    t.equal(text, '<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n')
    // same seed, same bytes
    const again = await synthPackage({preset, out: join(root, `${preset}-again`), quant: 'q4', seed: 3})
    t.same(again.files, m.files, 'deterministic')
  })
}

t.test('bad preset and layer count', async t => {
  await t.rejects(synthPackage({preset: 'nope', out: join(root, 'x'), quant: 'q4'}), /unknown preset "nope"; presets: qwen3.8-27b/)
  await t.rejects(synthPackage({preset: 'tiny-hybrid', out: join(root, 'x'), quant: 'q4', layers: 9}), /between 1 and 4/)
})
