// The Splash → Transformers mapping used by `splash package export --hf` (export-hf.ts): for every tensor of the
// text model, its Hugging Face name and shape, and where its rows come from in the package. Names follow the
// text-only classes (Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, Qwen3NextForCausalLM, Qwen3ForCausalLM: `model.*`,
// experts one tensor set per expert as save_pretrained writes them). Zero-centred norms, stored in a package as the
// multiplier 1 + w (recipes.ts `norm`), go back to w. Qwen3-Next's fused GDN projections are interleaved again per
// key-head group, the inverse of models/qwen3_next/sanitize.ts.
import {modelLayout, draftLayout} from '../layout.js'
import type {DraftConfig, Manifest, ModelConfig} from '../manifest.js'

/** Rows [r0, r1) of package tensor `name` seen as 2-D. */
export interface Segment {
  name: string
  r0: number
  r1: number
}

export interface HfTensor {
  name: string
  shape: number[]
  /** Columns of the 2-D view (the last dimension; a 1-D tensor is one row). */
  cols: number
  segments: Segment[]
  /** Subtract 1 (a zero-centred norm). */
  minusOne?: boolean
}

const ZERO_CENTRED = /(^norm|input_layernorm|post_attention_layernorm|self_attn\.[qk]_norm)$/

function rowsOf(shape: number[]): number {
  return shape.length === 1 ? 1 : shape.slice(0, -1).reduce((a, b) => a * b, 1)
}

function whole(name: string, hfName: string, shape: number[], hfShape = shape): HfTensor {
  return {name: hfName, shape: hfShape, cols: shape[shape.length - 1], segments: [{name, r0: 0, r1: rowsOf(shape)}]}
}

/** Qwen3-Next's in_proj_qkvz and in_proj_ba from Splash's split projections, group by group. */
function fusedGdn(o: string, L: string, c: ModelConfig): HfTensor[] {
  const nk = c.linear_num_key_heads!
  const dk = c.linear_key_head_dim!
  const dv = c.linear_value_head_dim!
  const r = c.linear_num_value_heads! / nk
  const Dk = nk * dk
  const H = c.hidden_size
  const qkv = `${o}.linear_attn.in_proj_qkv`
  const qkvz: Segment[] = []
  const ba: Segment[] = []
  for (let g = 0; g < nk; g++) {
    qkvz.push({name: qkv, r0: g * dk, r1: (g + 1) * dk})
    qkvz.push({name: qkv, r0: Dk + g * dk, r1: Dk + (g + 1) * dk})
    qkvz.push({name: qkv, r0: 2 * Dk + g * r * dv, r1: 2 * Dk + (g + 1) * r * dv})
    qkvz.push({name: `${o}.linear_attn.in_proj_z`, r0: g * r * dv, r1: (g + 1) * r * dv})
    ba.push({name: `${o}.linear_attn.in_proj_b`, r0: g * r, r1: (g + 1) * r})
    ba.push({name: `${o}.linear_attn.in_proj_a`, r0: g * r, r1: (g + 1) * r})
  }
  const rows = (s: Segment[]) => s.reduce((n, x) => n + x.r1 - x.r0, 0)
  return [
    {name: `${L}.linear_attn.in_proj_qkvz.weight`, shape: [rows(qkvz), H], cols: H, segments: qkvz},
    {name: `${L}.linear_attn.in_proj_ba.weight`, shape: [rows(ba), H], cols: H, segments: ba},
  ]
}

/** Every tensor of the exported target checkpoint, in the package's layout order. */
export function targetTensors(m: Manifest): HfTensor[] {
  const c = m.config
  const zc = m.config.qk_norm === 'zero_centred'
  const next = m.family === 'qwen3_next'
  const out: HfTensor[] = []
  for (const e of modelLayout(c)) {
    const layer = /^layers\.(\d+)\.(.+)$/.exec(e.name)
    const hfBase = e.name === 'lm_head' ? 'lm_head' : `model.${e.name}`
    const local = layer ? layer[2] : e.name
    const L = layer ? `model.layers.${layer[1]}` : ''
    if (next && (local === 'linear_attn.in_proj_qkv' || local === 'linear_attn.in_proj_b')) {
      out.push(...fusedGdn(`layers.${layer![1]}`, L, c).filter(t => t.name.includes(local === 'linear_attn.in_proj_qkv' ? 'qkvz' : '_ba')))
      continue
    }
    if (next && (local === 'linear_attn.in_proj_z' || local === 'linear_attn.in_proj_a')) continue
    if (local === 'mlp.router') {
      out.push(whole(e.name, `${L}.mlp.gate.weight`, e.shape))
      continue
    }
    const experts = /^mlp\.experts\.(gate_proj|up_proj|down_proj)$/.exec(local)
    if (experts) {
      const [E, rows, cols] = e.shape
      for (let x = 0; x < E; x++) {
        out.push({name: `${L}.mlp.experts.${x}.${experts[1]}.weight`, shape: [rows, cols], cols, segments: [{name: e.name, r0: x * rows, r1: (x + 1) * rows}]})
      }
      continue
    }
    if (local === 'linear_attn.conv1d') {
      const [C, K] = e.shape
      out.push(whole(e.name, `${L}.linear_attn.conv1d.weight`, e.shape, [C, 1, K]))
      continue
    }
    if (local === 'linear_attn.A_log' || local === 'linear_attn.dt_bias') {
      out.push(whole(e.name, `${L}.${local}`, e.shape))
      continue
    }
    const t = whole(e.name, `${hfBase}.weight`, e.shape)
    if (zc && e.kind === 'f32' && ZERO_CENTRED.test(local)) t.minusOne = true
    out.push(t)
  }
  return out
}

