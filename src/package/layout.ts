// The Splash tensors of a model and of its DFlash draft, from the normalised configs: names and logical shapes as
// docs/package-format.md ("Weights") lists them. Synthetic packages are written from this; builder tests check against it.
import type {DraftConfig, ModelConfig, VisionManifest} from './manifest.js'

export interface LayoutEntry {
  name: string
  kind: 'linear' | 'f32'
  shape: number[]
  q8?: boolean
  keep16?: boolean
  /** What the values look like, for synthetic weights. */
  role: 'weight' | 'norm' | 'conv' | 'a_log' | 'dt_bias' | 'gdn_norm' | 'bias'
}

const lin = (name: string, shape: number[], q8 = false): LayoutEntry => ({name, kind: 'linear', shape, q8, role: 'weight'})
const f32 = (name: string, shape: number[], role: LayoutEntry['role']): LayoutEntry => ({name, kind: 'f32', shape, role})

export function modelLayout(c: ModelConfig): LayoutEntry[] {
  const H = c.hidden_size
  const out: LayoutEntry[] = [lin('embed_tokens', [c.vocab_size, H])]
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const o = `layers.${i}`
    out.push(f32(`${o}.input_layernorm`, [H], 'norm'), f32(`${o}.post_attention_layernorm`, [H], 'norm'))
    if (c.layer_types[i] === 'linear_attention') {
      const nk = c.linear_num_key_heads!
      const nv = c.linear_num_value_heads!
      const Dk = nk * c.linear_key_head_dim!
      const Dv = nv * c.linear_value_head_dim!
      const C = 2 * Dk + Dv
      out.push(
        lin(`${o}.linear_attn.in_proj_qkv`, [C, H]),
        lin(`${o}.linear_attn.in_proj_z`, [Dv, H]),
        lin(`${o}.linear_attn.in_proj_b`, [nv, H]),
        lin(`${o}.linear_attn.in_proj_a`, [nv, H]),
        f32(`${o}.linear_attn.conv1d`, [C, c.linear_conv_kernel_dim!], 'conv'),
        f32(`${o}.linear_attn.A_log`, [nv], 'a_log'),
        f32(`${o}.linear_attn.dt_bias`, [nv], 'dt_bias'),
        f32(`${o}.linear_attn.norm`, [c.linear_value_head_dim!], 'gdn_norm'),
        lin(`${o}.linear_attn.out_proj`, [H, Dv]),
      )
    } else {
      const hd = c.head_dim
      out.push(
        lin(`${o}.self_attn.q_proj`, [c.num_attention_heads * hd * (c.attn_output_gate ? 2 : 1), H]),
        lin(`${o}.self_attn.k_proj`, [c.num_key_value_heads * hd, H]),
        lin(`${o}.self_attn.v_proj`, [c.num_key_value_heads * hd, H]),
        lin(`${o}.self_attn.o_proj`, [H, c.num_attention_heads * hd]),
        f32(`${o}.self_attn.q_norm`, [hd], 'norm'),
        f32(`${o}.self_attn.k_norm`, [hd], 'norm'),
      )
    }
    if (c.num_experts) {
      const E = c.num_experts
      const Im = c.moe_intermediate_size!
      out.push(
        lin(`${o}.mlp.router`, [E, H], true),
        lin(`${o}.mlp.experts.gate_proj`, [E, Im, H]),
        lin(`${o}.mlp.experts.up_proj`, [E, Im, H]),
        lin(`${o}.mlp.experts.down_proj`, [E, H, Im]),
      )
      const Is = c.shared_expert_intermediate_size ?? 0
      if (Is > 0) {
        out.push(
          lin(`${o}.mlp.shared_expert.gate_proj`, [Is, H]),
          lin(`${o}.mlp.shared_expert.up_proj`, [Is, H]),
          lin(`${o}.mlp.shared_expert.down_proj`, [H, Is]),
          lin(`${o}.mlp.shared_expert_gate`, [1, H], true),
        )
      }
    } else {
      const I = c.intermediate_size
      out.push(lin(`${o}.mlp.gate_proj`, [I, H]), lin(`${o}.mlp.up_proj`, [I, H]), lin(`${o}.mlp.down_proj`, [H, I]))
    }
  }
  out.push(f32('norm', [H], 'norm'))
  if (!c.tie_word_embeddings) out.push(lin('lm_head', [c.vocab_size, H]))
  return out
}

