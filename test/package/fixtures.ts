// Tiny source checkpoints in every layout the builder takes, written from "truth" tensors in Splash layout (what
// the package must contain) by the inverse of each layout's quirks: norms stored zero-centred (or pre-shifted for
// MLX), conv1d [C,1,K] or [C,K,1], experts packed / per expert / switch_mlp, Qwen3-Next projections fused and
// interleaved per key-head group, MLX linears quantized.
import {mkdirSync, writeFileSync} from 'node:fs'
import {join} from 'node:path'
import {bf16Value, bf16Bits, dequantize, fromBf16, quantize, toBf16} from '../../src/package/quantize.js'
import {writeSafetensors, type DType} from '../../src/package/safetensors.js'

export type Kind = 'dense' | 'moe' | 'next' | 'qwen3'
export interface FixtureOptions {
  kind: Kind
  names: 'vl' | 'text' | 'mlx'
  experts?: 'packed' | 'per' | 'switch'
  tie?: boolean
  shards?: number
  oldRope?: boolean
}

export const DIMS = {H: 64, V: 96, L: 4, nh: 2, nkv: 1, hd: 32, nk: 2, nv: 4, dk: 16, dv: 16, K: 4, I: 128, E: 4, Im: 64, Is: 64}

export interface Fixture {
  dir: string
  /** Splash name → expected float values (linears: the value before the package's own quantization). */
  truth: Map<string, {shape: number[]; data: Float32Array; linear: boolean}>
  config: Record<string, unknown>
}

let seed = 1
function rand(): number {
  seed = (seed * 1103515245 + 12345) >>> 0
  return (seed >>> 8) / 16777216
}
/** Random values exactly representable in bf16. */
function randBf16(n: number, scale = 0.1): Float32Array {
  const a = new Float32Array(n)
  for (let i = 0; i < n; i++) a[i] = bf16Value(bf16Bits((rand() * 2 - 1) * scale))
  return a
}

interface SrcTensor {name: string; dtype: DType; shape: number[]; data: ArrayBufferView}

