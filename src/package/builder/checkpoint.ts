// A source checkpoint folder (Hugging Face or MLX): config.json plus one or many safetensors shards, read tensor by
// tensor. Linear weights are addressed by module path ("model.layers.0.mlp.up_proj"); an MLX-quantized one
// (P.weight U32 + P.scales + P.biases) reads back as dequantized floats, row block by row block.
import {readdir, readFile} from 'node:fs/promises'
import {join} from 'node:path'
import {SplashError} from '../../errors.js'
import {SafetensorsReader, toFloat32, type TensorInfo} from '../safetensors.js'

export interface QuantInfo {
  bits: number
  groupSize: number
}

export type RawConfig = Record<string, unknown>

async function readJson(path: string): Promise<RawConfig | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as RawConfig
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined
    throw new SplashError('invalid_checkpoint', 'invalid_request', `${path}: ${(err as Error).message}`)
  }
}

export class Checkpoint {
  private readonly where = new Map<string, SafetensorsReader>()
  /** Names a sanitize step looked at: the rest were left out of the package. */
  readonly touched = new Set<string>()

  private constructor(
    readonly dir: string,
    readonly config: RawConfig,
    private readonly readers: SafetensorsReader[],
  ) {
    for (const r of readers) for (const n of r.names()) this.where.set(n, r)
  }

  static async open(dir: string): Promise<Checkpoint> {
    const config = await readJson(join(dir, 'config.json'))
    if (!config) throw new SplashError('invalid_checkpoint', 'invalid_request', `${dir}: no config.json (not a model checkpoint)`)
    const q = (config.quantization ?? config.quantization_config) as {mode?: string; quant_method?: string} | undefined
    if (q?.mode !== undefined && q.mode !== 'affine') {
      throw new SplashError('unsupported_checkpoint', 'invalid_request', `${dir}: MLX "${q.mode}" quantization is not supported (affine only)`)
    }
    if (q?.quant_method !== undefined) {
      throw new SplashError(
        'unsupported_checkpoint', 'invalid_request',
        `${dir}: ${q.quant_method} checkpoints are not supported; build from the bf16 checkpoint or an MLX affine one`,
      )
    }
    const index = await readJson(join(dir, 'model.safetensors.index.json'))
    let files: string[]
    if (index) {
      files = [...new Set(Object.values((index.weight_map ?? {}) as Record<string, string>))].sort()
    } else {
      files = (await readdir(dir)).filter(f => f.endsWith('.safetensors')).sort()
    }
    if (files.length === 0) throw new SplashError('invalid_checkpoint', 'invalid_request', `${dir}: no *.safetensors files`)
    const readers: SafetensorsReader[] = []
    try {
      for (const f of files) readers.push(await SafetensorsReader.open(join(dir, f)))
    } catch (err) {
      await Promise.all(readers.map(r => r.close()))
      throw err
    }
    return new Checkpoint(dir, config, readers)
  }

  /** Reads another JSON file of the checkpoint folder (generation_config.json, tokenizer_config.json…). */
  json(file: string): Promise<RawConfig | undefined> {
    return readJson(join(this.dir, file))
  }

  names(): string[] {
    return [...this.where.keys()]
  }

  has(name: string): boolean {
    return this.where.has(name)
  }

  /** The stored tensor behind a name: the name itself, else `name.weight`. */
  tensorOf(base: string): string | undefined {
    const name = this.where.has(base) ? base : this.where.has(`${base}.weight`) ? `${base}.weight` : undefined
    if (name) for (const n of [name, `${base}.scales`, `${base}.biases`]) if (this.where.has(n)) this.touched.add(n)
    return name
  }

  /** Tensors no plan uses, counted by their first two name components (model.visual, mtp.layers…). */
  unused(): Map<string, number> {
    const out = new Map<string, number>()
    for (const n of this.where.keys()) {
      if (this.touched.has(n)) continue
      const key = n.split('.').slice(0, 2).join('.')
      out.set(key, (out.get(key) ?? 0) + 1)
    }
    return out
  }