/** The vision tower's tensors (linears bf16 in every package, with F32 biases; LayerNorm weight and bias F32). */
export function visionLayout(v: VisionManifest['config']): LayoutEntry[] {
  const H = v.hidden_size
  const M = H * v.spatial_merge_size ** 2
  const vl = (name: string, shape: number[]): LayoutEntry[] => [
    {name, kind: 'linear', shape, keep16: true, role: 'weight'},
    f32(`${name}.bias`, [shape[0]], 'bias'),
  ]
  const ln = (name: string): LayoutEntry[] => [f32(`${name}.weight`, [H], 'norm'), f32(`${name}.bias`, [H], 'bias')]
  const out: LayoutEntry[] = [
    ...vl('visual.patch_embed', [H, v.in_channels * v.temporal_patch_size * v.patch_size ** 2]),
    f32('visual.pos_embed', [v.num_position_embeddings, H], 'bias'),
  ]
  for (let i = 0; i < v.depth; i++) {
    const o = `visual.blocks.${i}`
    out.push(...ln(`${o}.norm1`), ...ln(`${o}.norm2`), ...vl(`${o}.attn.qkv`, [3 * H, H]), ...vl(`${o}.attn.proj`, [H, H]))
    out.push(...vl(`${o}.mlp.fc1`, [v.intermediate_size, H]), ...vl(`${o}.mlp.fc2`, [H, v.intermediate_size]))
  }
  out.push(...ln('visual.merger.norm'), ...vl('visual.merger.fc1', [M, M]), ...vl('visual.merger.fc2', [v.out_hidden_size, M]))
  return out
}

export function draftLayout(d: DraftConfig, targetHidden: number, vocab: number): LayoutEntry[] {
  const H = d.hidden_size
  const hd = d.head_dim
  const out: LayoutEntry[] = [lin('fc', [H, d.target_layer_ids.length * targetHidden]), f32('hidden_norm', [H], 'norm')]
  for (let i = 0; i < d.num_hidden_layers; i++) {
    const o = `layers.${i}`
    out.push(
      f32(`${o}.input_layernorm`, [H], 'norm'),
      f32(`${o}.post_attention_layernorm`, [H], 'norm'),
      lin(`${o}.self_attn.q_proj`, [d.num_attention_heads * hd, H]),
      lin(`${o}.self_attn.k_proj`, [d.num_key_value_heads * hd, H]),
      lin(`${o}.self_attn.v_proj`, [d.num_key_value_heads * hd, H]),
      lin(`${o}.self_attn.o_proj`, [H, d.num_attention_heads * hd]),
      f32(`${o}.self_attn.q_norm`, [hd], 'norm'),
      f32(`${o}.self_attn.k_norm`, [hd], 'norm'),
      lin(`${o}.mlp.gate_proj`, [d.intermediate_size, H]),
      lin(`${o}.mlp.up_proj`, [d.intermediate_size, H]),
      lin(`${o}.mlp.down_proj`, [H, d.intermediate_size]),
    )
    if (d.conv_kernel_size !== null && d.conv_group_size !== null) {
      const dyn = (2 * d.conv_kernel_size * H) / d.conv_group_size
      for (const c of ['attention_conv', 'mlp_conv']) {
        out.push(f32(`${o}.${c}.base_kernel`, [2, d.conv_kernel_size, H], 'conv'), lin(`${o}.${c}.kernel_projection`, [dyn, H]))
      }
    }
  }
  out.push(f32('norm', [H], 'norm'))
  if (d.selector_rank !== null) {
    const R = d.selector_rank
    out.push(
      lin('candidate_selector.hidden_projection', [R, H]),
      lin('candidate_selector.predecessor_codebook', [vocab, R]),
      lin('candidate_selector.successor_codebook', [vocab, R]),
    )
  }
  return out
}
