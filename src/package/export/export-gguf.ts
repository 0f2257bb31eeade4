// `splash package export --gguf`: a Splash package as a GGUF file that llama.cpp loads, for the architectures it has
// for these families (qwen35, qwen35moe, qwen3next, qwen3). Weights are dequantised from the package's MLX affine q4/q8 (or bf16)
// and requantised to Q8_0 or Q4_0 (ggml's reference rounding); norms, conv and SSM parameters are F32. The tokenizer
// goes in GGUF's gpt2 (byte-level BPE) form with the chat template. Facts about names and layouts come from
// llama.cpp's src/llama-arch.cpp, src/models/qwen35*.cpp, qwen3next.cpp and conversion/qwen.py (qwen35: V heads of the
// GDN layers reordered from grouped to tiled order; qwen3next: V heads kept grouped, in_proj_b and in_proj_a fused per K
// head into ssm_ba; A_log stored as −exp(A_log); dt_bias as ssm_dt.bias).
import {open, readFile, type FileHandle} from 'node:fs/promises'
import {join} from 'node:path'
import {SplashError} from '../../errors.js'
import {modelLayout, type LayoutEntry} from '../layout.js'
import {readManifest, type Manifest} from '../manifest.js'
import type {Bits} from '../builder/quantize.js'
import {SafetensorsReader, toFloat32} from '../safetensors.js'
import {BLOCK, dequantAffine, encodeChunk, GgmlType, permuteRows, type AffineBlock, type ChunkJob} from './gguf-encode.js'
import {WorkerPool, owned} from '../worker-pool.js'

export {BLOCK, dequantizeQ4_0, dequantizeQ8_0, encodeTensor, f16Bits, f16Value, GgmlType, quantizeQ4_0, quantizeQ8_0} from './gguf-encode.js'

// ---- GGUF writer -------------------------------------------------------------------------------------------------

export const GGUF_MAGIC = 0x46554747 // "GGUF" little-endian
export const GGUF_VERSION = 3
export const GGUF_ALIGNMENT = 32

export enum GgufType {UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12}

export type KvValue =
  | {type: GgufType.STRING; value: string}
  | {type: GgufType.UINT32 | GgufType.INT32 | GgufType.FLOAT32 | GgufType.BOOL | GgufType.UINT64; value: number | boolean}
  | {type: GgufType.ARRAY; itemType: GgufType; value: (string | number)[]}

export const kv = {
  str: (value: string): KvValue => ({type: GgufType.STRING, value}),
  u32: (value: number): KvValue => ({type: GgufType.UINT32, value}),
  i32: (value: number): KvValue => ({type: GgufType.INT32, value}),
  f32: (value: number): KvValue => ({type: GgufType.FLOAT32, value}),
  bool: (value: boolean): KvValue => ({type: GgufType.BOOL, value}),
  arr: (itemType: GgufType, value: (string | number)[]): KvValue => ({type: GgufType.ARRAY, itemType, value}),
}

export interface GgufTensorInfo {
  name: string
  /** ggml order: ne[0] is the contiguous (innermost) dimension. */
  ne: number[]
  type: GgmlType
}

const BLOCK_BYTES: Record<GgmlType, number> = {[GgmlType.F32]: 4, [GgmlType.F16]: 2, [GgmlType.Q4_0]: 18, [GgmlType.Q8_0]: 34}

export function tensorBytes(t: Pick<GgufTensorInfo, 'ne' | 'type'>): number {
  const n = t.ne.reduce((a, b) => a * b, 1)
  if (t.type === GgmlType.F32 || t.type === GgmlType.F16) return n * BLOCK_BYTES[t.type]
  if (t.ne[0] % BLOCK !== 0) throw new Error(`row of ${t.ne[0]} is not a multiple of ${BLOCK}`)
  return (n / BLOCK) * BLOCK_BYTES[t.type]
}

const align = (n: number, a: number) => Math.ceil(n / a) * a

