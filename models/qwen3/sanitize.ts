// Plain Qwen3 (Qwen3ForCausalLM, model.*): every layer full attention without output gate, plain RMSNorms (the
// stored weight is the multiplier, in HF and MLX alike), full rotary, tied or untied head.
import type {RawConfig} from '../../src/package/builder/checkpoint.js'
import type {FamilyModule, TensorPlan} from '../../src/package/builder/family.js'
import type {ModelConfig} from '../../src/package/manifest.js'
import {linear, norm} from '../../src/package/builder/recipes.js'
import {attentionPlans, densePlans, locate, reader, ropeOf} from '../qwen3_5/sanitize.js'

function normalize(raw: RawConfig): ModelConfig {
  const num = reader(raw)
  const H = num('hidden_size')
  const L = num('num_hidden_layers')
  const heads = num('num_attention_heads')
  return {
    hidden_size: H,
    num_hidden_layers: L,
    vocab_size: num('vocab_size'),
    layer_types: Array.from({length: L}, () => 'full_attention' as const),
    rms_norm_eps: num('rms_norm_eps', 1e-6),
    num_attention_heads: heads,
    num_key_value_heads: num('num_key_value_heads', heads),
    head_dim: num('head_dim', H / heads),
    attn_output_gate: false,
    ...ropeOf(raw, {partial: 1, mrope: null}),
    intermediate_size: num('intermediate_size'),
    tie_word_embeddings: Boolean(raw.tie_word_embeddings ?? false),
    max_position_embeddings: num('max_position_embeddings', 40960),
    qk_norm: 'plain',
  }
}

const qwen3: FamilyModule = {
  family: 'qwen3',
  architectures: ['Qwen3ForCausalLM'],
  modelTypes: ['qwen3'],
  normalizeConfig: normalize,
  sanitize(ck, cfg) {
    const {prefix, lmHead} = locate(ck)
    const plans: TensorPlan[] = [linear(ck, `${prefix}embed_tokens`, 'embed_tokens')]
    for (let i = 0; i < cfg.num_hidden_layers; i++) {
      const L = `${prefix}layers.${i}`
      const o = `layers.${i}`
      plans.push(norm(ck, `${L}.input_layernorm.weight`, `${o}.input_layernorm`, false))
      plans.push(norm(ck, `${L}.post_attention_layernorm.weight`, `${o}.post_attention_layernorm`, false))
      plans.push(...attentionPlans(ck, L, o, false), ...densePlans(ck, L, o))
    }
    plans.push(norm(ck, `${prefix}norm.weight`, 'norm', false))
    if (lmHead && !cfg.tie_word_embeddings) plans.push(linear(ck, lmHead, 'lm_head'))
    return plans
  },
}

export default qwen3
