// safetensors I/O without loading a file: a reader that parses the header and reads tensors (or byte ranges of
// them) on demand, and a writer that lays the file out from a list of tensor specs, writes the header first and then
// each tensor's bytes at its precomputed offset, one at a time.
//
// Files written here are 64-byte aligned: the data section starts at a multiple of 64 (the JSON header is padded with
// spaces) and every tensor starts at a multiple of 64. Safetensors requires tensors to be contiguous, so the bytes
// between two tensors are declared as a U8 padding tensor named `__pad__<n>`; readers skip those names.
import {open, type FileHandle} from 'node:fs/promises'
import {SplashError} from '../errors.js'

export type DType =
  | 'BOOL' | 'U8' | 'I8' | 'F8_E4M3' | 'F8_E5M2' | 'U16' | 'I16' | 'F16' | 'BF16'
  | 'U32' | 'I32' | 'F32' | 'U64' | 'I64' | 'F64'

export const DTYPE_BYTES: Record<DType, number> = {
  BOOL: 1, U8: 1, I8: 1, F8_E4M3: 1, F8_E5M2: 1, U16: 2, I16: 2, F16: 2, BF16: 2,
  U32: 4, I32: 4, F32: 4, U64: 8, I64: 8, F64: 8,
}

export const ALIGNMENT = 64
export const PAD_PREFIX = '__pad__'

export interface TensorSpec {
  name: string
  dtype: DType
  shape: number[]
}

export interface TensorInfo extends TensorSpec {
  /** Absolute offset of the first byte in the file. */
  offset: number
  /** Size in bytes. */
  size: number
}

export function elementCount(shape: readonly number[]): number {
  return shape.reduce((a, b) => a * b, 1)
}

export function byteSize(spec: {dtype: DType; shape: readonly number[]}): number {
  return elementCount(spec.shape) * DTYPE_BYTES[spec.dtype]
}

const MAX_HEADER = 100 * 1024 * 1024

function badFile(path: string, why: string): SplashError {
  return new SplashError('invalid_safetensors', 'invalid_request', `${path}: not a valid safetensors file (${why})`)
}

export class SafetensorsReader {
  readonly tensors = new Map<string, TensorInfo>()
  metadata: Record<string, string> = {}
  dataOffset = 0

  private constructor(
    readonly path: string,
    private readonly fh: FileHandle,
    readonly fileSize: number,
  ) {}

  static async open(path: string): Promise<SafetensorsReader> {
    const fh = await open(path, 'r')
    try {
      const {size} = await fh.stat()
      const reader = new SafetensorsReader(path, fh, size)
      await reader.parseHeader()
      return reader
    } catch (err) {
      await fh.close()
      throw err
    }
  }

  private async parseHeader(): Promise<void> {
    if (this.fileSize < 8) throw badFile(this.path, 'shorter than 8 bytes')
    const lenBuf = Buffer.alloc(8)
    await this.fh.read(lenBuf, 0, 8, 0)
    const n = Number(lenBuf.readBigUInt64LE(0))
    if (n > MAX_HEADER || 8 + n > this.fileSize) throw badFile(this.path, `header length ${n}`)
    const headerBuf = Buffer.alloc(n)
    await this.fh.read(headerBuf, 0, n, 8)
    let header: Record<string, unknown>
    try {
      header = JSON.parse(headerBuf.toString('utf8'))
    } catch (e) {
      throw badFile(this.path, `its header (the ${n} bytes after the 8-byte length) is not JSON: ${(e as Error).message}`)
    }
    this.dataOffset = 8 + n
    for (const [name, entry] of Object.entries(header)) {
      if (name === '__metadata__') {
        this.metadata = (entry ?? {}) as Record<string, string>
        continue
      }
      if (name.startsWith(PAD_PREFIX)) continue
      const e = entry as {dtype: DType; shape: number[]; data_offsets: [number, number]}
      if (!(e.dtype in DTYPE_BYTES)) throw badFile(this.path, `tensor ${name} has unknown dtype ${e.dtype}`)
      const [begin, end] = e.data_offsets
      const size = end - begin
      if (size !== byteSize(e) || this.dataOffset + end > this.fileSize) {
        throw badFile(this.path, `tensor ${name} has offsets [${begin}, ${end}] that do not match its shape or the file`)
      }
      this.tensors.set(name, {name, dtype: e.dtype, shape: e.shape, offset: this.dataOffset + begin, size})
    }
  }

  names(): string[] {
    return [...this.tensors.keys()]
  }

  has(name: string): boolean {
    return this.tensors.has(name)
  }

  info(name: string): TensorInfo {
    const t = this.tensors.get(name)
    if (!t) throw new SplashError('tensor_not_found', 'not_found', `${this.path}: no tensor named ${name}`)
    return t
  }

