// splash.json, format 1: the TypeBox schema (the contract documented in docs/package-format.md), reading
// and validation with errors that name the field.
import {readFile} from 'node:fs/promises'
import {join} from 'node:path'
import Type, {type Static} from 'typebox'
import Value from 'typebox/value'
import {SplashError} from '../errors.js'

export const MANIFEST_FILE = 'splash.json'
export const FAMILIES = ['qwen3_5', 'qwen3_5_moe', 'qwen3_next', 'qwen3'] as const
export const QUANTS = ['q4', 'q8', 'bf16'] as const

const Int = (min = 0) => Type.Integer({minimum: min})
const Nullable = <T extends Type.TSchema>(t: T) => Type.Union([t, Type.Null()])

export const ModelConfigSchema = Type.Object({
  hidden_size: Int(1),
  num_hidden_layers: Int(1),
  vocab_size: Int(1),
  layer_types: Type.Array(Type.Union([Type.Literal('linear_attention'), Type.Literal('full_attention')])),
  rms_norm_eps: Type.Number({exclusiveMinimum: 0}),
  num_attention_heads: Int(1),
  num_key_value_heads: Int(1),
  head_dim: Int(1),
  attn_output_gate: Type.Boolean(),
  rope_theta: Type.Number({exclusiveMinimum: 0}),
  partial_rotary_factor: Type.Number({exclusiveMinimum: 0, maximum: 1}),
  mrope_section: Nullable(Type.Array(Int())),
  mrope_interleaved: Type.Boolean(),
  linear_num_key_heads: Type.Optional(Int(1)),
  linear_num_value_heads: Type.Optional(Int(1)),
  linear_key_head_dim: Type.Optional(Int(1)),
  linear_value_head_dim: Type.Optional(Int(1)),
  linear_conv_kernel_dim: Type.Optional(Int(1)),
  intermediate_size: Int(),
  num_experts: Type.Optional(Int(1)),
  num_experts_per_tok: Type.Optional(Int(1)),
  moe_intermediate_size: Type.Optional(Int(1)),
  shared_expert_intermediate_size: Type.Optional(Int()),
  norm_topk_prob: Type.Optional(Type.Boolean()),
  tie_word_embeddings: Type.Boolean(),
  max_position_embeddings: Int(1),
  qk_norm: Type.Union([Type.Literal('zero_centred'), Type.Literal('plain')]),
})
export type ModelConfig = Static<typeof ModelConfigSchema>

export const DraftConfigSchema = Type.Object({
  block_size: Int(1),
  mask_token_id: Int(),
  target_layer_ids: Type.Array(Int(), {minItems: 1}),
  num_hidden_layers: Int(1),
  hidden_size: Int(1),
  intermediate_size: Int(1),
  num_attention_heads: Int(1),
  num_key_value_heads: Int(1),
  head_dim: Int(1),
  rope_theta: Type.Number({exclusiveMinimum: 0}),
  rms_norm_eps: Type.Number({exclusiveMinimum: 0}),
  sliding_window: Nullable(Int(1)),
  conv_kernel_size: Nullable(Int(1)),
  conv_group_size: Nullable(Int(1)),
  selector_rank: Nullable(Int(1)),
  selector_top_k: Nullable(Int(1)),
  // DFlash 2 (docs/package-format.md, "The draft"): per-layer attention kind (absent: every layer full), block causality
  // (null/absent: sliding layers causal, full ones bidirectional, as the reference code decides), and the
  // transform of the draft's logits (× output_multiplier, then c·tanh(x/c) with c = final_logit_softcapping)
  layer_types: Type.Optional(Type.Array(Type.Union([Type.Literal('full_attention'), Type.Literal('sliding_attention')]))),
  is_causal: Type.Optional(Nullable(Type.Boolean())),
  output_multiplier: Type.Optional(Nullable(Type.Number({exclusiveMinimum: 0}))),
  final_logit_softcapping: Type.Optional(Nullable(Type.Number({minimum: 0}))),
})
export type DraftConfig = Static<typeof DraftConfigSchema>