class Bytes {
  private parts: Buffer[] = []
  length = 0
  push(b: Buffer): void {
    this.parts.push(b)
    this.length += b.length
  }
  u32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeUInt32LE(v >>> 0)
    this.push(b)
  }
  i32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeInt32LE(v)
    this.push(b)
  }
  u64(v: number): void {
    const b = Buffer.alloc(8)
    b.writeBigUInt64LE(BigInt(v))
    this.push(b)
  }
  f32(v: number): void {
    const b = Buffer.alloc(4)
    b.writeFloatLE(v)
    this.push(b)
  }
  str(s: string): void {
    const b = Buffer.from(s, 'utf8')
    this.u64(b.length)
    this.push(b)
  }
  scalar(type: GgufType, v: string | number | boolean): void {
    switch (type) {
      case GgufType.STRING: return this.str(String(v))
      case GgufType.UINT32: return this.u32(Number(v))
      case GgufType.INT32: return this.i32(Number(v))
      case GgufType.FLOAT32: return this.f32(Number(v))
      case GgufType.BOOL: return this.push(Buffer.from([v ? 1 : 0]))
      case GgufType.UINT64: return this.u64(Number(v))
      default: throw new Error(`unsupported GGUF value type ${type}`)
    }
  }
  concat(): Buffer {
    return Buffer.concat(this.parts)
  }
}

/** The header (magic … tensor infos) padded to the alignment, and each tensor's offset inside the data section. */
export function ggufHeader(kvs: [string, KvValue][], tensors: GgufTensorInfo[], alignment = GGUF_ALIGNMENT): {header: Buffer; offsets: number[]; dataBytes: number} {
  const b = new Bytes()
  b.u32(GGUF_MAGIC)
  b.u32(GGUF_VERSION)
  b.u64(tensors.length)
  b.u64(kvs.length)
  for (const [key, v] of kvs) {
    b.str(key)
    b.u32(v.type)
    if (v.type === GgufType.ARRAY) {
      b.u32(v.itemType)
      b.u64(v.value.length)
      for (const x of v.value) b.scalar(v.itemType, x)
    } else b.scalar(v.type, v.value)
  }
  const offsets: number[] = []
  let at = 0
  for (const t of tensors) {
    b.str(t.name)
    b.u32(t.ne.length)
    for (const d of t.ne) b.u64(d)
    b.u32(t.type)
    b.u64(at)
    offsets.push(at)
    at = align(at + tensorBytes(t), alignment)
  }
  const raw = b.concat()
  const header = Buffer.alloc(align(raw.length, alignment))
  raw.copy(header)
  return {header, offsets, dataBytes: at}
}

// ---- ggml block formats (reference rounding, as ggml's quantize_row_*_ref) ---------------------------------------


// ---- Reading Splash tensors as float32 rows ------------------------------------------------------------------------

export class PackageTensors {
  private constructor(private readonly readers: SafetensorsReader[]) {}

  static async open(dir: string, files: string[]): Promise<PackageTensors> {
    const readers: SafetensorsReader[] = []
    for (const f of files) readers.push(await SafetensorsReader.open(join(dir, f)))
    return new PackageTensors(readers)
  }

  private find(name: string): SafetensorsReader | undefined {
    return this.readers.find(r => r.has(name))
  }

  /** Rows [r0, r1) of tensor `name` seen as [rows, cols] (leading dims folded): float32, or a quantised block as stored. */
  async block(name: string, cols: number, r0: number, r1: number): Promise<Float32Array | AffineBlock> {
    const plain = this.find(name)
    if (plain) return toFloat32(await plain.readRows2d(name, r0, r1), plain.info(name).dtype)
    const w = this.find(`${name}.weight`)
    if (!w) throw new SplashError('gguf_missing_tensor', 'invalid_request', `package has no tensor ${name}`)
    const wi = w.info(`${name}.weight`)
    if (!w.has(`${name}.scales`)) return toFloat32(await w.readRows2d(`${name}.weight`, r0, r1), wi.dtype)
    const wcols = wi.shape[wi.shape.length - 1]
    const wb = await w.readRows2d(`${name}.weight`, r0, r1)
    return {
      weight: new Uint32Array(owned(new Uint8Array(wb.buffer, wb.byteOffset, wb.byteLength)).buffer),
      scales: bf16Array(await w.readRows2d(`${name}.scales`, r0, r1)),
      biases: bf16Array(await w.readRows2d(`${name}.biases`, r0, r1)),
      rows: r1 - r0,
      cols,
      bits: ((32 * wcols) / cols) as Bits,
    }
  }