  /** The tensor's raw bytes (little-endian, row-major). */
  async read(name: string): Promise<Buffer> {
    const t = this.info(name)
    return this.readRange(name, 0, t.size)
  }

  /** Bytes [start, end) of a tensor's data. */
  async readRange(name: string, start: number, end: number): Promise<Buffer> {
    const t = this.info(name)
    if (start < 0 || end > t.size || end < start) {
      throw new SplashError('invalid_range', 'invalid_request', `${name}: byte range [${start}, ${end}) outside 0..${t.size}`)
    }
    const buf = Buffer.allocUnsafe(end - start)
    let done = 0
    while (done < buf.length) {
      const {bytesRead} = await this.fh.read(buf, done, buf.length - done, t.offset + start + done)
      if (bytesRead === 0) throw badFile(this.path, `truncated inside ${name}`)
      done += bytesRead
    }
    return buf
  }

  /** Rows [r0, r1) along the first dimension. */
  async readRows(name: string, r0: number, r1: number): Promise<Buffer> {
    const t = this.info(name)
    const rowBytes = t.shape.length === 0 ? t.size : t.size / t.shape[0]
    return this.readRange(name, r0 * rowBytes, r1 * rowBytes)
  }

  /** Rows [r0, r1) of the tensor seen as 2-D: [product of the leading dims, last dim]. */
  async readRows2d(name: string, r0: number, r1: number): Promise<Buffer> {
    const t = this.info(name)
    const last = t.shape.length === 0 ? 1 : t.shape[t.shape.length - 1]
    const rowBytes = last * DTYPE_BYTES[t.dtype]
    return this.readRange(name, r0 * rowBytes, r1 * rowBytes)
  }

  /** The tensor converted to float32 (BF16, F16, F32, F64 and integer types). */
  async readFloat32(name: string): Promise<Float32Array> {
    const t = this.info(name)
    return toFloat32(await this.read(name), t.dtype)
  }

  async close(): Promise<void> {
    await this.fh.close()
  }
}

/** Converts raw little-endian bytes of one dtype to float32. */
export function toFloat32(bytes: Uint8Array, dtype: DType): Float32Array {
  const n = bytes.byteLength / DTYPE_BYTES[dtype]
  const aligned = bytes.byteOffset % 8 === 0 ? bytes : new Uint8Array(bytes)
  const ab = aligned.buffer
  const off = aligned.byteOffset
  switch (dtype) {
    case 'F32':
      return new Float32Array(ab.slice(off, off + n * 4))
    case 'BF16': {
      const src = new Uint16Array(ab, off, n)
      const out = new Uint16Array(2 * n) // little-endian: a bf16 is the high half of its float32
      for (let i = 0; i < n; i++) out[2 * i + 1] = src[i]
      return new Float32Array(out.buffer)
    }
    case 'F16': {
      const src = new Uint16Array(ab, off, n)
      const out = new Float32Array(n)
      for (let i = 0; i < n; i++) out[i] = f16ToF32(src[i])
      return out
    }
    case 'F64':
      return Float32Array.from(new Float64Array(ab, off, n))
    case 'U8': return Float32Array.from(new Uint8Array(ab, off, n))
    case 'I8': return Float32Array.from(new Int8Array(ab, off, n))
    case 'U16': return Float32Array.from(new Uint16Array(ab, off, n))
    case 'I16': return Float32Array.from(new Int16Array(ab, off, n))
    case 'U32': return Float32Array.from(new Uint32Array(ab, off, n))
    case 'I32': return Float32Array.from(new Int32Array(ab, off, n))
    case 'I64': return Float32Array.from(new BigInt64Array(ab, off, n), Number)
    case 'U64': return Float32Array.from(new BigUint64Array(ab, off, n), Number)
    default:
      throw new SplashError('unsupported_dtype', 'invalid_request', `cannot convert ${dtype} to float32`)
  }
}

export function f16ToF32(h: number): number {
  const s = h & 0x8000 ? -1 : 1
  const e = (h >> 10) & 0x1f
  const m = h & 0x3ff
  if (e === 0) return s * m * 2 ** -24
  if (e === 31) return m ? NaN : s * Infinity
  return s * (1 + m / 1024) * 2 ** (e - 15)
}

export interface Layout {
  header: Buffer
  /** Absolute file offset of each tensor. */
  offsets: Map<string, TensorInfo>
  fileSize: number
}

const align = (n: number) => Math.ceil(n / ALIGNMENT) * ALIGNMENT