/** The vision tower (docs/package-format.md): encoder shape, image preprocessing, prompt token ids. */
export const VisionSchema = Type.Object({
  config: Type.Object({
    depth: Int(1),
    hidden_size: Int(1),
    num_heads: Int(1),
    intermediate_size: Int(1),
    patch_size: Int(1),
    temporal_patch_size: Int(1),
    spatial_merge_size: Int(1),
    in_channels: Int(1),
    out_hidden_size: Int(1),
    num_position_embeddings: Int(1),
    hidden_act: Type.Union([Type.Literal('gelu_pytorch_tanh'), Type.Literal('gelu')]),
    rope_theta: Type.Number({exclusiveMinimum: 0}),
  }),
  preprocessor: Type.Object({
    min_pixels: Int(1),
    max_pixels: Int(1),
    image_mean: Type.Array(Type.Number(), {minItems: 3, maxItems: 3}),
    image_std: Type.Array(Type.Number({exclusiveMinimum: 0}), {minItems: 3, maxItems: 3}),
  }),
  tokens: Type.Object({vision_start: Int(), vision_end: Int(), image_pad: Int()}),
})
export type VisionManifest = Static<typeof VisionSchema>

const FileEntrySchema = Type.Object({
  path: Type.String({minLength: 1}),
  size: Int(),
  sha256: Type.String({pattern: '^[0-9a-f]{64}$'}),
})
export type FileEntry = Static<typeof FileEntrySchema>

export const ManifestSchema = Type.Object({
  format: Type.Literal(1),
  name: Type.String({minLength: 1}),
  family: Type.Union([Type.Literal('qwen3_5'), Type.Literal('qwen3_5_moe'), Type.Literal('qwen3_next'), Type.Literal('qwen3')]),
  architecture: Type.String({minLength: 1}),
  config: ModelConfigSchema,
  tokenizer: Type.Object({
    file: Type.String({minLength: 1}),
    chat_template: Type.String({minLength: 1}),
    eos_token_ids: Type.Array(Int(), {minItems: 1}),
    pad_token_id: Nullable(Int()),
  }),
  reasoning: Type.Object({
    default: Type.String(),
    efforts: Type.Record(Type.String(), Int()),
  }),
  /** Sampling a request gets for the fields it leaves unset (from the checkpoint's generation_config.json). */
  sampling: Type.Optional(
    Type.Object({
      temperature: Type.Optional(Type.Number({minimum: 0, maximum: 2})),
      top_p: Type.Optional(Type.Number({exclusiveMinimum: 0, maximum: 1})),
      top_k: Type.Optional(Int()),
      min_p: Type.Optional(Type.Number({minimum: 0, maximum: 1})),
      repetition_penalty: Type.Optional(Type.Number({exclusiveMinimum: 0, maximum: 10})),
    }),
  ),
  weights: Type.Object({
    files: Type.Array(Type.String({minLength: 1}), {minItems: 1}),
    quant: Type.Union([Type.Literal('q4'), Type.Literal('q8'), Type.Literal('bf16')]),
    group_size: Type.Literal(64),
  }),
  draft: Nullable(Type.Object({config: DraftConfigSchema, files: Type.Array(Type.String({minLength: 1}), {minItems: 1})})),
  vision: Nullable(VisionSchema),
  kernels: Type.Array(
    Type.Object({backend: Type.String({minLength: 1}), arch: Type.String({minLength: 1}), abi: Int(), file: Type.String({minLength: 1})}),
  ),
  provenance: Type.Object({
    source: Type.String(),
    builder: Type.String(),
    kind: Type.Union([Type.Literal('trained'), Type.Literal('converted'), Type.Literal('synthetic')]),
  }),
  files: Type.Array(FileEntrySchema, {minItems: 1}),
})
export type Manifest = Static<typeof ManifestSchema>
export type Family = (typeof FAMILIES)[number]
export type Quant = (typeof QUANTS)[number]

export const DEFAULT_REASONING: Manifest['reasoning'] = {
  default: 'medium',
  efforts: {none: 0, low: 1024, medium: 4096, high: 16384, xhigh: 32768},
}

function invalid(where: string, message: string): SplashError {
  return new SplashError('invalid_manifest', 'invalid_request', `${where}: invalid splash.json: ${message}`)
}

