// Qwen3-Next (Qwen3NextForCausalLM, model.layers.*): the Qwen3.5-MoE layout except that the GDN input projections
// are fused and interleaved per key-head group g = 0..nk-1:
//   in_proj_qkvz rows [q_g (dk) | k_g (dk) | v_g (r·dv) | z_g (r·dv)],  in_proj_ba rows [b_g (r) | a_g (r)]
// (r = nv / nk). They are de-interleaved into Splash's in_proj_qkv = [q all | k all | v all], in_proj_z, in_proj_b
// and in_proj_a, so the conv1d channel order is the Qwen3.5 one. MLX conversions keep the fused tensors (quantized):
// they are dequantized, de-interleaved and quantized again.
import type {Checkpoint} from '../../src/package/builder/checkpoint.js'
import type {FamilyModule, TensorPlan} from '../../src/package/builder/family.js'
import type {ModelConfig} from '../../src/package/manifest.js'
import {computed, gatherRows} from '../../src/package/builder/recipes.js'
import {gdnStatePlans, moePlans, normalizeHybrid, sanitizeHybrid} from '../qwen3_5/sanitize.js'

/** Row ranges of the fused projections, per output tensor. Exported for tests. */
export function fusedRanges(cfg: ModelConfig) {
  const nk = cfg.linear_num_key_heads!
  const dk = cfg.linear_key_head_dim!
  const dv = cfg.linear_value_head_dim!
  const r = cfg.linear_num_value_heads! / nk
  const G = 2 * dk + 2 * r * dv
  const groups = Array.from({length: nk}, (_, g) => g)
  return {
    qkv: [
      ...groups.map(g => [g * G, dk] as [number, number]),
      ...groups.map(g => [g * G + dk, dk] as [number, number]),
      ...groups.map(g => [g * G + 2 * dk, r * dv] as [number, number]),
    ],
    z: groups.map(g => [g * G + 2 * dk + r * dv, r * dv] as [number, number]),
    b: groups.map(g => [g * 2 * r, r] as [number, number]),
    a: groups.map(g => [g * 2 * r + r, r] as [number, number]),
  }
}

function fusedGdnPlans(ck: Checkpoint, L: string, o: string, cfg: ModelConfig): TensorPlan[] {
  const ranges = fusedRanges(cfg)
  const H = cfg.hidden_size
  const part = (src: string, name: string, rs: [number, number][]) => {
    const rows = rs.reduce((n, [, len]) => n + len, 0)
    return computed(`${o}.linear_attn.${name}`, [rows, H], async () => gatherRows(await ck.readF32(src), H, rs))
  }
  const qkvz = `${L}.linear_attn.in_proj_qkvz`
  const ba = `${L}.linear_attn.in_proj_ba`
  return [
    part(qkvz, 'in_proj_qkv', ranges.qkv),
    part(qkvz, 'in_proj_z', ranges.z),
    part(ba, 'in_proj_b', ranges.b),
    part(ba, 'in_proj_a', ranges.a),
    ...gdnStatePlans(ck, L, o),
  ]
}

const qwen3_next: FamilyModule = {
  family: 'qwen3_next',
  architectures: ['Qwen3NextForCausalLM'],
  modelTypes: ['qwen3_next'],
  normalizeConfig: raw => normalizeHybrid(raw, {moe: true, mrope: null}),
  sanitize: (ck, cfg) => sanitizeHybrid(ck, cfg, fusedGdnPlans, moePlans),
}

export default qwen3_next