/** Computes the aligned layout of a file holding these tensors, in this order. */
export function layout(specs: readonly TensorSpec[], metadata?: Record<string, string>): Layout {
  const entries: Record<string, unknown> = {}
  if (metadata && Object.keys(metadata).length > 0) entries.__metadata__ = metadata
  const rel: {spec: TensorSpec; begin: number; size: number}[] = []
  let pos = 0
  let pads = 0
  const seen = new Set<string>()
  for (const spec of specs) {
    if (seen.has(spec.name)) throw new SplashError('duplicate_tensor', 'invalid_request', `tensor ${spec.name} is declared twice`)
    seen.add(spec.name)
    const start = align(pos)
    if (start > pos) {
      entries[`${PAD_PREFIX}${pads++}`] = {dtype: 'U8', shape: [start - pos], data_offsets: [pos, start]}
    }
    const size = byteSize(spec)
    entries[spec.name] = {dtype: spec.dtype, shape: spec.shape, data_offsets: [start, start + size]}
    rel.push({spec, begin: start, size})
    pos = start + size
  }
  let json = Buffer.from(JSON.stringify(entries), 'utf8')
  const headerLen = align(8 + json.length) - 8
  const header = Buffer.alloc(8 + headerLen, 0x20)
  header.writeBigUInt64LE(BigInt(headerLen), 0)
  json.copy(header, 8)
  json = header
  const dataOffset = 8 + headerLen
  const offsets = new Map<string, TensorInfo>()
  for (const r of rel) offsets.set(r.spec.name, {...r.spec, offset: dataOffset + r.begin, size: r.size})
  return {header, offsets, fileSize: dataOffset + pos}
}

/**
 * Writes a safetensors file whose tensors are declared up front. Each tensor is then written whole with `write`, or
 * in consecutive parts with `writePart`, in any order; `close` checks that every byte was written.
 */
export class SafetensorsWriter {
  private readonly written = new Map<string, number>()

  private constructor(
    readonly path: string,
    private readonly fh: FileHandle,
    readonly plan: Layout,
  ) {}

  static async create(path: string, specs: readonly TensorSpec[], metadata?: Record<string, string>): Promise<SafetensorsWriter> {
    const plan = layout(specs, metadata)
    const fh = await open(path, 'w')
    await writeAll(fh, plan.header, 0)
    await fh.truncate(plan.fileSize) // padding between tensors reads as zeros
    return new SafetensorsWriter(path, fh, plan)
  }

  info(name: string): TensorInfo {
    const t = this.plan.offsets.get(name)
    if (!t) throw new SplashError('tensor_not_declared', 'internal', `${this.path}: tensor ${name} was not declared`)
    return t
  }

  async write(name: string, data: ArrayBufferView): Promise<void> {
    const t = this.info(name)
    if (data.byteLength !== t.size) {
      throw new SplashError(
        'tensor_size_mismatch', 'internal',
        `${this.path}: tensor ${name} ${t.dtype}${JSON.stringify(t.shape)} needs ${t.size} bytes, got ${data.byteLength}`,
      )
    }
    await this.writePart(name, 0, data)
  }

  /** Writes bytes at `offset` within the tensor's data. */
  async writePart(name: string, offset: number, data: ArrayBufferView): Promise<void> {
    const t = this.info(name)
    if (offset < 0 || offset + data.byteLength > t.size) {
      throw new SplashError('tensor_size_mismatch', 'internal', `${this.path}: write past the end of ${name}`)
    }
    await writeAll(this.fh, new Uint8Array(data.buffer, data.byteOffset, data.byteLength), t.offset + offset)
    this.written.set(name, (this.written.get(name) ?? 0) + data.byteLength)
  }

  async close(): Promise<void> {
    try {
      for (const t of this.plan.offsets.values()) {
        if ((this.written.get(t.name) ?? 0) !== t.size) {
          throw new SplashError('tensor_not_written', 'internal', `${this.path}: tensor ${t.name} was not written completely`)
        }
      }
    } finally {
      await this.fh.close()
    }
  }

  /** Closes the file without checks (after an error). */
  async abort(): Promise<void> {
    await this.fh.close().catch(() => undefined)
  }
}

async function writeAll(fh: FileHandle, data: Uint8Array, position: number): Promise<void> {
  let done = 0
  while (done < data.byteLength) {
    const {bytesWritten} = await fh.write(data, done, data.byteLength - done, position + done)
    done += bytesWritten
  }
}

/** Writes a whole set of in-memory tensors (small files: tests, drafts of tiny models). */
export async function writeSafetensors(
  path: string,
  tensors: readonly (TensorSpec & {data: ArrayBufferView})[],
  metadata?: Record<string, string>,
): Promise<void> {
  const w = await SafetensorsWriter.create(path, tensors, metadata)
  try {
    for (const t of tensors) await w.write(t.name, t.data)
  } catch (err) {
    await w.abort()
    throw err
  }
  await w.close()
}