export function writeFixture(dir: string, o: FixtureOptions): Fixture {
  seed = 7
  mkdirSync(dir, {recursive: true})
  const {H, V, L, nh, nkv, hd, nk, nv, dk, dv, K, I, E, Im, Is} = DIMS
  const mlx = o.names === 'mlx'
  const zc = o.kind !== 'qwen3'
  const hybrid = o.kind !== 'qwen3'
  const moe = o.kind === 'moe' || o.kind === 'next'
  const truth: Fixture['truth'] = new Map()
  const src: SrcTensor[] = []
  const prefix = o.names === 'vl' ? 'model.language_model.' : mlx && o.kind !== 'next' && o.kind !== 'qwen3' ? 'language_model.model.' : 'model.'

  // A linear: truth = values; source = bf16, or MLX-quantized (truth = its dequantized values).
  const addLinearSrc = (srcName: string, shape: number[], data: Float32Array, bits = 4) => {
    const cols = shape[shape.length - 1]
    const rows = data.length / cols
    if (mlx && cols % 64 === 0) {
      const q = quantize(data, rows, cols, bits as 4 | 8)
      const lead = shape.slice(0, -1)
      src.push({name: `${srcName}.weight`, dtype: 'U32', shape: [...lead, (cols * bits) / 32], data: q.weight})
      src.push({name: `${srcName}.scales`, dtype: 'BF16', shape: [...lead, cols / 64], data: q.scales})
      src.push({name: `${srcName}.biases`, dtype: 'BF16', shape: [...lead, cols / 64], data: q.biases})
      return dequantize(q, rows, cols, bits as 4 | 8)
    }
    src.push({name: `${srcName}.weight`, dtype: 'BF16', shape, data: toBf16(data)})
    return data
  }
  const lin = (splash: string, srcName: string, shape: number[], bits = 4) => {
    const data = addLinearSrc(srcName, shape, randBf16(shape.reduce((a, b) => a * b, 1)), bits)
    truth.set(splash, {shape, data, linear: true})
  }
  const normT = (splash: string, srcName: string, n: number, zeroCentred = zc) => {
    const w = randBf16(n, 0.5)
    if (mlx && zeroCentred) {
      // MLX stores 1 + w already (in bf16) and the package takes it as is
      const shifted = fromBf16(toBf16(w.map(x => 1 + x)))
      src.push({name: srcName, dtype: 'BF16', shape: [n], data: toBf16(shifted)})
      truth.set(splash, {shape: [n], data: shifted, linear: false})
    } else {
      src.push({name: srcName, dtype: 'BF16', shape: [n], data: toBf16(w)})
      truth.set(splash, {shape: [n], data: zeroCentred ? w.map(x => Math.fround(1 + x)) : w, linear: false})
    }
  }
  const f32T = (splash: string, srcName: string, shape: number[], srcShape: number[], dtype: DType = 'BF16') => {
    const data = randBf16(shape.reduce((a, b) => a * b, 1), 1)
    src.push({name: srcName, dtype, shape: srcShape, data: dtype === 'F32' ? data : toBf16(data)})
    truth.set(splash, {shape, data, linear: false})
  }

  lin('embed_tokens', `${prefix}embed_tokens`, [V, H])
  const layerTypes = Array.from({length: L}, (_, i) => (hybrid && (i + 1) % 4 !== 0 ? 'linear_attention' : 'full_attention'))
  for (let i = 0; i < L; i++) {
    const S = `${prefix}layers.${i}`
    const T = `layers.${i}`
    normT(`${T}.input_layernorm`, `${S}.input_layernorm.weight`, H)
    normT(`${T}.post_attention_layernorm`, `${S}.post_attention_layernorm.weight`, H)
    if (layerTypes[i] === 'linear_attention') {
      const C = 2 * nk * dk + nv * dv
      if (o.kind === 'next') {
        const parts = {qkv: randBf16(C * H), z: randBf16(nv * dv * H), b: randBf16(nv * H), a: randBf16(nv * H)}
        const r = nv / nk
        const row = (m: Float32Array, j: number) => m.subarray(j * H, (j + 1) * H)
        const qkvz: Float32Array[] = []
        const ba: Float32Array[] = []
        for (let g = 0; g < nk; g++) {
          for (let j = 0; j < dk; j++) qkvz.push(row(parts.qkv, g * dk + j))
          for (let j = 0; j < dk; j++) qkvz.push(row(parts.qkv, nk * dk + g * dk + j))
          for (let j = 0; j < r * dv; j++) qkvz.push(row(parts.qkv, 2 * nk * dk + g * r * dv + j))
          for (let j = 0; j < r * dv; j++) qkvz.push(row(parts.z, g * r * dv + j))
          for (let j = 0; j < r; j++) ba.push(row(parts.b, g * r + j))
          for (let j = 0; j < r; j++) ba.push(row(parts.a, g * r + j))
        }
        const cat = (rows: Float32Array[]) => {
          const m = new Float32Array(rows.length * H)
          rows.forEach((x, k) => m.set(x, k * H))
          return m
        }
        const fq = addLinearSrc(`${S}.linear_attn.in_proj_qkvz`, [qkvz.length, H], cat(qkvz))
        const fb = addLinearSrc(`${S}.linear_attn.in_proj_ba`, [ba.length, H], cat(ba))
        if (mlx) {
          // quantization changed the values: recompute the truth from the dequantized fused tensors
          const G = 2 * dk + 2 * r * dv
          const take = (m: Float32Array, ranges: [number, number][]) => cat(ranges.flatMap(([s, n]) => Array.from({length: n}, (_, j) => row(m, s + j))))
          const gs = Array.from({length: nk}, (_, g) => g)
          parts.qkv = take(fq, [...gs.map(g => [g * G, dk] as [number, number]), ...gs.map(g => [g * G + dk, dk] as [number, number]), ...gs.map(g => [g * G + 2 * dk, r * dv] as [number, number])])
          parts.z = take(fq, gs.map(g => [g * G + 2 * dk + r * dv, r * dv] as [number, number]))
          parts.b = take(fb, gs.map(g => [g * 2 * r, r] as [number, number]))
          parts.a = take(fb, gs.map(g => [g * 2 * r + r, r] as [number, number]))
        }
        truth.set(`${T}.linear_attn.in_proj_qkv`, {shape: [C, H], data: parts.qkv, linear: true})
        truth.set(`${T}.linear_attn.in_proj_z`, {shape: [nv * dv, H], data: parts.z, linear: true})
        truth.set(`${T}.linear_attn.in_proj_b`, {shape: [nv, H], data: parts.b, linear: true})
        truth.set(`${T}.linear_attn.in_proj_a`, {shape: [nv, H], data: parts.a, linear: true})
      } else {
        lin(`${T}.linear_attn.in_proj_qkv`, `${S}.linear_attn.in_proj_qkv`, [C, H])
        lin(`${T}.linear_attn.in_proj_z`, `${S}.linear_attn.in_proj_z`, [nv * dv, H])
        lin(`${T}.linear_attn.in_proj_b`, `${S}.linear_attn.in_proj_b`, [nv, H])
        lin(`${T}.linear_attn.in_proj_a`, `${S}.linear_attn.in_proj_a`, [nv, H])
      }
      f32T(`${T}.linear_attn.conv1d`, `${S}.linear_attn.conv1d.weight`, [C, K], mlx ? [C, K, 1] : [C, 1, K])
      f32T(`${T}.linear_attn.A_log`, `${S}.linear_attn.A_log`, [nv], [nv], 'F32')
      f32T(`${T}.linear_attn.dt_bias`, `${S}.linear_attn.dt_bias`, [nv], [nv])
      normT(`${T}.linear_attn.norm`, `${S}.linear_attn.norm.weight`, dv, false)
      lin(`${T}.linear_attn.out_proj`, `${S}.linear_attn.out_proj`, [H, nv * dv])
    } else {
      lin(`${T}.self_attn.q_proj`, `${S}.self_attn.q_proj`, [nh * hd * (hybrid ? 2 : 1), H])
      lin(`${T}.self_attn.k_proj`, `${S}.self_attn.k_proj`, [nkv * hd, H])
      lin(`${T}.self_attn.v_proj`, `${S}.self_attn.v_proj`, [nkv * hd, H])
      lin(`${T}.self_attn.o_proj`, `${S}.self_attn.o_proj`, [H, nh * hd])
      normT(`${T}.self_attn.q_norm`, `${S}.self_attn.q_norm.weight`, hd)
      normT(`${T}.self_attn.k_norm`, `${S}.self_attn.k_norm.weight`, hd)
    }
    if (!moe) {
      lin(`${T}.mlp.gate_proj`, `${S}.mlp.gate_proj`, [I, H])
      lin(`${T}.mlp.up_proj`, `${S}.mlp.up_proj`, [I, H])
      lin(`${T}.mlp.down_proj`, `${S}.mlp.down_proj`, [H, I])
      continue
    }
    lin(`${T}.mlp.router`, `${S}.mlp.gate`, [E, H], 8)
    const experts = o.experts ?? 'per'
    if (experts === 'switch') {
      lin(`${T}.mlp.experts.gate_proj`, `${S}.mlp.switch_mlp.gate_proj`, [E, Im, H])
      lin(`${T}.mlp.experts.up_proj`, `${S}.mlp.switch_mlp.up_proj`, [E, Im, H])
      lin(`${T}.mlp.experts.down_proj`, `${S}.mlp.switch_mlp.down_proj`, [E, H, Im])
    } else if (experts === 'packed') {
      const gate = randBf16(E * Im * H)
      const up = randBf16(E * Im * H)
      const gu = new Float32Array(E * 2 * Im * H)
      for (let e = 0; e < E; e++) {
        gu.set(gate.subarray(e * Im * H, (e + 1) * Im * H), e * 2 * Im * H)
        gu.set(up.subarray(e * Im * H, (e + 1) * Im * H), (e * 2 + 1) * Im * H)
      }
      src.push({name: `${S}.mlp.experts.gate_up_proj`, dtype: 'BF16', shape: [E, 2 * Im, H], data: toBf16(gu)})
      truth.set(`${T}.mlp.experts.gate_proj`, {shape: [E, Im, H], data: gate, linear: true})
      truth.set(`${T}.mlp.experts.up_proj`, {shape: [E, Im, H], data: up, linear: true})
      const down = randBf16(E * H * Im)
      src.push({name: `${S}.mlp.experts.down_proj`, dtype: 'BF16', shape: [E, H, Im], data: toBf16(down)})
      truth.set(`${T}.mlp.experts.down_proj`, {shape: [E, H, Im], data: down, linear: true})
    } else {
      for (const [p, shape] of [['gate_proj', [Im, H]], ['up_proj', [Im, H]], ['down_proj', [H, Im]]] as const) {
        const all = new Float32Array(E * shape[0] * shape[1])
        for (let e = 0; e < E; e++) {
          const d = addLinearSrc(`${S}.mlp.experts.${e}.${p}`, [...shape], randBf16(shape[0] * shape[1]))
          all.set(d, e * shape[0] * shape[1])
        }
        truth.set(`${T}.mlp.experts.${p}`, {shape: [E, ...shape], data: all, linear: true})
      }
    }
    lin(`${T}.mlp.shared_expert.gate_proj`, `${S}.mlp.shared_expert.gate_proj`, [Is, H])
    lin(`${T}.mlp.shared_expert.up_proj`, `${S}.mlp.shared_expert.up_proj`, [Is, H])
    lin(`${T}.mlp.shared_expert.down_proj`, `${S}.mlp.shared_expert.down_proj`, [H, Is])
    lin(`${T}.mlp.shared_expert_gate`, `${S}.mlp.shared_expert_gate`, [1, H], 8)
  }
  normT('norm', `${prefix}norm.weight`, H)
  if (!o.tie) lin('lm_head', mlx && prefix === 'language_model.model.' ? 'language_model.lm_head' : 'lm_head', [V, H])
  if (o.names === 'vl') {
    src.push({name: 'model.visual.blocks.0.attn.qkv.weight', dtype: 'BF16', shape: [3, 64], data: toBf16(randBf16(192))})
  }
  if (hybrid && !mlx) src.push({name: 'mtp.fc.weight', dtype: 'BF16', shape: [H, 2 * H], data: toBf16(randBf16(2 * H * H))})

  const config = configFor(o, layerTypes)
  writeFileSync(join(dir, 'config.json'), JSON.stringify(config, null, 2))
  writeShards(dir, src, o.shards ?? 1)
  writeTokenizerFiles(dir)
  return {dir, truth, config}
}