  async close(): Promise<void> {
    for (const r of this.readers) await r.close()
  }
}

function bf16Array(b: Buffer): Uint16Array {
  const copy = new Uint8Array(b.byteLength)
  copy.set(b)
  return new Uint16Array(copy.buffer)
}

// ---- Splash → llama.cpp mapping ------------------------------------------------------------------------------------

const ARCH: Record<Manifest['family'], string | null> = {qwen3_5: 'qwen35', qwen3_5_moe: 'qwen35moe', qwen3: 'qwen3', qwen3_next: 'qwen3next'}

type Fix =
  | {kind: 'none'}
  | {kind: 'negExp'}
  /** Reorder V heads (grouped by K head → tiled) along rows, starting at row `from` of each [rows, cols] matrix. */
  | {kind: 'rows'; from: number; headDim: number}
  | {kind: 'cols'; headDim: number}
  /** qwen3next's ssm_ba: the rows of in_proj_b and in_proj_a (`source`, `second`) interleaved per K head, [b_g | a_g]. */
  | {kind: 'ba'; second: string; groups: number}

interface Planned {
  info: GgufTensorInfo
  source: string
  /** Splash shape (row-major). */
  shape: number[]
  fix: Fix
}

export type ExportType = 'q8_0' | 'q4_0'

function ggufName(arch: string, name: string): string | null {
  const m = /^layers\.(\d+)\.(.+)$/.exec(name)
  if (!m) return ({embed_tokens: 'token_embd.weight', norm: 'output_norm.weight', lm_head: 'output.weight'} as Record<string, string>)[name] ?? null
  const [, i, rest] = m
  const map: Record<string, string> = {
    input_layernorm: 'attn_norm.weight',
    post_attention_layernorm: arch === 'qwen3' ? 'ffn_norm.weight' : 'post_attention_norm.weight',
    'self_attn.q_proj': 'attn_q.weight',
    'self_attn.k_proj': 'attn_k.weight',
    'self_attn.v_proj': 'attn_v.weight',
    'self_attn.o_proj': 'attn_output.weight',
    'self_attn.q_norm': 'attn_q_norm.weight',
    'self_attn.k_norm': 'attn_k_norm.weight',
    'linear_attn.in_proj_qkv': 'attn_qkv.weight',
    'linear_attn.in_proj_z': 'attn_gate.weight',
    'linear_attn.in_proj_b': 'ssm_beta.weight',
    'linear_attn.in_proj_a': 'ssm_alpha.weight',
    'linear_attn.conv1d': 'ssm_conv1d.weight',
    'linear_attn.A_log': 'ssm_a',
    'linear_attn.dt_bias': 'ssm_dt.bias',
    'linear_attn.norm': 'ssm_norm.weight',
    'linear_attn.out_proj': 'ssm_out.weight',
    'mlp.gate_proj': 'ffn_gate.weight',
    'mlp.up_proj': 'ffn_up.weight',
    'mlp.down_proj': 'ffn_down.weight',
    'mlp.router': 'ffn_gate_inp.weight',
    'mlp.experts.gate_proj': 'ffn_gate_exps.weight',
    'mlp.experts.up_proj': 'ffn_up_exps.weight',
    'mlp.experts.down_proj': 'ffn_down_exps.weight',
    'mlp.shared_expert.gate_proj': 'ffn_gate_shexp.weight',
    'mlp.shared_expert.up_proj': 'ffn_up_shexp.weight',
    'mlp.shared_expert.down_proj': 'ffn_down_shexp.weight',
    'mlp.shared_expert_gate': 'ffn_gate_inp_shexp.weight',
  }
  const g = map[rest]
  return g ? `blk.${i}.${g}` : null
}

