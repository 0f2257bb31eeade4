// Qwen3.5 / 3.6 / 3.8 dense hybrid (Gated DeltaNet + gated attention): config.json → Splash config, checkpoint
// names → Splash names. Takes Hugging Face checkpoints (Qwen3_5ForConditionalGeneration: model.language_model.*,
// vision model.visual.* built by ./vision.ts; Qwen3_5ForCausalLM: model.*) and MLX conversions
// (language_model.model.*, norms stored pre-shifted, conv1d [C, K, 1], quantized linears). mtp.* is dropped.
// The MoE sibling (../qwen3_5_moe) and Qwen3-Next (../qwen3_next) reuse these helpers by import.
import {SplashError} from '../../src/errors.js'
import type {Checkpoint, RawConfig} from '../../src/package/builder/checkpoint.js'
import type {FamilyModule, TensorPlan} from '../../src/package/builder/family.js'
import type {ModelConfig} from '../../src/package/manifest.js'
import {expertSlice, f32, linear, norm, stacked} from '../../src/package/builder/recipes.js'
import {sanitizeVision} from './vision.js'

const bad = (msg: string) => new SplashError('invalid_checkpoint', 'invalid_request', `config.json: ${msg}`)

/** The text config: `text_config` of a multimodal config, else the config itself. */
export function textConfig(raw: RawConfig): RawConfig {
  return (raw.text_config as RawConfig | undefined) ?? raw
}

export function reader(t: RawConfig) {
  const num = (key: string, fallback?: number): number => {
    const v = t[key]
    if (typeof v === 'number') return v
    if (fallback !== undefined) return fallback
    throw bad(`missing ${key}`)
  }
  return num
}

/** rope_parameters (new style) or the older top-level rope_theta / partial_rotary_factor / rope_scaling. */
export function ropeOf(t: RawConfig, defaults: {partial: number; mrope: number[] | null}) {
  const p = (t.rope_parameters ?? {}) as RawConfig
  const s = (t.rope_scaling ?? {}) as RawConfig
  const theta = Number(p.rope_theta ?? t.rope_theta ?? 10000)
  const partial = Number(p.partial_rotary_factor ?? t.partial_rotary_factor ?? defaults.partial)
  const section = (p.mrope_section ?? s.mrope_section ?? defaults.mrope) as number[] | null
  const interleaved = Boolean(p.mrope_interleaved ?? s.mrope_interleaved ?? section !== null)
  return {rope_theta: theta, partial_rotary_factor: partial, mrope_section: section, mrope_interleaved: interleaved}
}

/** layer_types when listed, else from full_attention_interval (layer i is full attention iff (i+1) % n == 0). */
export function layerTypesOf(t: RawConfig, layers: number): ModelConfig['layer_types'] {
  if (Array.isArray(t.layer_types)) {
    const lt = t.layer_types as string[]
    if (lt.length !== layers) throw bad(`layer_types has ${lt.length} entries for ${layers} layers`)
    for (const x of lt) if (x !== 'linear_attention' && x !== 'full_attention') throw bad(`unknown layer type ${x}`)
    return lt as ModelConfig['layer_types']
  }
  const n = Number(t.full_attention_interval ?? 4)
  return Array.from({length: layers}, (_, i) => ((i + 1) % n === 0 ? 'full_attention' : 'linear_attention'))
}

