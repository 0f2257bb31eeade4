// A DFlash draft checkpoint (z-lab layout: config.json with dflash_config, tensors fc, hidden_norm, norm and Qwen3
// decoder layers, optionally under "model.") → the draft config and tensor plans of a package. Draft norms are plain
// Qwen3 RMSNorms: the stored weight is the multiplier.
import {SplashError} from '../errors.js'
import type {Checkpoint, RawConfig} from './checkpoint.js'
import type {TensorPlan} from './family.js'
import type {DraftConfig} from './manifest.js'
import {linear, norm} from './recipes.js'

export function draftConfigOf(raw: RawConfig): DraftConfig {
  const d = (raw.dflash_config ?? {}) as RawConfig
  const need = (k: string, v: unknown): number => {
    if (typeof v !== 'number') throw new SplashError('invalid_checkpoint', 'invalid_request', `draft config.json: missing ${k}`)
    return v
  }
  const H = need('hidden_size', raw.hidden_size)
  const heads = need('num_attention_heads', raw.num_attention_heads)
  const opt = (v: unknown) => (typeof v === 'number' ? v : null)
  const taps = (d.target_layer_ids ?? raw.target_layer_ids) as number[] | undefined
  if (!Array.isArray(taps) || taps.length === 0) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', 'draft config.json: missing dflash_config.target_layer_ids')
  }
  return {
    block_size: Number(raw.block_size ?? d.block_size ?? 16),
    mask_token_id: need('dflash_config.mask_token_id', d.mask_token_id ?? raw.mask_token_id),
    target_layer_ids: taps,
    num_hidden_layers: need('num_hidden_layers', raw.num_hidden_layers),
    hidden_size: H,
    intermediate_size: need('intermediate_size', raw.intermediate_size),
    num_attention_heads: heads,
    num_key_value_heads: Number(raw.num_key_value_heads ?? heads),
    head_dim: Number(raw.head_dim ?? H / heads),
    rope_theta: Number(((raw.rope_parameters ?? {}) as RawConfig).rope_theta ?? raw.rope_theta ?? 1000000),
    rms_norm_eps: Number(raw.rms_norm_eps ?? 1e-6),
    sliding_window: opt(raw.sliding_window ?? raw.sliding_window_size),
    conv_kernel_size: opt(raw.conv_kernel_size ?? d.conv_kernel_size),
    conv_group_size: opt(raw.conv_group_size ?? d.conv_group_size),
    selector_rank: opt(raw.selector_rank ?? d.selector_rank),
    selector_top_k: opt(raw.selector_top_k ?? d.selector_top_k),
  }
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
  }
  plans.push(norm(ck, `${p}norm.weight`, 'norm', false))
  return plans
}
