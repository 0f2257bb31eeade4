// Decode / prefill speed of the native core on a synthetic q4 package with random weights (not a test;
// numbers only). Usage: npx tsx test/core-native/helpers/bench-decode.ts [dir] [threads]
// Shapes: hidden 2048, 16 layers (12 GDN + 4 attention: 16/2 heads of 256; GDN 16/32 heads of 128),
// dense MLP 6144, vocab 65536 — about 1.4 B parameters, ~0.8 GB in q4.
import {randomFillSync} from 'node:crypto'
import {existsSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import path from 'node:path'
import {SafetensorsWriter, type TensorSpec} from '../../../src/package/safetensors.js'
import {bf16Bits} from '../../../src/package/builder/quantize.js'
import {native} from '../../../src/native/native.js'

const dir = process.argv[2] ?? '/tmp/splash-bench-q4'
const threads = Number(process.argv[3] ?? 2)
const H = 2048, L = 16, I = 6144, V = 65536
const nh = 16, nkv = 2, hd = 256, nk = 16, nv = 32, dk = 128, dv = 128
const layerTypes = Array.from({length: L}, (_, i) => ((i + 1) % 4 === 0 ? 'full_attention' : 'linear_attention'))
const config = {
  hidden_size: H, num_hidden_layers: L, vocab_size: V, layer_types: layerTypes, rms_norm_eps: 1e-6,
  num_attention_heads: nh, num_key_value_heads: nkv, head_dim: hd, attn_output_gate: true, rope_theta: 1e7,
  partial_rotary_factor: 0.25, mrope_section: [11, 11, 10], mrope_interleaved: true, linear_num_key_heads: nk,
  linear_num_value_heads: nv, linear_key_head_dim: dk, linear_value_head_dim: dv, linear_conv_kernel_dim: 4,
  intermediate_size: I, num_experts: 0, num_experts_per_tok: 0, moe_intermediate_size: 0,
  shared_expert_intermediate_size: 0, norm_topk_prob: false, tie_word_embeddings: false, max_position_embeddings: 262144,
}

async function build(): Promise<void> {
  const specs: (TensorSpec & {fill: () => ArrayBufferView})[] = []
  const q4 = (name: string, rows: number, cols: number) => {
    specs.push({name: `${name}.weight`, dtype: 'U32', shape: [rows, cols / 8], fill: () => randomFillSync(new Uint32Array((rows * cols) / 8))})
    const g = (rows * cols) / 64
    specs.push({name: `${name}.scales`, dtype: 'BF16', shape: [rows, cols / 64], fill: () => new Uint16Array(g).fill(bf16Bits(2 / 15 / Math.sqrt(cols)))})
    specs.push({name: `${name}.biases`, dtype: 'BF16', shape: [rows, cols / 64], fill: () => new Uint16Array(g).fill(bf16Bits(-1 / Math.sqrt(cols)))})
  }
  const f32 = (name: string, n: number, v: number) => specs.push({name, dtype: 'F32', shape: [n], fill: () => new Float32Array(n).fill(v)})
  q4('embed_tokens', V, H)
  q4('lm_head', V, H)
  f32('norm', H, 1)
  const C = 2 * nk * dk + nv * dv
  for (let i = 0; i < L; i++) {
    const p = `layers.${i}.`
    f32(`${p}input_layernorm`, H, 1)
    f32(`${p}post_attention_layernorm`, H, 1)
    if (layerTypes[i] === 'linear_attention') {
      q4(`${p}linear_attn.in_proj_qkv`, C, H)
      q4(`${p}linear_attn.in_proj_z`, nv * dv, H)
      q4(`${p}linear_attn.in_proj_b`, nv, H)
      q4(`${p}linear_attn.in_proj_a`, nv, H)
      q4(`${p}linear_attn.out_proj`, H, nv * dv)
      specs.push({name: `${p}linear_attn.conv1d`, dtype: 'F32', shape: [C, 4], fill: () => new Float32Array(C * 4).fill(0.3)})
      f32(`${p}linear_attn.A_log`, nv, 0.5)
      f32(`${p}linear_attn.dt_bias`, nv, 0)
      f32(`${p}linear_attn.norm`, dv, 1)
    } else {
      q4(`${p}self_attn.q_proj`, nh * hd * 2, H)
      q4(`${p}self_attn.k_proj`, nkv * hd, H)
      q4(`${p}self_attn.v_proj`, nkv * hd, H)
      q4(`${p}self_attn.o_proj`, H, nh * hd)
      f32(`${p}self_attn.q_norm`, hd, 1)
      f32(`${p}self_attn.k_norm`, hd, 1)
    }
    q4(`${p}mlp.gate_proj`, I, H)
    q4(`${p}mlp.up_proj`, I, H)
    q4(`${p}mlp.down_proj`, H, I)
  }
  await mkdir(dir, {recursive: true})
  const w = await SafetensorsWriter.create(path.join(dir, 'model.safetensors'), specs.map(({name, dtype, shape}) => ({name, dtype, shape})))
  for (const s of specs) await w.write(s.name, s.fill())
  await w.close()
  await writeFile(path.join(dir, 'splash.json'), JSON.stringify({format: 1, name: 'bench/q4', family: 'qwen3_5', config,
    weights: {files: ['model.safetensors'], quant: 'q4', group_size: 64}}))
}

if (!existsSync(path.join(dir, 'splash.json'))) await build()
for (const activations of ['int8x2', 'int8', 'f32'] as const) {
  const h = await native.openModel(dir, {threads, activations})
  const info = native.modelInfo(h)
  const seq = native.createSequence(h, {maxLength: 1024})
  const prompt = Int32Array.from({length: 128}, (_, i) => (i * 7919) % V)
  let t0 = performance.now()
  await native.step(h, [{seq, tokens: prompt, logits: 'last'}])
  const prefill = (performance.now() - t0) / 1000
  const n = 16
  t0 = performance.now()
  for (let i = 0; i < n; i++) await native.step(h, [{seq, tokens: Int32Array.of(i + 1), logits: 'last'}])
  const decode = (performance.now() - t0) / 1000
  console.log(`${info.isa} threads=${threads} ${activations} weights ${(info.weightBytes / 1e9).toFixed(2)} GB: ` +
    `prefill 128 tok ${(128 / prefill).toFixed(1)} tok/s; decode ${(n / decode).toFixed(2)} tok/s ` +
    `(${((info.weightBytes / 1e9) * n / decode).toFixed(1)} GB/s of weights)`)
  native.closeModel(h)
}