/** New row index → old row index for V heads: grouped [nk][r][hd] → tiled [r][nk][hd]. */
export function vHeadOrder(nk: number, r: number, hd: number): Int32Array {
  const out = new Int32Array(nk * r * hd)
  for (let j = 0; j < r; j++) for (let g = 0; g < nk; g++) for (let d = 0; d < hd; d++) out[(j * nk + g) * hd + d] = (g * r + j) * hd + d
  return out
}

function plan(m: Manifest, type: ExportType): Planned[] {
  const c = m.config
  const arch = ARCH[m.family]!
  const nk = c.linear_num_key_heads ?? 0
  const nv = c.linear_num_value_heads ?? 0
  const dk = c.linear_key_head_dim ?? 0
  const dv = c.linear_value_head_dim ?? 0
  // qwen35 wants the V heads tiled; qwen3next broadcasts them grouped by K head, Splash's own order
  const reorder = nk > 0 && nv > 0 && nk !== nv && arch !== 'qwen3next'
  const q = type === 'q8_0' ? GgmlType.Q8_0 : GgmlType.Q4_0
  const out: Planned[] = []
  for (const e of modelLayout(c) as LayoutEntry[]) {
    const name = ggufName(arch, e.name)
    if (!name) throw new SplashError('gguf_unmapped', 'internal', `no GGUF name for ${e.name}`)
    let shape = [...e.shape]
    if (e.name.endsWith('.mlp.shared_expert_gate')) shape = [e.shape[1]] // [1, H] → {H}
    let fix: Fix = {kind: 'none'}
    if (e.name.endsWith('.A_log')) fix = {kind: 'negExp'}
    if (arch === 'qwen3next' && e.name.endsWith('.in_proj_a')) continue // written with in_proj_b, as ssm_ba
    if (arch === 'qwen3next' && e.name.endsWith('.in_proj_b')) {
      const second = e.name.replace(/in_proj_b$/, 'in_proj_a')
      out.push({info: {name: name.replace('ssm_beta', 'ssm_ba'), ne: [e.shape[1], 2 * e.shape[0]], type: GgmlType.F32}, source: e.name, shape: [2 * e.shape[0], e.shape[1]], fix: {kind: 'ba', second, groups: nk}})
      continue
    }
    if (reorder) {
      if (e.name.endsWith('.in_proj_qkv') || e.name.endsWith('.conv1d')) fix = {kind: 'rows', from: 2 * nk * dk, headDim: dv}
      else if (e.name.endsWith('.in_proj_z')) fix = {kind: 'rows', from: 0, headDim: dv}
      else if (e.name.endsWith('.in_proj_a') || e.name.endsWith('.in_proj_b') || e.name.endsWith('.A_log') || e.name.endsWith('.dt_bias')) {
        fix = {kind: 'rows', from: 0, headDim: 1}
      } else if (e.name.endsWith('.out_proj')) fix = {kind: 'cols', headDim: dv}
    }
    const small = e.kind === 'f32' || shape.length === 1 || /\.(router|in_proj_a|in_proj_b)$/.test(e.name)
    const cols = shape[shape.length - 1]
    const t = small || cols % BLOCK !== 0 ? GgmlType.F32 : q
    out.push({info: {name, ne: [...shape].reverse(), type: t}, source: e.name, shape, fix})
  }
  return out
}

