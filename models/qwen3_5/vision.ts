// The Qwen3.5 vision tower (Hugging Face `model.visual.*`, Qwen3-VL minus DeepStack) → Splash `visual.*` tensors and
// the manifest's `vision` object: encoder shape from `vision_config`, preprocessing from preprocessor_config.json
// (Qwen2-VL image processor keys; defaults when the file is absent), prompt token ids from the top-level config.
// MLX conversions (`vision_tower.*`, channels-last patch embedding) are not built yet: their packages are text only.
import {SplashError} from '../../src/errors.js'
import type {Checkpoint, RawConfig} from '../../src/package/builder/checkpoint.js'
import type {TensorPlan} from '../../src/package/builder/family.js'
import type {VisionManifest} from '../../src/package/manifest.js'
import {f32, linear} from '../../src/package/builder/recipes.js'

const P = 'model.visual'
/** Qwen3-VL / Qwen3.5 preprocessor defaults (the checkpoints' preprocessor_config.json). */
const DEFAULT_PRE = {min_pixels: 65536, max_pixels: 16777216, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5]}
/** The family's special ids (its tokenizer's added tokens) when config.json does not name them. */
const DEFAULT_TOKENS = {vision_start: 248053, vision_end: 248054, image_pad: 248056}

const bad = (msg: string) => new SplashError('invalid_checkpoint', 'invalid_request', `config.json: ${msg}`)

function visionConfigOf(raw: RawConfig, textHidden: number): VisionManifest['config'] {
  const v = raw.vision_config as RawConfig
  const num = (k: string, d?: number): number => {
    const x = v[k] ?? d
    if (typeof x !== 'number') throw bad(`vision_config.${k} is missing`)
    return x
  }
  const act = String(v.hidden_act ?? 'gelu_pytorch_tanh')
  if (act !== 'gelu_pytorch_tanh' && act !== 'gelu') throw bad(`vision_config.hidden_act ${act} is not supported`)
  const rope = (v.rope_parameters ?? {}) as RawConfig
  const out = num('out_hidden_size', textHidden)
  if (out !== textHidden) throw bad(`vision_config.out_hidden_size ${out} differs from the text hidden size ${textHidden}`)
  const deep = v.deepstack_visual_indexes as unknown[] | undefined
  if (deep && deep.length > 0) throw bad('DeepStack vision towers (deepstack_visual_indexes) are not supported')
  return {
    depth: num('depth'),
    hidden_size: num('hidden_size'),
    num_heads: num('num_heads'),
    intermediate_size: num('intermediate_size'),
    patch_size: num('patch_size', 16),
    temporal_patch_size: num('temporal_patch_size', 2),
    spatial_merge_size: num('spatial_merge_size', 2),
    in_channels: num('in_channels', 3),
    out_hidden_size: out,
    num_position_embeddings: num('num_position_embeddings'),
    hidden_act: act,
    rope_theta: Number(rope.rope_theta ?? v.rope_theta ?? 10000),
  }
}

async function preprocessorOf(ck: Checkpoint, c: VisionManifest['config']): Promise<VisionManifest['preprocessor']> {
  const p = await ck.json('preprocessor_config.json')
  if (!p) return DEFAULT_PRE
  const size = (p.size ?? {}) as RawConfig
  const min = Number(size.shortest_edge ?? p.min_pixels ?? DEFAULT_PRE.min_pixels)
  const max = Number(size.longest_edge ?? p.max_pixels ?? DEFAULT_PRE.max_pixels)
  for (const [k, want] of [['patch_size', c.patch_size], ['temporal_patch_size', c.temporal_patch_size], ['merge_size', c.spatial_merge_size]] as const) {
    if (p[k] !== undefined && p[k] !== want) throw bad(`preprocessor_config.json ${k} ${String(p[k])} differs from vision_config (${want})`)
  }
  const triple = (x: unknown, d: number[]) => (Array.isArray(x) && x.length === 3 ? x.map(Number) : d)
  return {min_pixels: min, max_pixels: max, image_mean: triple(p.image_mean, DEFAULT_PRE.image_mean), image_std: triple(p.image_std, DEFAULT_PRE.image_std)}
}

/** The vision tower of a Qwen3_5ForConditionalGeneration checkpoint, or null when it has none. */
export async function sanitizeVision(ck: Checkpoint, textHidden: number): Promise<{vision: VisionManifest; plans: TensorPlan[]} | null> {
  if (!ck.config.vision_config || !ck.tensorOf(`${P}.patch_embed.proj`)) return null
  const config = visionConfigOf(ck.config, textHidden)
  const tok = (k: string, d: number) => Number(ck.config[k] ?? d)
  const vision: VisionManifest = {
    config,
    preprocessor: await preprocessorOf(ck, config),
    tokens: {
      vision_start: tok('vision_start_token_id', DEFAULT_TOKENS.vision_start),
      vision_end: tok('vision_end_token_id', DEFAULT_TOKENS.vision_end),
      image_pad: tok('image_token_id', DEFAULT_TOKENS.image_pad),
    },
  }
  const H = config.hidden_size
  const patchDim = config.in_channels * config.temporal_patch_size * config.patch_size ** 2
  const pe = ck.shape(`${P}.patch_embed.proj`)
  if (pe.reduce((a, b) => a * b, 1) !== H * patchDim) throw bad(`${P}.patch_embed.proj.weight has shape [${pe}]`)
  // a linear kept bf16, plus its bias as F32
  const vl = (src: string, name: string): TensorPlan[] => [{...linear(ck, src, name), keep16: true}, f32(ck, `${src}.bias`, `${name}.bias`)]
  const ln = (src: string, name: string): TensorPlan[] => [f32(ck, `${src}.weight`, `${name}.weight`), f32(ck, `${src}.bias`, `${name}.bias`)]
  const plans: TensorPlan[] = [
    // Conv3d [H, C, T, P, P] with stride = kernel is a linear over the flattened (C, T, P, P) patch
    {name: 'visual.patch_embed', kind: 'linear', shape: [H, patchDim], keep16: true, chunks: [() => ck.readF32(`${P}.patch_embed.proj.weight`)]},
    f32(ck, `${P}.patch_embed.proj.bias`, 'visual.patch_embed.bias'),
    f32(ck, `${P}.pos_embed.weight`, 'visual.pos_embed'),
  ]
  for (let i = 0; i < config.depth; i++) {
    const s = `${P}.blocks.${i}`
    const o = `visual.blocks.${i}`
    plans.push(...ln(`${s}.norm1`, `${o}.norm1`), ...ln(`${s}.norm2`, `${o}.norm2`))
    plans.push(...vl(`${s}.attn.qkv`, `${o}.attn.qkv`), ...vl(`${s}.attn.proj`, `${o}.attn.proj`))
    plans.push(...vl(`${s}.mlp.linear_fc1`, `${o}.mlp.fc1`), ...vl(`${s}.mlp.linear_fc2`, `${o}.mlp.fc2`))
  }
  plans.push(...ln(`${P}.merger.norm`, 'visual.merger.norm'))
  plans.push(...vl(`${P}.merger.linear_fc1`, 'visual.merger.fc1'), ...vl(`${P}.merger.linear_fc2`, 'visual.merger.fc2'))
  return {vision, plans}
}