/** The draft's tensors under the names vLLM's and SGLang's DFlash loaders read (no `model.` prefix). */
export function draftTensors(d: DraftConfig, targetHidden: number, vocab: number): HfTensor[] {
  return draftLayout(d, targetHidden, vocab).map(e => whole(e.name, `${e.name}.weight`, e.shape))
}

const ARCH: Record<Manifest['family'], [string, string]> = {
  qwen3_5: ['Qwen3_5ForCausalLM', 'qwen3_5_text'],
  qwen3_5_moe: ['Qwen3_5MoeForCausalLM', 'qwen3_5_moe_text'],
  qwen3_next: ['Qwen3NextForCausalLM', 'qwen3_next'],
  qwen3: ['Qwen3ForCausalLM', 'qwen3'],
}

/** config.json of the exported target, in the keys transformers' config classes for these families read. */
export function targetConfig(m: Manifest, dtype: string): Record<string, unknown> {
  const c = m.config
  const [arch, modelType] = ARCH[m.family]
  const rope: Record<string, unknown> = {rope_type: 'default', rope_theta: c.rope_theta}
  const cfg: Record<string, unknown> = {
    architectures: [arch],
    model_type: modelType,
    hidden_size: c.hidden_size,
    num_hidden_layers: c.num_hidden_layers,
    vocab_size: c.vocab_size,
    layer_types: c.layer_types,
    rms_norm_eps: c.rms_norm_eps,
    num_attention_heads: c.num_attention_heads,
    num_key_value_heads: c.num_key_value_heads,
    head_dim: c.head_dim,
    hidden_act: 'silu',
    attention_bias: false,
    max_position_embeddings: c.max_position_embeddings,
    tie_word_embeddings: c.tie_word_embeddings,
    rope_parameters: rope,
    dtype,
    bos_token_id: null,
    eos_token_id: m.tokenizer.eos_token_ids.length === 1 ? m.tokenizer.eos_token_ids[0] : m.tokenizer.eos_token_ids,
    pad_token_id: m.tokenizer.pad_token_id,
  }
  if (m.family === 'qwen3') {
    Object.assign(cfg, {intermediate_size: c.intermediate_size, use_sliding_window: false, sliding_window: null, max_window_layers: c.num_hidden_layers})
    return cfg
  }
  rope.partial_rotary_factor = c.partial_rotary_factor
  if (c.mrope_section) Object.assign(rope, {mrope_section: c.mrope_section, mrope_interleaved: c.mrope_interleaved})
  Object.assign(cfg, {
    partial_rotary_factor: c.partial_rotary_factor,
    linear_num_key_heads: c.linear_num_key_heads,
    linear_num_value_heads: c.linear_num_value_heads,
    linear_key_head_dim: c.linear_key_head_dim,
    linear_value_head_dim: c.linear_value_head_dim,
    linear_conv_kernel_dim: c.linear_conv_kernel_dim,
  })
  if (!c.num_experts) {
    cfg.intermediate_size = c.intermediate_size
    return cfg
  }
  Object.assign(cfg, {
    num_experts: c.num_experts,
    num_experts_per_tok: c.num_experts_per_tok,
    moe_intermediate_size: c.moe_intermediate_size,
    shared_expert_intermediate_size: c.shared_expert_intermediate_size ?? 0,
  })
  if (m.family === 'qwen3_next') {
    Object.assign(cfg, {
      intermediate_size: c.intermediate_size || c.moe_intermediate_size,
      norm_topk_prob: c.norm_topk_prob ?? true,
      decoder_sparse_step: 1,
      mlp_only_layers: [],
    })
  }
  return cfg
}

/** config.json of the exported draft: the z-lab DFlash layout (architectures DFlashDraftModel, a Qwen3 config with
 *  dflash_config) that the DFlash draft loaders of vLLM and SGLang read; docs/hub-and-export.md names the versions matched. */
export function draftConfig(m: Manifest, dtype: string): Record<string, unknown> {
  const d = m.draft!.config
  const cfg: Record<string, unknown> = {
    architectures: ['DFlashDraftModel'],
    model_type: 'qwen3',
    block_size: d.block_size,
    dflash_config: {mask_token_id: d.mask_token_id, target_layer_ids: d.target_layer_ids},
    num_target_layers: m.config.num_hidden_layers,
    target_hidden_size: m.config.hidden_size,
    hidden_size: d.hidden_size,
    num_hidden_layers: d.num_hidden_layers,
    intermediate_size: d.intermediate_size,
    num_attention_heads: d.num_attention_heads,
    num_key_value_heads: d.num_key_value_heads,
    head_dim: d.head_dim,
    hidden_act: 'silu',
    attention_bias: false,
    rms_norm_eps: d.rms_norm_eps,
    rope_theta: d.rope_theta,
    rope_parameters: {rope_type: 'default', rope_theta: d.rope_theta},
    max_position_embeddings: m.config.max_position_embeddings,
    vocab_size: m.config.vocab_size,
    tie_word_embeddings: true,
    layer_types: d.layer_types ?? Array.from({length: d.num_hidden_layers}, () => 'full_attention'),
    use_sliding_window: d.sliding_window !== null,
    sliding_window: d.sliding_window,
    dtype,
  }
  if (d.is_causal !== undefined && d.is_causal !== null) cfg.is_causal = d.is_causal
  return cfg
}
