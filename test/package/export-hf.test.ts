// `package export --hf`: a bf16 package built from a reference fixture, exported as float32, must give back the
// fixture's own tensors bit for bit under their Hugging Face names (norms, fused Qwen3-Next projections, per-expert
// MoE tensors, conv1d shape); the draft lands in the DFlash layout vLLM and SGLang load. The transformers side of
// the round trip is tools/reference/check_export.py.
import t from 'tap'
import {cp, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {buildPackage} from '../../src/package/builder/builder.js'
import {exportHf} from '../../src/package/export/export-hf.js'
import {SafetensorsReader} from '../../src/package/safetensors.js'
import {synthPackage} from '../../src/package/synth/synth.js'
import {makeTokenizer, SYNTH_CHAT_TEMPLATE} from '../../src/package/synth/synth-tokenizer.js'

const FIXTURES = new URL('../fixtures/reference/', import.meta.url).pathname
let work: string
t.before(async () => {
  work = await mkdtemp(join(tmpdir(), 'splash-export-hf-'))
})
t.teardown(() => rm(work, {recursive: true, force: true}))

async function fixturePackage(variant: string): Promise<string> {
  const ck = join(work, `ck-${variant}`)
  await cp(join(FIXTURES, variant), ck, {recursive: true})
  const tok = makeTokenizer(300)
  await writeFile(join(ck, 'tokenizer.json'), tok.json)
  await writeFile(join(ck, 'tokenizer_config.json'), JSON.stringify({chat_template: SYNTH_CHAT_TEMPLATE, eos_token: '<|im_end|>'}))
  const pkg = join(work, `pkg-${variant}`)
  await buildPackage({checkpoint: ck, out: pkg, quant: 'bf16'})
  return pkg
}

for (const variant of ['qwen3_5-dense', 'qwen3_5_moe', 'qwen3_next', 'qwen3-untied']) {
  t.test(`${variant}: bf16 package → float32 checkpoint equals the fixture`, async t => {
    const out = join(work, `hf-${variant}`)
    const r = await exportHf({dir: await fixturePackage(variant), out, dtype: 'float32'})
    t.same(r.files.slice(0, 2), ['model.safetensors', 'config.json'])
    const a = await SafetensorsReader.open(join(FIXTURES, variant, 'model.safetensors'))
    const b = await SafetensorsReader.open(join(out, 'model.safetensors'))
    t.teardown(async () => {
      await a.close()
      await b.close()
    })
    t.same(b.names().sort(), a.names().sort(), 'the same tensor names as the transformers checkpoint')
    let differ = 0
    for (const n of a.names()) {
      const x = await a.readFloat32(n)
      const y = await b.readFloat32(n)
      if (JSON.stringify(a.info(n).shape) !== JSON.stringify(b.info(n).shape) || x.some((v, i) => v !== y[i])) {
        differ++
        t.fail(`${n} differs`)
      }
    }
    t.equal(differ, 0, 'every tensor bit-identical')
    const ref = JSON.parse(await readFile(join(FIXTURES, variant, 'config.json'), 'utf8')) as Record<string, unknown>
    const cfg = JSON.parse(await readFile(join(out, 'config.json'), 'utf8')) as Record<string, unknown>
    for (const k of ['architectures', 'model_type', 'hidden_size', 'num_hidden_layers', 'layer_types', 'head_dim', 'tie_word_embeddings', 'rope_parameters']) {
      t.same(cfg[k], ref[k], `config.json ${k}`)
    }
    t.match(await readFile(join(out, 'README.md'), 'utf8'), /vllm serve[\s\S]*--tensor-parallel-size[\s\S]*sglang\.launch_server[\s\S]*--tp-size/)
  })
}

t.test('the draft in the DFlash layout; a q4 package dequantised to bf16', async t => {
  const pkg = join(work, 'synth')
  const m = await synthPackage({preset: 'tiny-hybrid', out: pkg, quant: 'q4'})
  const out = join(work, 'hf-synth')
  const r = await exportHf({dir: pkg, out, servedAs: 'me/tiny-hf'})
  t.ok(r.draft)
  const cfg = JSON.parse(await readFile(join(out, 'draft', 'config.json'), 'utf8'))
  t.same(cfg.architectures, ['DFlashDraftModel'])
  t.same(cfg.dflash_config.target_layer_ids, m.draft!.config.target_layer_ids, 'the draft config names the target layers it taps')
  t.equal(cfg.num_target_layers, m.config.num_hidden_layers)
  const d = await SafetensorsReader.open(join(out, 'draft', 'model.safetensors'))
  t.teardown(() => d.close())
  t.same(d.info('fc.weight').shape, [m.draft!.config.hidden_size, m.draft!.config.target_layer_ids.length * m.config.hidden_size])
  t.notOk(d.names().some(n => n.startsWith('model.') || n.startsWith('__pad__')), 'names without model. prefix or padding, as vLLM reads them')
  t.equal(d.info('fc.weight').dtype, 'BF16')
  const readme = await readFile(join(out, 'README.md'), 'utf8')
  t.match(readme, /"method":"dflash","model":"me\/tiny-hf\/draft"/)
  t.match(readme, /--speculative-algorithm DFLASH --speculative-draft-model-path me\/tiny-hf\/draft/)
})
