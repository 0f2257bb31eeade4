// Writes tiny Splash packages with random weights (splash.json + one safetensors file) for the native
// core tests, and returns the exact float values the engine will see (dequantised), so the reference
// forward pass can use the same weights.
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {writeSafetensors, type TensorSpec} from '../../../src/package/safetensors.js'
import {quantize, dequantize, toBf16, fromBf16} from '../../../src/package/builder/quantize.js'

export type Quant = 'f32' | 'bf16' | 'q4' | 'q8'
export type Variant = 'hybrid' | 'moe' | 'qwen3'

export interface TinyConfig {
  hidden_size: number
  num_hidden_layers: number
  vocab_size: number
  layer_types: ('linear_attention' | 'full_attention')[]
  rms_norm_eps: number
  num_attention_heads: number
  num_key_value_heads: number
  head_dim: number
  attn_output_gate: boolean
  rope_theta: number
  partial_rotary_factor: number
  mrope_section: number[] | null
  mrope_interleaved: boolean
  linear_num_key_heads: number
  linear_num_value_heads: number
  linear_key_head_dim: number
  linear_value_head_dim: number
  linear_conv_kernel_dim: number
  intermediate_size: number
  num_experts: number
  num_experts_per_tok: number
  moe_intermediate_size: number
  shared_expert_intermediate_size: number
  norm_topk_prob: boolean
  tie_word_embeddings: boolean
  max_position_embeddings: number
}

export interface TinyPackage {
  dir: string
  family: string
  config: TinyConfig
  /** Dequantised values of every tensor by Splash name (linear weights without the `.weight` suffix). */
  weights: Map<string, Float32Array>
  /** Group biases (bf16 values as floats) of every quantised linear, by name. */
  biases: Map<string, Float32Array>
}

/** Deterministic PRNG (mulberry32) with a normal sampler. */
export function rng(seed: number) {
  let s = seed >>> 0
  const next = () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const normal = () => {
    const u = Math.max(next(), 1e-12)
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * next())
  }
  return {next, normal}
}

export function tinyConfig(variant: Variant): {family: string; config: TinyConfig} {
  const base: TinyConfig = {
    hidden_size: 64,
    num_hidden_layers: 4,
    vocab_size: 256,
    layer_types: ['linear_attention', 'linear_attention', 'linear_attention', 'full_attention'],
    rms_norm_eps: 1e-6,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 16,
    attn_output_gate: true,
    rope_theta: 10000,
    partial_rotary_factor: 0.5,
    mrope_section: [11, 11, 10],
    mrope_interleaved: true,
    linear_num_key_heads: 2,
    linear_num_value_heads: 4,
    linear_key_head_dim: 16,
    linear_value_head_dim: 16,
    linear_conv_kernel_dim: 4,
    intermediate_size: 128,
    num_experts: 0,
    num_experts_per_tok: 0,
    moe_intermediate_size: 0,
    shared_expert_intermediate_size: 0,
    norm_topk_prob: false,
    tie_word_embeddings: false,
    max_position_embeddings: 4096,
  }
  if (variant === 'moe') {
    return {
      family: 'qwen3_5_moe',
      config: {...base, intermediate_size: 0, num_experts: 8, num_experts_per_tok: 2, moe_intermediate_size: 64,
        shared_expert_intermediate_size: 64},
    }
  }
  if (variant === 'qwen3') {
    return {
      family: 'qwen3',
      config: {...base, num_hidden_layers: 2, layer_types: ['full_attention', 'full_attention'], attn_output_gate: false,
        partial_rotary_factor: 1, mrope_section: null, mrope_interleaved: false, linear_num_key_heads: 0,
        linear_num_value_heads: 0, linear_key_head_dim: 0, linear_value_head_dim: 0, tie_word_embeddings: true,
        rope_theta: 1000000},
    }
  }
  return {family: 'qwen3_5', config: base}
}

type Tensor = TensorSpec & {data: ArrayBufferView}