  info(name: string): TensorInfo {
    this.touched.add(name)
    const r = this.where.get(name)
    if (!r) throw new SplashError('tensor_not_found', 'invalid_request', `${this.dir}: checkpoint has no tensor ${name}`)
    return r.info(name)
  }

  private must(base: string): string {
    const t = this.tensorOf(base)
    if (!t) throw new SplashError('tensor_not_found', 'invalid_request', `${this.dir}: checkpoint has no tensor ${base}(.weight)`)
    return t
  }

  /** MLX quantization of a linear (present iff `base.scales` exists). */
  quantOf(base: string): QuantInfo | undefined {
    if (!this.has(`${base}.scales`)) return undefined
    const q = (this.config.quantization ?? this.config.quantization_config ?? {}) as Record<string, unknown>
    const mod = base.replace(/\.weight$/, '')
    const override = (q[mod] ?? {}) as {group_size?: number}
    const groupSize = Number(override.group_size ?? q.group_size ?? 64)
    const w = this.info(`${base}.weight`).shape
    const s = this.info(`${base}.scales`).shape
    const bits = (32 * w[w.length - 1]) / (groupSize * s[s.length - 1])
    return {bits, groupSize}
  }

  /** The logical (dequantized) shape. */
  shape(base: string): number[] {
    const t = this.must(base)
    const shape = [...this.info(t).shape]
    const q = this.quantOf(base)
    if (q) shape[shape.length - 1] = (shape[shape.length - 1] * 32) / q.bits
    return shape
  }

  /** Rows and columns of the tensor seen as 2-D ([prod(leading dims), last dim]). */
  dims(base: string): [number, number] {
    const shape = this.shape(base)
    const cols = shape.length === 0 ? 1 : shape[shape.length - 1]
    return [shape.slice(0, -1).reduce((a, b) => a * b, 1), cols]
  }

  async readF32(base: string): Promise<Float32Array> {
    const [rows] = this.dims(base)
    return this.readRowsF32(base, 0, rows)
  }

  /** Rows [r0, r1) of the 2-D view, as float32 (dequantized when the checkpoint stores it quantized). */
  async readRowsF32(base: string, r0: number, r1: number): Promise<Float32Array> {
    const t = this.must(base)
    const reader = this.where.get(t)!
    const q = this.quantOf(base)
    if (!q) {
      const info = reader.info(t)
      return toFloat32(await reader.readRows2d(t, r0, r1), info.dtype)
    }
    const [, cols] = this.dims(base)
    const packed = await reader.readRows2d(t, r0, r1)
    const words = new Uint32Array(packed.buffer.slice(packed.byteOffset, packed.byteOffset + packed.byteLength))
    const sr = this.where.get(`${base}.scales`)!
    const br = this.where.get(`${base}.biases`)!
    const scales = toFloat32(await sr.readRows2d(`${base}.scales`, r0, r1), sr.info(`${base}.scales`).dtype)
    const biases = toFloat32(await br.readRows2d(`${base}.biases`, r0, r1), br.info(`${base}.biases`).dtype)
    const {bits, groupSize} = q
    const perWord = 32 / bits
    const mask = 2 ** bits - 1
    const groups = cols / groupSize
    const out = new Float32Array((r1 - r0) * cols)
    for (let i = 0; i < out.length; i++) {
      const v = (words[Math.floor(i / perWord)] >>> (bits * (i % perWord))) & mask
      const g = Math.floor(i / cols) * groups + Math.floor((i % cols) / groupSize)
      out[i] = scales[g] * v + biases[g]
    }
    return out
  }

  /** Raw stored bytes of rows [r0, r1) of a stored tensor (for pass-through copies). */
  async readRawRows(name: string, r0: number, r1: number): Promise<Buffer> {
    return this.where.get(name)!.readRows2d(name, r0, r1)
  }

  async close(): Promise<void> {
    await Promise.all(this.readers.map(r => r.close()))
  }
}