function configFor(o: FixtureOptions, layerTypes: string[]): Record<string, unknown> {
  const {H, V, L, nh, nkv, hd, nk, nv, dk, dv, K, I, E, Im, Is} = DIMS
  const moe = o.kind === 'moe' || o.kind === 'next'
  const text: Record<string, unknown> = {
    hidden_size: H, num_hidden_layers: L, vocab_size: V, num_attention_heads: nh, num_key_value_heads: nkv, head_dim: hd,
    rms_norm_eps: 1e-6, max_position_embeddings: 4096, tie_word_embeddings: !!o.tie,
  }
  if (o.kind === 'qwen3') {
    return {architectures: ['Qwen3ForCausalLM'], model_type: 'qwen3', ...text, intermediate_size: I, rope_theta: 1000000,
      ...(o.names === 'mlx' ? {quantization: {group_size: 64, bits: 4}} : {})}
  }
  Object.assign(text, {
    linear_num_key_heads: nk, linear_num_value_heads: nv, linear_key_head_dim: dk, linear_value_head_dim: dv, linear_conv_kernel_dim: K,
  })
  if (o.oldRope || o.kind === 'next') Object.assign(text, {rope_theta: 5000000, partial_rotary_factor: 0.25, full_attention_interval: 4})
  else Object.assign(text, {layer_types: layerTypes, rope_parameters: {rope_type: 'default', rope_theta: 10000000, partial_rotary_factor: 0.25, mrope_section: [11, 11, 10], mrope_interleaved: true}})
  if (moe) Object.assign(text, {num_experts: E, num_experts_per_tok: 2, moe_intermediate_size: Im, shared_expert_intermediate_size: Is, intermediate_size: 999})
  else text.intermediate_size = I
  const quant = o.names === 'mlx' ? {quantization: {group_size: 64, bits: 4}} : {}
  if (o.kind === 'next') return {architectures: ['Qwen3NextForCausalLM'], model_type: 'qwen3_next', ...text, norm_topk_prob: true, ...quant}
  const arch = o.kind === 'moe' ? 'Qwen3_5Moe' : 'Qwen3_5'
  if (o.names === 'text') return {architectures: [`${arch}ForCausalLM`], model_type: o.kind === 'moe' ? 'qwen3_5_moe_text' : 'qwen3_5_text', ...text}
  return {
    architectures: [`${arch}ForConditionalGeneration`], model_type: o.kind === 'moe' ? 'qwen3_5_moe' : 'qwen3_5',
    text_config: text, vision_config: {depth: 1}, tie_word_embeddings: !!o.tie, eos_token_id: 95, ...quant,
  }
}

