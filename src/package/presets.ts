// Shapes of real models (and tiny ones for tests) for `splash package synth`. Values for the big models come from
// the models' published config.json files; the small Qwen3.5 ones are from third-party copies of the
// config files (0.8B: 24 layers, hidden 1024, 8/2 heads of 256, 6 attention layers — confirmed by a model card;
// intermediate 3584, GDN 16/16 heads of 128 and tied embeddings are from memory, UNVERIFIED against the HF file;
// 4B: 32 layers, hidden 2560, 16/4 heads of 256 — confirmed by a model card; GDN 16/32 heads, intermediate 9216 and
// tied embeddings UNVERIFIED). Drafts follow the published DFlash shapes where known (27B: 5 layers, hidden 5120,
// ~1.7B parameters) and Qwen3-style small decoders otherwise.
import type {DraftConfig, Family, ModelConfig, VisionManifest} from './manifest.js'

export interface Preset {
  family: Family
  architecture: string
  config: ModelConfig
  draft: DraftConfig
  /** Id of the first special token (<|endoftext|>); the Qwen3.5 specials follow it in order. */
  specialBase: number
  /** A vision tower (its prompt token ids come from the generated tokenizer). */
  vision?: Omit<VisionManifest, 'tokens'>
}

const QWEN35_VOCAB = 248320
const QWEN35_SPECIAL_BASE = 248044
const QWEN35_MASK = 248077

function hybrid(o: {
  layers: number; hidden: number; heads: number; kvHeads: number; headDim?: number; nk: number; nv: number; dk?: number
  intermediate: number; vocab?: number; tie: boolean; moe?: {experts: number; topK: number; inter: number; shared: number}
  maxPos?: number
}): ModelConfig {
  const c: ModelConfig = {
    hidden_size: o.hidden,
    num_hidden_layers: o.layers,
    vocab_size: o.vocab ?? QWEN35_VOCAB,
    layer_types: Array.from({length: o.layers}, (_, i) => (i % 4 === 3 ? 'full_attention' : 'linear_attention')),
    rms_norm_eps: 1e-6,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    head_dim: o.headDim ?? 256,
    attn_output_gate: true,
    rope_theta: 10000000,
    partial_rotary_factor: 0.25,
    mrope_section: [11, 11, 10],
    mrope_interleaved: true,
    linear_num_key_heads: o.nk,
    linear_num_value_heads: o.nv,
    linear_key_head_dim: o.dk ?? 128,
    linear_value_head_dim: o.dk ?? 128,
    linear_conv_kernel_dim: 4,
    intermediate_size: o.moe ? 0 : o.intermediate,
    tie_word_embeddings: o.tie,
    max_position_embeddings: o.maxPos ?? 262144,
    qk_norm: 'zero_centred',
  }
  if (o.moe) {
    c.num_experts = o.moe.experts
    c.num_experts_per_tok = o.moe.topK
    c.moe_intermediate_size = o.moe.inter
    c.shared_expert_intermediate_size = o.moe.shared
    c.norm_topk_prob = true
  }
  return c
}

function draft(o: {layers: number; hidden: number; intermediate: number; heads: number; kvHeads: number; headDim?: number; taps: number[]; mask?: number}): DraftConfig {
  return {
    block_size: 16,
    mask_token_id: o.mask ?? QWEN35_MASK,
    target_layer_ids: o.taps,
    num_hidden_layers: o.layers,
    hidden_size: o.hidden,
    intermediate_size: o.intermediate,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    head_dim: o.headDim ?? 128,
    rope_theta: 10000000,
    rms_norm_eps: 1e-6,
    sliding_window: null,
    conv_kernel_size: null,
    conv_group_size: null,
    selector_rank: null,
    selector_top_k: null,
  }
}

/** The DFlash 2 form of a preset's draft (the z-lab DFlash2DraftModel config: every layer sliding with the given
 *  window and bidirectional in the block, the grouped dynamic conv with kernel 2 over groups of 16, the candidate
 *  selector over the top 16 with codebooks of rank 256, or 64 for hidden sizes below 1024). */