function metadata(m: Manifest, type: ExportType, tok: TokenizerKv): [string, KvValue][] {
  const c = m.config
  const arch = ARCH[m.family]!
  const a = (k: string) => `${arch}.${k}`
  const kvs: [string, KvValue][] = [
    ['general.architecture', kv.str(arch)],
    ['general.name', kv.str(m.name)],
    ['general.file_type', kv.u32(type === 'q8_0' ? 7 : 2)],
    ['general.quantization_version', kv.u32(2)],
    ['general.alignment', kv.u32(GGUF_ALIGNMENT)],
    ['general.source.url', kv.str(m.provenance.source)],
    [a('block_count'), kv.u32(c.num_hidden_layers)],
    [a('context_length'), kv.u32(c.max_position_embeddings)],
    [a('embedding_length'), kv.u32(c.hidden_size)],
    [a('feed_forward_length'), kv.u32(c.intermediate_size)],
    [a('attention.head_count'), kv.u32(c.num_attention_heads)],
    [a('attention.head_count_kv'), kv.u32(c.num_key_value_heads)],
    [a('attention.key_length'), kv.u32(c.head_dim)],
    [a('attention.value_length'), kv.u32(c.head_dim)],
    [a('attention.layer_norm_rms_epsilon'), kv.f32(c.rms_norm_eps)],
    [a('rope.freq_base'), kv.f32(c.rope_theta)],
    [a('rope.dimension_count'), kv.u32(Math.round(c.head_dim * (c.partial_rotary_factor ?? 1)))],
  ]
  if (arch === 'qwen35' || arch === 'qwen35moe') {
    const sec = [...(c.mrope_section ?? [11, 11, 10])]
    while (sec.length < 4) sec.push(0)
    kvs.push([a('rope.dimension_sections'), kv.arr(GgufType.INT32, sec)])
  }
  if (arch !== 'qwen3') {
    kvs.push(
      [a('ssm.conv_kernel'), kv.u32(c.linear_conv_kernel_dim!)],
      [a('ssm.state_size'), kv.u32(c.linear_key_head_dim!)],
      [a('ssm.group_count'), kv.u32(c.linear_num_key_heads!)],
      [a('ssm.time_step_rank'), kv.u32(c.linear_num_value_heads!)],
      [a('ssm.inner_size'), kv.u32(c.linear_value_head_dim! * c.linear_num_value_heads!)],
      [a('full_attention_interval'), kv.u32(fullAttentionInterval(c.layer_types))],
    )
  }
  if (c.num_experts) {
    kvs.push(
      [a('expert_count'), kv.u32(c.num_experts)],
      [a('expert_used_count'), kv.u32(c.num_experts_per_tok!)],
      [a('expert_feed_forward_length'), kv.u32(c.moe_intermediate_size!)],
      [a('expert_shared_feed_forward_length'), kv.u32(c.shared_expert_intermediate_size ?? 0)],
    )
  }
  return [...kvs, ...tok.kvs]
}

function fullAttentionInterval(types: string[]): number {
  const first = types.indexOf('full_attention')
  const n = first < 0 ? 4 : first + 1
  types.forEach((t, i) => {
    if ((t === 'linear_attention') !== ((i + 1) % n !== 0)) {
      throw new SplashError('gguf_layer_pattern', 'invalid_request', `layer_types do not follow a fixed full-attention interval (llama.cpp needs one)`)
    }
  })
  return n
}

// ---- Tokenizer ------------------------------------------------------------------------------------------------------

interface TokenizerKv {
  kvs: [string, KvValue][]
  count: number
}

/**
 * llama.cpp's name for the package's pre-tokenizer split: Qwen3.5's regex keeps combining marks (\p{M}) with letters
 * (`qwen35`); Qwen2 / Qwen3 / Qwen3-Next's does not (`qwen2`).
 */
export function preTokenizer(json: string): 'qwen35' | 'qwen2' {
  return json.includes('\\p{M}') ? 'qwen35' : 'qwen2'
}

