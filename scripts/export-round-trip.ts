// Splash's side of the export round trip (tools/reference/check_export.py is the transformers side): each reference
// fixture (test/fixtures/reference) is built into a q4 package, run on the native engine (prefill logits of both
// prompts, greedy continuation), and exported with `package export --hf` as float32 and bf16. One fixture also gets
// a small random DFlash draft so the exported draft layout can be checked. Usage:
//   npx tsx scripts/export-round-trip.ts OUT_DIR
import {cp, mkdir, writeFile} from 'node:fs/promises'
import {readFileSync} from 'node:fs'
import {join} from 'node:path'
import {buildPackage} from '../src/package/builder/builder.js'
import {exportHf} from '../src/package/export/export-hf.js'
import {toBf16} from '../src/package/builder/quantize.js'
import {writeSafetensors} from '../src/package/safetensors.js'
import {makeTokenizer, SYNTH_CHAT_TEMPLATE} from '../src/package/synth/synth-tokenizer.js'
import {native} from '../src/native/native.js'

const FIXTURES = new URL('../test/fixtures/reference/', import.meta.url).pathname
const VARIANTS = ['qwen3_5-dense', 'qwen3_5_moe', 'qwen3_next', 'qwen3-untied', 'qwen3-tied', 'qwen3_5-dense-mlx4']
const DRAFT_TAPS = [1, 5]

function rng(seed: number) {
  let s = seed >>> 0
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0
    return s / 2 ** 32 - 0.5
  }
}

/** A random z-lab-layout DFlash draft for a hidden-64 target: fc over the taps, one Qwen3 layer. */
async function writeDraft(dir: string, H: number): Promise<void> {
  await mkdir(dir, {recursive: true})
  const r = rng(7)
  const w = (n: number, s = 0.1) => toBf16(Float32Array.from({length: n}, () => r() * 2 * s))
  const one = (n: number) => toBf16(Float32Array.from({length: n}, () => 1 + r() * 0.2))
  const t = (name: string, shape: number[], data: Uint16Array) => ({name, dtype: 'BF16' as const, shape, data})
  const L = 'layers.0'
  await writeSafetensors(join(dir, 'model.safetensors'), [
    t('fc.weight', [H, DRAFT_TAPS.length * H], w(DRAFT_TAPS.length * H * H)),
    t('hidden_norm.weight', [H], one(H)),
    t('norm.weight', [H], one(H)),
    t(`${L}.input_layernorm.weight`, [H], one(H)),
    t(`${L}.post_attention_layernorm.weight`, [H], one(H)),
    t(`${L}.self_attn.q_proj.weight`, [128, H], w(128 * H)),
    t(`${L}.self_attn.k_proj.weight`, [64, H], w(64 * H)),
    t(`${L}.self_attn.v_proj.weight`, [64, H], w(64 * H)),
    t(`${L}.self_attn.o_proj.weight`, [H, 128], w(128 * H)),
    t(`${L}.self_attn.q_norm.weight`, [32], one(32)),
    t(`${L}.self_attn.k_norm.weight`, [32], one(32)),
    t(`${L}.mlp.gate_proj.weight`, [128, H], w(128 * H)),
    t(`${L}.mlp.up_proj.weight`, [128, H], w(128 * H)),
    t(`${L}.mlp.down_proj.weight`, [H, 128], w(128 * H)),
  ])
  await writeFile(join(dir, 'config.json'), JSON.stringify({
    architectures: ['DFlashDraftModel'], model_type: 'qwen3', hidden_size: H, intermediate_size: 128, num_hidden_layers: 1,
    num_attention_heads: 4, num_key_value_heads: 2, head_dim: 32, rope_theta: 1000000, rms_norm_eps: 1e-6, block_size: 16,
    dflash_config: {mask_token_id: 255, target_layer_ids: DRAFT_TAPS},
  }))
}

function argmax(a: Float32Array, row: number, V: number): number {
  let best = 0
  for (let j = 1; j < V; j++) if (a[row * V + j] > a[row * V + best]) best = j
  return best
}

async function main(): Promise<void> {
  const out = process.argv[2]
  if (!out) throw new Error('usage: npx tsx scripts/export-round-trip.ts OUT_DIR')
  await mkdir(out, {recursive: true})
  const index: Record<string, unknown> = {}
  for (const variant of VARIANTS) {
    const work = join(out, variant)
    const ck = join(work, 'checkpoint')
    await cp(join(FIXTURES, variant), ck, {recursive: true, filter: src => !/reference\.(json|safetensors)$/.test(src)})
    const tok = makeTokenizer(300)
    await writeFile(join(ck, 'tokenizer.json'), tok.json)
    await writeFile(join(ck, 'tokenizer_config.json'), JSON.stringify({chat_template: SYNTH_CHAT_TEMPLATE, eos_token: '<|im_end|>'}))
    await writeFile(join(ck, 'generation_config.json'), JSON.stringify({eos_token_id: [tok.specials['<|im_end|>']]}))
    const withDraft = variant === 'qwen3_5-dense'
    if (withDraft) await writeDraft(join(work, 'draft-checkpoint'), 64)
    const pkg = join(work, 'package')
    const m = await buildPackage({checkpoint: ck, out: pkg, quant: 'q4', name: `fixture/${variant}`, draft: withDraft ? join(work, 'draft-checkpoint') : undefined})
    const ref = JSON.parse(readFileSync(join(FIXTURES, variant, 'reference.json'), 'utf8')) as {prompt_ids: number[][]; n_greedy: number}
    const h = await native.openModel(pkg, {int8: false})
    const V = native.modelInfo(h).vocabSize
    const tensors = []
    const greedy: number[][] = []
    for (const [p, prompt] of ref.prompt_ids.entries()) {
      const seq = native.createSequence(h, {maxLength: prompt.length + ref.n_greedy + 8})
      const logits = (await native.step(h, [{seq, tokens: Int32Array.from(prompt), logits: 'all'}]))[0].logits!
      tensors.push({name: `p${p}.logits`, dtype: 'F32' as const, shape: [prompt.length, V], data: Float32Array.from(logits)})
      const ids = [argmax(logits, prompt.length - 1, V)]
      while (ids.length < ref.n_greedy) {
        const row = (await native.step(h, [{seq, tokens: Int32Array.of(ids[ids.length - 1]), logits: 'last'}]))[0].logits!
        ids.push(argmax(row, 0, V))
      }
      greedy.push(ids)
      native.freeSequence(h, seq)
    }
    native.closeModel(h)
    await writeSafetensors(join(work, 'splash.safetensors'), tensors)
    for (const dtype of ['float32', 'bfloat16'] as const) {
      await exportHf({dir: pkg, out: join(work, `hf-${dtype}`), dtype})
    }
    index[variant] = {family: m.family, quant: m.weights.quant, prompt_ids: ref.prompt_ids, greedy, draft_taps: withDraft ? DRAFT_TAPS : null}
    process.stderr.write(`${variant}: built, run and exported\n`)
  }
  await writeFile(join(out, 'splash.json'), JSON.stringify(index, null, 1) + '\n')
}

await main()