/** Checks a parsed manifest against the schema and the cross-field rules. `where` names it in errors. */
export function validateManifest(value: unknown, where = MANIFEST_FILE): Manifest {
  const format = (value as {format?: unknown} | null)?.format
  if (value !== null && typeof value === 'object' && format !== undefined && format !== 1) {
    throw invalid(where, `format ${JSON.stringify(format)} is not supported (this Splash reads format 1)`)
  }
  if (!Value.Check(ManifestSchema, value)) {
    const errs = [...Value.Errors(ManifestSchema, value)]
    // Unions report every branch; the deepest path is the most useful one.
    errs.sort((a, b) => b.instancePath.length - a.instancePath.length)
    const e = errs[0]
    throw invalid(where, `${e?.instancePath || '/'} ${e?.message ?? 'does not match the schema'}`)
  }
  const m = value as Manifest
  const listed = new Set(m.files.map(f => f.path))
  for (const f of m.files) {
    if (f.path.startsWith('/') || f.path.split('/').includes('..') || f.path.includes('\\')) {
      throw invalid(where, `file path "${f.path}" must be relative and stay inside the package`)
    }
    if (f.path === MANIFEST_FILE) throw invalid(where, `files must not list ${MANIFEST_FILE} itself`)
  }
  if (listed.size !== m.files.length) throw invalid(where, 'a file is listed twice in files')
  const referenced = [
    ...m.weights.files,
    ...(m.draft?.files ?? []),
    m.tokenizer.file,
    m.tokenizer.chat_template,
    ...m.kernels.map(k => k.file),
  ]
  for (const p of referenced) if (!listed.has(p)) throw invalid(where, `"${p}" is used but not listed in files`)
  if (m.config.layer_types.length !== m.config.num_hidden_layers) {
    throw invalid(where, `config.layer_types has ${m.config.layer_types.length} entries for ${m.config.num_hidden_layers} layers`)
  }
  if (!(m.reasoning.default in m.reasoning.efforts)) {
    throw invalid(where, `reasoning.default "${m.reasoning.default}" is not one of reasoning.efforts`)
  }
  if (m.draft) {
    const bad = m.draft.config.target_layer_ids.find(l => l >= m.config.num_hidden_layers)
    if (bad !== undefined) throw invalid(where, `draft.config.target_layer_ids has layer ${bad} of ${m.config.num_hidden_layers}`)
    const why = draftConfigProblem(m.draft.config, m.config.vocab_size) ?? draftFitProblem(m.draft.config, m.config)
    if (why) throw invalid(where, `draft.config: ${why}`)
  }
  return m
}

/** What the native core needs of a draft against its target (core-native/model/load/weights.cpp), field by field. */
function draftFitProblem(d: DraftConfig, c: Manifest['config']): string | undefined {
  if (d.hidden_size !== c.hidden_size) return `hidden_size is ${d.hidden_size}, expected ${c.hidden_size} (config.hidden_size: the draft reads the target's hidden features)`
  if (d.block_size < 2) return `block_size is ${d.block_size}, expected at least 2`
  if (d.mask_token_id < 0 || d.mask_token_id >= c.vocab_size) return `mask_token_id is ${d.mask_token_id}, expected an id below config.vocab_size ${c.vocab_size}`
  if (d.num_attention_heads % d.num_key_value_heads !== 0) {
    return `num_attention_heads ${d.num_attention_heads} is not a multiple of num_key_value_heads ${d.num_key_value_heads}`
  }
  if (d.head_dim > 512 || d.head_dim % 2 !== 0) return `head_dim is ${d.head_dim}, expected an even number up to 512`
  return undefined
}

/** What is inconsistent in a draft config (the DFlash 2 keys go together), or undefined. */
export function draftConfigProblem(d: DraftConfig, vocab: number): string | undefined {
  if (d.layer_types && d.layer_types.length !== d.num_hidden_layers) {
    return `layer_types has ${d.layer_types.length} entries for ${d.num_hidden_layers} layers`
  }
  if (d.layer_types?.includes('sliding_attention') && d.sliding_window === null) return 'sliding_attention layers need sliding_window'
  if ((d.conv_kernel_size === null) !== (d.conv_group_size === null)) return 'conv_kernel_size and conv_group_size go together'
  if (d.conv_group_size !== null && d.hidden_size % d.conv_group_size !== 0) {
    return `hidden_size ${d.hidden_size} is not a multiple of conv_group_size ${d.conv_group_size}`
  }
  if ((d.selector_rank === null) !== (d.selector_top_k === null)) return 'selector_rank and selector_top_k go together'
  if (d.selector_top_k !== null && d.selector_top_k > vocab) return `selector_top_k ${d.selector_top_k} exceeds the vocabulary (${vocab})`
  return undefined
}

/** Reads and validates `<dir>/splash.json`. */
export async function readManifest(dir: string): Promise<Manifest> {
  const path = join(dir, MANIFEST_FILE)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new SplashError('manifest_not_found', 'not_found', `${path}: no splash.json`, {cause: err})
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (err) {
    throw invalid(path, `not JSON (${(err as Error).message})`)
  }
  return validateManifest(json, path)
}

/** Serialises a manifest the way packages store it (2-space JSON, trailing newline). */
export function formatManifest(m: Manifest): string {
  return JSON.stringify(m, null, 2) + '\n'
}