/** HF tokenizer.json (byte-level BPE) → tokenizer.ggml.* keys; the vocabulary is padded to the embedding rows. */
export function tokenizerKv(json: string, vocabSize: number, m: Pick<Manifest, 'tokenizer'>, chatTemplate: string): TokenizerKv {
  const t = JSON.parse(json) as {model: {type: string; vocab: Record<string, number>; merges: (string | [string, string])[]}; added_tokens?: {id: number; content: string; special: boolean}[]}
  if (t.model.type !== 'BPE') throw new SplashError('gguf_tokenizer', 'invalid_request', `tokenizer model ${t.model.type} is not BPE`)
  const tokens: string[] = []
  const types: number[] = []
  for (const [s, id] of Object.entries(t.model.vocab)) {
    tokens[id] = s
    types[id] = 1 // NORMAL
  }
  for (const a of t.added_tokens ?? []) {
    tokens[a.id] = a.content
    types[a.id] = a.special ? 3 : 4 // CONTROL : USER_DEFINED
  }
  const n = Math.max(vocabSize, tokens.length)
  for (let i = 0; i < n; i++) {
    if (tokens[i] === undefined) {
      tokens[i] = `[PAD${i}]`
      types[i] = 5 // UNUSED
    }
  }
  const merges = t.model.merges.map(x => (Array.isArray(x) ? x.join(' ') : x))
  const kvs: [string, KvValue][] = [
    ['tokenizer.ggml.model', kv.str('gpt2')],
    ['tokenizer.ggml.pre', kv.str(preTokenizer(json))],
    ['tokenizer.ggml.tokens', kv.arr(GgufType.STRING, tokens)],
    ['tokenizer.ggml.token_type', kv.arr(GgufType.INT32, types)],
    ['tokenizer.ggml.merges', kv.arr(GgufType.STRING, merges)],
    ['tokenizer.ggml.eos_token_id', kv.u32(m.tokenizer.eos_token_ids[0])],
    ['tokenizer.ggml.add_bos_token', kv.bool(false)],
    ['tokenizer.chat_template', kv.str(chatTemplate)],
  ]
  if (m.tokenizer.pad_token_id !== null) {
    kvs.push(['tokenizer.ggml.padding_token_id', kv.u32(m.tokenizer.pad_token_id)])
    kvs.push(['tokenizer.ggml.bos_token_id', kv.u32(m.tokenizer.pad_token_id)])
  }
  return {kvs, count: n}
}

// ---- Export ---------------------------------------------------------------------------------------------------------

export interface ExportOptions {
  dir: string
  out: string
  /** Default: q4_0 for q4 packages, q8_0 otherwise. */
  type?: ExportType
  log?: (line: string) => void
}

export interface ExportResult {
  arch: string
  type: ExportType
  tensors: number
  bytes: number
}

const ROWS_PER_CHUNK = 256