function writeShards(dir: string, src: SrcTensor[], shards: number): Promise<void> | void {
  const per = Math.ceil(src.length / shards)
  const weightMap: Record<string, string> = {}
  const jobs: Promise<void>[] = []
  for (let s = 0; s < shards; s++) {
    const part = src.slice(s * per, (s + 1) * per)
    const file = shards === 1 ? 'model.safetensors' : `model-0000${s + 1}-of-0000${shards}.safetensors`
    for (const t of part) weightMap[t.name] = file
    jobs.push(writeSafetensors(join(dir, file), part, {format: 'pt'}))
  }
  if (shards > 1) writeFileSync(join(dir, 'model.safetensors.index.json'), JSON.stringify({metadata: {}, weight_map: weightMap}))
  pending.push(...jobs)
}

const pending: Promise<void>[] = []
/** Waits for the shard files of every fixture written so far. */
export async function flushFixtures(): Promise<void> {
  await Promise.all(pending.splice(0))
}

export function writeTokenizerFiles(dir: string): void {
  writeFileSync(join(dir, 'tokenizer.json'), JSON.stringify({
    version: '1.0', added_tokens: [{id: 94, content: '<|endoftext|>', special: true}, {id: 95, content: '<|im_end|>', special: true}],
    model: {type: 'BPE', vocab: {a: 0}, merges: []},
  }))
  writeFileSync(join(dir, 'tokenizer_config.json'), JSON.stringify({
    chat_template: '{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}',
    eos_token: '<|im_end|>', pad_token: '<|endoftext|>',
  }))
  writeFileSync(join(dir, 'generation_config.json'), JSON.stringify({eos_token_id: [95, 94]}))
}