export function dflash2(d: DraftConfig, window = 2048): DraftConfig {
  return {
    ...d,
    sliding_window: window,
    layer_types: Array.from({length: d.num_hidden_layers}, () => 'sliding_attention' as const),
    is_causal: false,
    conv_kernel_size: 2,
    conv_group_size: 16,
    selector_rank: d.hidden_size < 1024 ? 64 : 256,
    selector_top_k: 16,
    output_multiplier: 1 / Math.sqrt(26),
    final_logit_softcapping: 20,
  }
}

export const PRESETS: Record<string, Preset> = {
  'qwen3.8-27b': {
    family: 'qwen3_5',
    architecture: 'Qwen3_5ForConditionalGeneration',
    config: hybrid({layers: 64, hidden: 5120, heads: 24, kvHeads: 4, nk: 16, nv: 48, intermediate: 17408, tie: false}),
    draft: draft({layers: 5, hidden: 5120, intermediate: 17408, heads: 32, kvHeads: 8, taps: [1, 16, 31, 46, 61]}),
    specialBase: QWEN35_SPECIAL_BASE,
  },
  'qwen3.6-35b-a3b': {
    family: 'qwen3_5_moe',
    architecture: 'Qwen3_5MoeForConditionalGeneration',
    config: hybrid({
      layers: 40, hidden: 2048, heads: 16, kvHeads: 2, nk: 16, nv: 32, intermediate: 0, tie: false,
      moe: {experts: 256, topK: 8, inter: 512, shared: 512},
    }),
    draft: draft({layers: 6, hidden: 2048, intermediate: 6144, heads: 16, kvHeads: 8, taps: [1, 6, 11, 16, 22, 27, 32, 37]}),
    specialBase: QWEN35_SPECIAL_BASE,
  },
  'qwen3.5-4b': {
    family: 'qwen3_5',
    architecture: 'Qwen3_5ForConditionalGeneration',
    config: hybrid({layers: 32, hidden: 2560, heads: 16, kvHeads: 4, nk: 16, nv: 32, intermediate: 9216, tie: true}),
    draft: draft({layers: 5, hidden: 2560, intermediate: 9728, heads: 32, kvHeads: 8, taps: [1, 8, 15, 22, 29]}),
    specialBase: QWEN35_SPECIAL_BASE,
  },
  'qwen3.5-0.8b': {
    family: 'qwen3_5',
    architecture: 'Qwen3_5ForConditionalGeneration',
    config: hybrid({layers: 24, hidden: 1024, heads: 8, kvHeads: 2, nk: 16, nv: 16, intermediate: 3584, tie: true}),
    draft: draft({layers: 3, hidden: 1024, intermediate: 3072, heads: 16, kvHeads: 8, taps: [1, 11, 21]}),
    specialBase: QWEN35_SPECIAL_BASE,
  },
  // Tiny models for tests: hidden 64, vocab 512 (256 bytes, 224 merges, 26 specials at 480.., 6 spare rows).
  'tiny-hybrid': {
    family: 'qwen3_5',
    architecture: 'Qwen3_5ForConditionalGeneration',
    config: hybrid({layers: 4, hidden: 64, heads: 2, kvHeads: 1, headDim: 32, nk: 2, nv: 4, dk: 16, intermediate: 128, vocab: 512, tie: false, maxPos: 4096}),
    draft: draft({layers: 1, hidden: 64, intermediate: 128, heads: 2, kvHeads: 1, headDim: 32, taps: [1, 2], mask: 511}),
    specialBase: 480,
  },
  'tiny-vl': {
    family: 'qwen3_5',
    architecture: 'Qwen3_5ForConditionalGeneration',
    config: hybrid({layers: 4, hidden: 64, heads: 2, kvHeads: 1, headDim: 32, nk: 2, nv: 4, dk: 16, intermediate: 128, vocab: 512, tie: false, maxPos: 4096}),
    draft: draft({layers: 1, hidden: 64, intermediate: 128, heads: 2, kvHeads: 1, headDim: 32, taps: [1, 2], mask: 511}),
    specialBase: 480,
    vision: {
      config: {
        depth: 2, hidden_size: 64, num_heads: 2, intermediate_size: 128, patch_size: 16, temporal_patch_size: 2, spatial_merge_size: 2,
        in_channels: 3, out_hidden_size: 64, num_position_embeddings: 64, hidden_act: 'gelu_pytorch_tanh', rope_theta: 10000,
      },
      preprocessor: {min_pixels: 1024, max_pixels: 65536, image_mean: [0.5, 0.5, 0.5], image_std: [0.5, 0.5, 0.5]},
    },
  },
  // a plain Qwen3 target (attention layers only) with a 2-layer draft: what tools/reference/dflash2_reference.py
  // computes in numpy
  'tiny-qwen3': {
    family: 'qwen3',
    architecture: 'Qwen3ForCausalLM',
    config: {
      hidden_size: 64, num_hidden_layers: 4, vocab_size: 512, layer_types: ['full_attention', 'full_attention', 'full_attention', 'full_attention'],
      rms_norm_eps: 1e-6, num_attention_heads: 2, num_key_value_heads: 1, head_dim: 32, attn_output_gate: false, rope_theta: 1000000,
      partial_rotary_factor: 1, mrope_section: null, mrope_interleaved: false, intermediate_size: 128, tie_word_embeddings: false,
      max_position_embeddings: 4096, qk_norm: 'plain',
    },
    draft: draft({layers: 2, hidden: 64, intermediate: 128, heads: 2, kvHeads: 1, headDim: 32, taps: [1, 2], mask: 511}),
    specialBase: 480,
  },
  'tiny-moe': {
    family: 'qwen3_5_moe',
    architecture: 'Qwen3_5MoeForConditionalGeneration',
    config: hybrid({
      layers: 4, hidden: 64, heads: 2, kvHeads: 1, headDim: 32, nk: 2, nv: 4, dk: 16, intermediate: 0, vocab: 512, tie: true, maxPos: 4096,
      moe: {experts: 4, topK: 2, inter: 64, shared: 64},
    }),
    draft: draft({layers: 1, hidden: 64, intermediate: 128, heads: 2, kvHeads: 1, headDim: 32, taps: [0, 1, 3], mask: 511}),
    specialBase: 480,
  },
  // Qwen3-Next: the tiny-moe shapes with plain (not multimodal) RoPE
  'tiny-next': {
    family: 'qwen3_next',
    architecture: 'Qwen3NextForCausalLM',
    config: {
      ...hybrid({
        layers: 4, hidden: 64, heads: 2, kvHeads: 1, headDim: 32, nk: 2, nv: 4, dk: 16, intermediate: 0, vocab: 512, tie: false, maxPos: 4096,
        moe: {experts: 4, topK: 2, inter: 64, shared: 64},
      }),
      mrope_section: null,
      mrope_interleaved: false,
    },
    draft: draft({layers: 1, hidden: 64, intermediate: 128, heads: 2, kvHeads: 1, headDim: 32, taps: [0, 1, 3], mask: 511}),
    specialBase: 480,
  },
}

/** The preset with only the first `layers` layers (same shapes); draft taps are mapped onto the remaining layers. */
export function withLayers(p: Preset, layers?: number): Preset {
  const L = p.config.num_hidden_layers
  if (layers === undefined || layers === L) return p
  const taps = p.draft.target_layer_ids.map(t => Math.round((t * (layers - 1)) / Math.max(1, L - 1)))
  return {
    ...p,
    config: {...p.config, num_hidden_layers: layers, layer_types: p.config.layer_types.slice(0, layers)},
    draft: {...p.draft, target_layer_ids: taps},
  }
}