/** The normalised config of a Qwen3.5-style hybrid (dense or MoE) or Qwen3-Next. */
export function normalizeHybrid(raw: RawConfig, opts: {moe: boolean; mrope: number[] | null}): ModelConfig {
  const t = textConfig(raw)
  const num = reader(t)
  const H = num('hidden_size')
  const L = num('num_hidden_layers')
  const heads = num('num_attention_heads')
  const cfg: ModelConfig = {
    hidden_size: H,
    num_hidden_layers: L,
    vocab_size: num('vocab_size'),
    layer_types: layerTypesOf(t, L),
    rms_norm_eps: num('rms_norm_eps', 1e-6),
    num_attention_heads: heads,
    num_key_value_heads: num('num_key_value_heads', heads),
    head_dim: num('head_dim', H / heads),
    attn_output_gate: true, // always on in HF's code for these families, whatever the flag says
    ...ropeOf(t, {partial: 0.25, mrope: opts.mrope}),
    linear_num_key_heads: num('linear_num_key_heads', 16),
    linear_num_value_heads: num('linear_num_value_heads', 32),
    linear_key_head_dim: num('linear_key_head_dim', 128),
    linear_value_head_dim: num('linear_value_head_dim', 128),
    linear_conv_kernel_dim: num('linear_conv_kernel_dim', 4),
    intermediate_size: opts.moe ? 0 : num('intermediate_size'),
    tie_word_embeddings: Boolean(raw.tie_word_embeddings ?? t.tie_word_embeddings ?? false),
    max_position_embeddings: num('max_position_embeddings', 32768),
    qk_norm: 'zero_centred',
  }
  if (opts.moe) {
    const mlpOnly = t.mlp_only_layers as number[] | undefined
    if ((mlpOnly && mlpOnly.length > 0) || num('decoder_sparse_step', 1) !== 1) {
      throw bad('dense layers inside a MoE model (mlp_only_layers / decoder_sparse_step) are not supported')
    }
    cfg.num_experts = num('num_experts')
    cfg.num_experts_per_tok = num('num_experts_per_tok')
    cfg.moe_intermediate_size = num('moe_intermediate_size')
    cfg.shared_expert_intermediate_size = num('shared_expert_intermediate_size', 0)
    cfg.norm_topk_prob = Boolean(t.norm_topk_prob ?? true)
  }
  return cfg
}

/** Where the text model's tensors live, and whether this is an MLX conversion (norms pre-shifted). */
export function locate(ck: Checkpoint): {prefix: string; lmHead?: string; mlx: boolean} {
  const prefix = ['model.language_model.', 'language_model.model.', 'model.', ''].find(p => ck.tensorOf(`${p}embed_tokens`))
  if (prefix === undefined) throw new SplashError('invalid_checkpoint', 'invalid_request', `${ck.dir}: no embed_tokens tensor`)
  const lmHead = ['lm_head', 'language_model.lm_head'].find(n => ck.tensorOf(n))
  // mlx-lm's own test for a converted checkpoint: conv1d stored [C, K, 1].
  const conv = ck.names().find(n => n.endsWith('linear_attn.conv1d.weight'))
  const convShape = conv ? ck.info(conv).shape : undefined
  const mlx = convShape ? convShape.length === 3 && convShape[2] === 1 && convShape[1] > 1 : ck.names().some(n => n.endsWith('.scales'))
  return {prefix, lmHead, mlx}
}

export function attentionPlans(ck: Checkpoint, L: string, o: string, zeroCentred: boolean): TensorPlan[] {
  return [
    ...['q_proj', 'k_proj', 'v_proj', 'o_proj'].map(p => linear(ck, `${L}.self_attn.${p}`, `${o}.self_attn.${p}`)),
    norm(ck, `${L}.self_attn.q_norm.weight`, `${o}.self_attn.q_norm`, zeroCentred),
    norm(ck, `${L}.self_attn.k_norm.weight`, `${o}.self_attn.k_norm`, zeroCentred),
  ]
}

/** conv1d, A_log, dt_bias and the gated norm: the GDN tensors that are not projections. */
export function gdnStatePlans(ck: Checkpoint, L: string, o: string): TensorPlan[] {
  const conv = ck.shape(`${L}.linear_attn.conv1d.weight`) // HF [C, 1, K], MLX [C, K, 1]: same memory order
  return [
    f32(ck, `${L}.linear_attn.conv1d.weight`, `${o}.linear_attn.conv1d`, [conv[0], conv[1] * (conv[2] ?? 1)]),
    f32(ck, `${L}.linear_attn.A_log`, `${o}.linear_attn.A_log`),
    f32(ck, `${L}.linear_attn.dt_bias`, `${o}.linear_attn.dt_bias`),
    f32(ck, `${L}.linear_attn.norm.weight`, `${o}.linear_attn.norm`),
    linear(ck, `${L}.linear_attn.out_proj`, `${o}.linear_attn.out_proj`),
  ]
}

export function gdnPlans(ck: Checkpoint, L: string, o: string): TensorPlan[] {
  return [
    ...['in_proj_qkv', 'in_proj_z', 'in_proj_b', 'in_proj_a'].map(p => linear(ck, `${L}.linear_attn.${p}`, `${o}.linear_attn.${p}`)),
    ...gdnStatePlans(ck, L, o),
  ]
}

