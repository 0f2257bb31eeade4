// A DFlash draft checkpoint (z-lab layout: config.json with dflash_config, tensors fc, hidden_norm, norm and Qwen3
// decoder layers, optionally under "model.") → the draft config and tensor plans of a package. Draft norms are plain
// Qwen3 RMSNorms: the stored weight is the multiplier. A DFlash 2 checkpoint (DFlash2DraftModel) adds per layer an
// attention_conv and an mlp_conv (base_kernel [2, K, H], kernel_projection [2·K·H/G, H]) and a candidate_selector
// (hidden_projection [R, H], predecessor_codebook and successor_codebook [V, R], stored without ".weight").
import {SplashError} from '../../errors.js'
import type {Checkpoint, RawConfig} from './checkpoint.js'
import type {TensorPlan} from './family.js'
import type {DraftConfig} from '../manifest.js'
import {f32, linear, norm} from './recipes.js'

export function draftConfigOf(raw: RawConfig): DraftConfig {
  const d = (raw.dflash_config ?? {}) as RawConfig
  const need = (k: string, v: unknown): number => {
    if (typeof v !== 'number') throw new SplashError('invalid_checkpoint', 'invalid_request', `draft config.json: missing ${k}`)
    return v
  }
  const H = need('hidden_size', raw.hidden_size)
  const heads = need('num_attention_heads', raw.num_attention_heads)
  const opt = (v: unknown) => (typeof v === 'number' ? v : null)
  const L = need('num_hidden_layers', raw.num_hidden_layers)
  if (Number(d.input_embedding_scale ?? raw.input_embedding_scale ?? 1) !== 1) {
    throw new SplashError('unsupported_checkpoint', 'invalid_request', 'draft config.json: input_embedding_scale other than 1 is not supported')
  }
  const taps = (d.target_layer_ids ?? raw.target_layer_ids) as number[] | undefined
  if (!Array.isArray(taps) || taps.length === 0) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', 'draft config.json: missing dflash_config.target_layer_ids')
  }
  return {
    block_size: Number(raw.block_size ?? d.block_size ?? 16),
    mask_token_id: need('dflash_config.mask_token_id', d.mask_token_id ?? raw.mask_token_id),
    target_layer_ids: taps,
    num_hidden_layers: L,
    hidden_size: H,
    intermediate_size: need('intermediate_size', raw.intermediate_size),
    num_attention_heads: heads,
    num_key_value_heads: Number(raw.num_key_value_heads ?? heads),
    head_dim: Number(raw.head_dim ?? H / heads),
    rope_theta: Number(((raw.rope_parameters ?? {}) as RawConfig).rope_theta ?? raw.rope_theta ?? 1000000),
    rms_norm_eps: Number(raw.rms_norm_eps ?? 1e-6),
    ...attentionKinds(raw, L),
    conv_kernel_size: opt(raw.conv_kernel_size ?? d.conv_kernel_size),
    conv_group_size: opt(raw.conv_group_size ?? d.conv_group_size),
    selector_rank: opt(raw.selector_rank ?? d.selector_rank),
    selector_top_k: opt(raw.selector_top_k ?? d.selector_top_k),
    output_multiplier: opt(d.output_multiplier ?? raw.output_multiplier),
    final_logit_softcapping: opt(d.final_logit_softcapping ?? raw.final_logit_softcapping),
  }
}

/** Sliding window, per-layer kinds and causality as transformers' Qwen3Config resolves them (the window only with
 *  use_sliding_window; default kinds: sliding from max_window_layers on). */
function attentionKinds(raw: RawConfig, L: number): Pick<DraftConfig, 'sliding_window' | 'layer_types' | 'is_causal'> {
  const w = raw.sliding_window ?? raw.sliding_window_size
  const window = typeof w === 'number' && raw.use_sliding_window !== false ? w : null
  let kinds = raw.layer_types as unknown
  if (kinds === undefined || kinds === null) {
    const from = Number(raw.max_window_layers ?? 28)
    kinds = Array.from({length: L}, (_, i) => (window !== null && i >= from ? 'sliding_attention' : 'full_attention'))
  }
  if (!Array.isArray(kinds) || kinds.length !== L || kinds.some(k => k !== 'sliding_attention' && k !== 'full_attention')) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `draft config.json: layer_types must list ${L} of full_attention / sliding_attention`)
  }
  const types = kinds as Array<'sliding_attention' | 'full_attention'>
  // a sliding layer without a window is a full layer (the reference code sets no window then)
  const layer_types = window === null ? types.map(() => 'full_attention' as const) : types
  const causal = raw.is_causal
  if (window === null && causal === undefined && types.includes('sliding_attention')) {
    throw new SplashError('unsupported_checkpoint', 'invalid_request', 'draft config.json: sliding_attention layers without a sliding window')
  }
  return {sliding_window: window, layer_types, is_causal: typeof causal === 'boolean' ? causal : null}
}

export function draftPlans(ck: Checkpoint, cfg: DraftConfig): TensorPlan[] {
  const p = ck.tensorOf('fc') ? '' : ck.tensorOf('model.fc') ? 'model.' : undefined
  if (p === undefined) throw new SplashError('invalid_checkpoint', 'invalid_request', `${ck.dir}: not a DFlash draft (no fc tensor)`)
  const plans: TensorPlan[] = [linear(ck, `${p}fc`, 'fc'), norm(ck, `${p}hidden_norm.weight`, 'hidden_norm', false)]
  for (let i = 0; i < cfg.num_hidden_layers; i++) {
    const L = `${p}layers.${i}`
    const o = `layers.${i}`
    plans.push(norm(ck, `${L}.input_layernorm.weight`, `${o}.input_layernorm`, false))
    plans.push(norm(ck, `${L}.post_attention_layernorm.weight`, `${o}.post_attention_layernorm`, false))
    for (const x of ['q_proj', 'k_proj', 'v_proj', 'o_proj']) plans.push(linear(ck, `${L}.self_attn.${x}`, `${o}.self_attn.${x}`))
    plans.push(norm(ck, `${L}.self_attn.q_norm.weight`, `${o}.self_attn.q_norm`, false))
    plans.push(norm(ck, `${L}.self_attn.k_norm.weight`, `${o}.self_attn.k_norm`, false))
    for (const x of ['gate_proj', 'up_proj', 'down_proj']) plans.push(linear(ck, `${L}.mlp.${x}`, `${o}.mlp.${x}`))
    if (cfg.conv_kernel_size !== null) {
      for (const c of ['attention_conv', 'mlp_conv']) {
        plans.push(f32(ck, `${L}.${c}.base_kernel`, `${o}.${c}.base_kernel`))
        plans.push(linear(ck, `${L}.${c}.kernel_projection`, `${o}.${c}.kernel_projection`))
      }
    }
  }
  plans.push(norm(ck, `${p}norm.weight`, 'norm', false))
  if (cfg.selector_rank !== null) {
    for (const x of ['hidden_projection', 'predecessor_codebook', 'successor_codebook']) {
      plans.push(linear(ck, `${p}candidate_selector.${x}`, `candidate_selector.${x}`))
    }
  }
  return plans
}