export async function exportGguf(o: ExportOptions): Promise<ExportResult> {
  const log = o.log ?? (() => undefined)
  const m = await readManifest(o.dir)
  const arch = ARCH[m.family]
  if (!arch) throw new SplashError('gguf_unsupported', 'invalid_request', `GGUF export does not support the ${m.family} family yet (supported: qwen3_5, qwen3_5_moe, qwen3_next, qwen3)`)
  const type = o.type ?? (m.weights.quant === 'q4' ? 'q4_0' : 'q8_0')
  const tok = tokenizerKv(await readFile(join(o.dir, m.tokenizer.file), 'utf8'), m.config.vocab_size, m, await readFile(join(o.dir, m.tokenizer.chat_template), 'utf8'))
  const plans = plan(m, type)
  const {header, offsets, dataBytes} = ggufHeader(metadata(m, type, tok), plans.map(p => p.info))
  const src = await PackageTensors.open(o.dir, m.weights.files)
  const pool = WorkerPool.create(new URL('./gguf-encode.js', import.meta.url), 16)
  // chunks being encoded (on the pool's threads) and written, at most a few per worker
  const inflight = new Set<Promise<void>>()
  const limit = pool ? 2 * pool.size : 1
  let fh: FileHandle | undefined
  const submit = async (chunk: ChunkJob, pos: number) => {
    // the buffers move to the worker: a view into a shared one (Node's small-Buffer pool) is copied first
    const v = chunk.values instanceof Float32Array ? owned(chunk.values) : chunk.values
    const job = {...chunk, values: v}
    const transfer = (v instanceof Float32Array ? [v] : [v.weight, v.scales, v.biases]).map(a => a.buffer as ArrayBuffer)
    const encoded = pool ? pool.run<Uint8Array>('encodeChunk', [job], transfer) : Promise.resolve(encodeChunk(job))
    const done = encoded.then(async enc => {
      await fh!.write(enc, 0, enc.length, pos)
    })
    inflight.add(done)
    void done.finally(() => inflight.delete(done)).catch(() => undefined)
    while (inflight.size >= limit) await Promise.race(inflight)
  }
  const t0 = Date.now()
  try {
    fh = await open(o.out, 'w')
    await fh.write(header, 0, header.length, 0)
    const c = m.config
    for (let k = 0; k < plans.length; k++) {
      const p = plans[k]
      const cols = p.shape.length === 1 ? p.shape[0] : p.shape[p.shape.length - 1]
      const rows = p.shape.length === 1 ? 1 : p.shape.slice(0, -1).reduce((a, b) => a * b, 1)
      const rowBytes = tensorBytes({ne: [cols], type: p.info.type})
      const base = header.length + offsets[k]
      const fix = p.fix
      const heads = (hd: number) => vHeadOrder(c.linear_num_key_heads!, c.linear_num_value_heads! / c.linear_num_key_heads!, hd)
      if (fix.kind === 'rows') {
        // V heads reordered along rows: the whole tensor read as stored, its rows moved, then encoded in chunks
        const n = p.shape[0] - fix.from
        const order = heads(fix.headDim)
        if (order.length !== n) throw new SplashError('gguf_reorder', 'internal', `${p.source}: ${n} rows to reorder, expected ${order.length}`)
        // a 1-D tensor (A_log, dt_bias) is reordered value by value
        const units = p.shape.length === 1 ? cols : rows
        const values = permuteRows(await src.block(p.source, cols, 0, p.shape.length === 1 ? 1 : rows), units, fix.from, order)
        await submit({values, cols, type: p.info.type, negExp: p.source.endsWith('.A_log')}, base)
        continue
      }
      if (fix.kind === 'ba') {
        const floats = (v: Float32Array | AffineBlock) => (v instanceof Float32Array ? v : dequantAffine(v))
        const b = floats(await src.block(p.source, cols, 0, rows / 2))
        const a = floats(await src.block(fix.second, cols, 0, rows / 2))
        const r = rows / 2 / fix.groups
        const values = new Float32Array(rows * cols)
        for (let g = 0; g < fix.groups; g++) {
          values.set(b.subarray(g * r * cols, (g + 1) * r * cols), 2 * g * r * cols)
          values.set(a.subarray(g * r * cols, (g + 1) * r * cols), (2 * g + 1) * r * cols)
        }
        await submit({values, cols, type: p.info.type}, base)
        continue
      }
      const colOrder = fix.kind === 'cols' ? heads(fix.headDim) : undefined
      for (let r0 = 0; r0 < rows; r0 += ROWS_PER_CHUNK) {
        const r1 = Math.min(rows, r0 + ROWS_PER_CHUNK)
        await submit({values: await src.block(p.source, cols, r0, r1), cols, type: p.info.type, negExp: fix.kind === 'negExp', colOrder}, base + r0 * rowBytes)
      }
      if ((k + 1) % 50 === 0) log(`  ${k + 1}/${plans.length} tensors`)
    }
    while (inflight.size > 0) await Promise.race(inflight)
    // Pad the file to the end of the data section.
    const end = header.length + dataBytes
    const {size} = await fh.stat()
    if (size < end) await fh.write(Buffer.alloc(end - size), 0, end - size, size)
  } finally {
    await Promise.allSettled(inflight)
    await pool?.close()
    await fh?.close()
    await src.close()
  }
  log(`wrote ${o.out}: ${arch}, ${type.toUpperCase()}, ${plans.length} tensors, ${((header.length + dataBytes) / 1e6).toFixed(1)} MB in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
  return {arch, type, tensors: plans.length, bytes: header.length + dataBytes}
}