export function densePlans(ck: Checkpoint, L: string, o: string): TensorPlan[] {
  return ['gate_proj', 'up_proj', 'down_proj'].map(p => linear(ck, `${L}.mlp.${p}`, `${o}.mlp.${p}`))
}

/** Router, experts (packed gate_up_proj, MLX switch_mlp, or one set per expert) and the shared expert. */
export function moePlans(ck: Checkpoint, L: string, o: string, cfg: ModelConfig): TensorPlan[] {
  const E = cfg.num_experts!
  const I = cfg.moe_intermediate_size!
  const plans = [linear(ck, `${L}.mlp.gate`, `${o}.mlp.router`, {q8: true})]
  if (ck.tensorOf(`${L}.mlp.experts.gate_up_proj`)) {
    plans.push(
      expertSlice(ck, `${L}.mlp.experts.gate_up_proj`, `${o}.mlp.experts.gate_proj`, 0, I),
      expertSlice(ck, `${L}.mlp.experts.gate_up_proj`, `${o}.mlp.experts.up_proj`, I, I),
      linear(ck, `${L}.mlp.experts.down_proj`, `${o}.mlp.experts.down_proj`),
    )
  } else if (ck.tensorOf(`${L}.mlp.switch_mlp.gate_proj`)) {
    for (const p of ['gate_proj', 'up_proj', 'down_proj']) plans.push(linear(ck, `${L}.mlp.switch_mlp.${p}`, `${o}.mlp.experts.${p}`))
  } else {
    for (const p of ['gate_proj', 'up_proj', 'down_proj']) {
      plans.push(stacked(ck, Array.from({length: E}, (_, e) => `${L}.mlp.experts.${e}.${p}`), `${o}.mlp.experts.${p}`))
    }
  }
  if (cfg.shared_expert_intermediate_size) {
    for (const p of ['gate_proj', 'up_proj', 'down_proj']) plans.push(linear(ck, `${L}.mlp.shared_expert.${p}`, `${o}.mlp.shared_expert.${p}`))
    plans.push(linear(ck, `${L}.mlp.shared_expert_gate`, `${o}.mlp.shared_expert_gate`, {q8: true}))
  }
  return plans
}

export type LayerPlans = (ck: Checkpoint, L: string, o: string, cfg: ModelConfig) => TensorPlan[]

/** The whole model: embedding, every layer (mixer from layer_types, then the MLP), final norm, head. */
export function sanitizeHybrid(ck: Checkpoint, cfg: ModelConfig, gdn: LayerPlans, mlp: LayerPlans): TensorPlan[] {
  const {prefix, lmHead, mlx} = locate(ck)
  const zc = !mlx
  const plans: TensorPlan[] = [linear(ck, `${prefix}embed_tokens`, 'embed_tokens')]
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const L = `${prefix}layers.${i}`
    const o = `layers.${i}`
    plans.push(norm(ck, `${L}.input_layernorm.weight`, `${o}.input_layernorm`, zc))
    plans.push(norm(ck, `${L}.post_attention_layernorm.weight`, `${o}.post_attention_layernorm`, zc))
    plans.push(...(cfg.layer_types[i] === 'linear_attention' ? gdn(ck, L, o, cfg) : attentionPlans(ck, L, o, zc)))
    plans.push(...mlp(ck, L, o, cfg))
  }
  plans.push(norm(ck, `${prefix}norm.weight`, 'norm', zc))
  if (lmHead && !cfg.tie_word_embeddings) plans.push(linear(ck, lmHead, 'lm_head'))
  return plans
}

const qwen3_5: FamilyModule = {
  family: 'qwen3_5',
  architectures: ['Qwen3_5ForConditionalGeneration', 'Qwen3_5ForCausalLM'],
  modelTypes: ['qwen3_5', 'qwen3_5_text'],
  normalizeConfig: raw => normalizeHybrid(raw, {moe: false, mrope: [11, 11, 10]}),
  sanitize: (ck, cfg) => sanitizeHybrid(ck, cfg, gdnPlans, densePlans),
  vision: (ck, cfg) => sanitizeVision(ck, cfg.hidden_size),
}

export default qwen3_5
