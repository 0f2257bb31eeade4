// Qwen3.5 / 3.6 MoE hybrid: the dense hybrid's names (../qwen3_5) with a sparse MoE block on every layer: router,
// experts (packed gate_up_proj [E, 2I, H] rows [gate; up], one set per expert experts.N.*, or MLX switch_mlp.*)
// and the sigmoid-gated shared expert.
import type {FamilyModule} from '../../src/package/builder/family.js'
import {gdnPlans, moePlans, normalizeHybrid, sanitizeHybrid} from '../qwen3_5/sanitize.js'
import {sanitizeVision} from '../qwen3_5/vision.js'

const qwen3_5_moe: FamilyModule = {
  family: 'qwen3_5_moe',
  architectures: ['Qwen3_5MoeForConditionalGeneration', 'Qwen3_5MoeForCausalLM'],
  modelTypes: ['qwen3_5_moe', 'qwen3_5_moe_text'],
  normalizeConfig: raw => normalizeHybrid(raw, {moe: true, mrope: [11, 11, 10]}),
  sanitize: (ck, cfg) => sanitizeHybrid(ck, cfg, gdnPlans, moePlans),
  vision: (ck, cfg) => sanitizeVision(ck, cfg.hidden_size),
}

export default qwen3_5_moe