export async function writeTinyPackage(
  dir: string,
  variant: Variant,
  quant: Quant,
  seed = 1,
  patch: Partial<TinyConfig> = {},
): Promise<TinyPackage> {
  const base = tinyConfig(variant)
  const family = base.family
  const c: TinyConfig = {...base.config, ...patch}
  const r = rng(seed)
  const tensors: Tensor[] = []
  const weights = new Map<string, Float32Array>()
  const biases = new Map<string, Float32Array>()
  const randn = (n: number, std: number, mean = 0) => {
    const a = new Float32Array(n)
    for (let i = 0; i < n; i++) a[i] = mean + std * r.normal()
    return a
  }
  const f32 = (name: string, v: Float32Array) => {
    tensors.push({name, dtype: 'F32', shape: [v.length], data: v})
    weights.set(name, v)
  }
  const f32shape = (name: string, v: Float32Array, shape: number[]) => {
    tensors.push({name, dtype: 'F32', shape, data: v})
    weights.set(name, v)
  }
  // A linear weight [E?][rows, cols] stored in `q` (falls back to bf16 when cols is not a multiple of 64).
  const linear = (name: string, rows: number, cols: number, q: Quant = quant, experts = 0, std = 1 / Math.sqrt(cols)) => {
    const lead = experts ? [experts] : []
    const n = (experts || 1) * rows * cols
    const w = randn(n, std)
    if ((q === 'q4' || q === 'q8') && cols % 64 === 0) {
      const bits = q === 'q4' ? 4 : 8
      const qz = quantize(w, (experts || 1) * rows, cols, bits)
      tensors.push({name: `${name}.weight`, dtype: 'U32', shape: [...lead, rows, (cols * bits) / 32], data: qz.weight})
      tensors.push({name: `${name}.scales`, dtype: 'BF16', shape: [...lead, rows, cols / 64], data: qz.scales})
      tensors.push({name: `${name}.biases`, dtype: 'BF16', shape: [...lead, rows, cols / 64], data: qz.biases})
      weights.set(name, dequantize(qz, (experts || 1) * rows, cols, bits))
      biases.set(name, fromBf16(qz.biases))
    } else if (q === 'f32') {
      tensors.push({name: `${name}.weight`, dtype: 'F32', shape: [...lead, rows, cols], data: w})
      weights.set(name, w)
    } else {
      const b = toBf16(w)
      tensors.push({name: `${name}.weight`, dtype: 'BF16', shape: [...lead, rows, cols], data: b})
      weights.set(name, fromBf16(b))
    }
  }
  const H = c.hidden_size
  const norm = () => randn(H, 0.1, 1)
  linear('embed_tokens', c.vocab_size, H, quant, 0, 1)
  if (!c.tie_word_embeddings) linear('lm_head', c.vocab_size, H)
  f32('norm', norm())
  const Dk = c.linear_num_key_heads * c.linear_key_head_dim
  const Dv = c.linear_num_value_heads * c.linear_value_head_dim
  const nv = c.linear_num_value_heads
  const small: Quant = quant === 'q4' ? 'q8' : quant
  for (let i = 0; i < c.num_hidden_layers; i++) {
    const p = `layers.${i}.`
    f32(`${p}input_layernorm`, norm())
    f32(`${p}post_attention_layernorm`, norm())
    if (c.layer_types[i] === 'linear_attention') {
      const C = 2 * Dk + Dv
      linear(`${p}linear_attn.in_proj_qkv`, C, H)
      linear(`${p}linear_attn.in_proj_z`, Dv, H)
      linear(`${p}linear_attn.in_proj_b`, nv, H)
      linear(`${p}linear_attn.in_proj_a`, nv, H)
      linear(`${p}linear_attn.out_proj`, H, Dv)
      f32shape(`${p}linear_attn.conv1d`, randn(C * c.linear_conv_kernel_dim, 0.5), [C, c.linear_conv_kernel_dim])
      const alog = new Float32Array(nv)
      for (let h = 0; h < nv; h++) alog[h] = Math.log(1 + 15 * r.next())
      f32(`${p}linear_attn.A_log`, alog)
      f32(`${p}linear_attn.dt_bias`, randn(nv, 0.5))
      f32(`${p}linear_attn.norm`, randn(c.linear_value_head_dim, 0.1, 1))
    } else {
      const hd = c.head_dim
      linear(`${p}self_attn.q_proj`, c.num_attention_heads * hd * (c.attn_output_gate ? 2 : 1), H)
      linear(`${p}self_attn.k_proj`, c.num_key_value_heads * hd, H)
      linear(`${p}self_attn.v_proj`, c.num_key_value_heads * hd, H)
      linear(`${p}self_attn.o_proj`, H, c.num_attention_heads * hd)
      f32(`${p}self_attn.q_norm`, randn(hd, 0.1, 1))
      f32(`${p}self_attn.k_norm`, randn(hd, 0.1, 1))
    }
    if (c.num_experts > 0) {
      const E = c.num_experts
      const Im = c.moe_intermediate_size
      linear(`${p}mlp.router`, E, H, small, 0, 1)
      linear(`${p}mlp.experts.gate_proj`, Im, H, quant, E)
      linear(`${p}mlp.experts.up_proj`, Im, H, quant, E)
      linear(`${p}mlp.experts.down_proj`, H, Im, quant, E)
      const Is = c.shared_expert_intermediate_size
      linear(`${p}mlp.shared_expert.gate_proj`, Is, H)
      linear(`${p}mlp.shared_expert.up_proj`, Is, H)
      linear(`${p}mlp.shared_expert.down_proj`, H, Is)
      linear(`${p}mlp.shared_expert_gate`, 1, H, small)
    } else {
      linear(`${p}mlp.gate_proj`, c.intermediate_size, H)
      linear(`${p}mlp.up_proj`, c.intermediate_size, H)
      linear(`${p}mlp.down_proj`, H, c.intermediate_size)
    }
  }
  await mkdir(dir, {recursive: true})
  await writeSafetensors(path.join(dir, 'model.safetensors'), tensors)
  const manifest = {
    format: 1,
    name: `test/tiny-${variant}-${quant}`,
    family,
    architecture: 'test',
    config: c,
    weights: {files: ['model.safetensors'], quant, group_size: 64},
    draft: null,
    vision: null,
    provenance: {source: 'random', builder: 'test', kind: 'synthetic'},
  }
  await writeFile(path.join(dir, 'splash.json'), JSON.stringify(manifest, null, 2))
  return {dir, family, config: c, weights, biases}
}
