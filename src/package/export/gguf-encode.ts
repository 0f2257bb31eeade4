// The per-block arithmetic of a GGUF export (export-gguf.ts): Splash's affine q4/q8 blocks back to float32, ggml's
// Q8_0 / Q4_0 encodings and IEEE halves, and one chunk of rows from the package's bytes to the GGUF's. Pure functions
// with no I/O, so that worker threads (worker-pool.ts) can run the chunks of a large export on every core.
import {dequantize, type Bits, type Quantized} from '../builder/quantize.js'

export enum GgmlType {F32 = 0, F16 = 1, Q4_0 = 2, Q8_0 = 8}

export const BLOCK = 32

const f32buf = new Float32Array(1)
const u32buf = new Uint32Array(f32buf.buffer)

/** float → IEEE half bits, round to nearest even. */
export function f16Bits(x: number): number {
  f32buf[0] = x
  const f = u32buf[0]
  const sign = (f >>> 16) & 0x8000
  let exp = ((f >>> 23) & 0xff) - 127 + 15
  let mant = f & 0x7fffff
  if (((f >>> 23) & 0xff) === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0)
  if (exp >= 0x1f) return sign | 0x7c00
  if (exp <= 0) {
    if (exp < -10) return sign
    mant |= 0x800000
    const shift = 14 - exp
    let h = mant >>> shift
    const rem = mant & ((1 << shift) - 1)
    const half = 1 << (shift - 1)
    if (rem > half || (rem === half && (h & 1))) h++
    return sign | h
  }
  let h = (exp << 10) | (mant >>> 13)
  const rem = mant & 0x1fff
  if (rem > 0x1000 || (rem === 0x1000 && (h & 1))) h++
  return sign | h
}

export function f16Value(h: number): number {
  const s = h & 0x8000 ? -1 : 1
  const e = (h >>> 10) & 0x1f
  const m = h & 0x3ff
  if (e === 0) return s * m * 2 ** -24
  if (e === 0x1f) return m ? NaN : s * Infinity
  return s * (1 + m / 1024) * 2 ** (e - 15)
}

/** Q8_0: per 32 values, f16 d = amax/127 and int8 round(x/d). */
export function quantizeQ8_0(x: Float32Array): Buffer {
  const nb = x.length / BLOCK
  const out = Buffer.alloc(nb * 34)
  for (let b = 0; b < nb; b++) {
    const o = b * 34
    let amax = 0
    for (let j = 0; j < BLOCK; j++) amax = Math.max(amax, Math.abs(x[b * BLOCK + j]))
    const d = amax / 127
    const id = d ? 1 / d : 0
    out.writeUInt16LE(f16Bits(d), o)
    for (let j = 0; j < BLOCK; j++) out.writeInt8(Math.round(x[b * BLOCK + j] * id), o + 2 + j)
  }
  return out
}

/** Q4_0: per 32 values, d = (value of largest magnitude)/−8, q = min(15, trunc(x/d + 8.5)); low nibbles hold 0..15. */
export function quantizeQ4_0(x: Float32Array): Buffer {
  const nb = x.length / BLOCK
  const out = Buffer.alloc(nb * 18)
  for (let b = 0; b < nb; b++) {
    const o = b * 18
    const base = b * BLOCK
    let amax = 0
    let max = 0
    for (let j = 0; j < BLOCK; j++) {
      const v = x[base + j]
      if (Math.abs(v) > amax) {
        amax = Math.abs(v)
        max = v
      }
    }
    const d = max / -8
    const id = d ? 1 / d : 0
    out.writeUInt16LE(f16Bits(d), o)
    for (let j = 0; j < 16; j++) {
      const a = Math.min(15, Math.trunc(x[base + j] * id + 8.5))
      const c = Math.min(15, Math.trunc(x[base + j + 16] * id + 8.5))
      out[o + 2 + j] = a | (c << 4)
    }
  }
  return out
}

export function dequantizeQ8_0(buf: Uint8Array, n: number): Float32Array {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength)
  const out = new Float32Array(n)
  for (let k = 0; k < n / BLOCK; k++) {
    const d = f16Value(b.readUInt16LE(k * 34))
    for (let j = 0; j < BLOCK; j++) out[k * BLOCK + j] = d * b.readInt8(k * 34 + 2 + j)
  }
  return out
}

export function dequantizeQ4_0(buf: Uint8Array, n: number): Float32Array {
  const b = Buffer.from(buf.buffer, buf.byteOffset, buf.byteLength)
  const out = new Float32Array(n)
  for (let k = 0; k < n / BLOCK; k++) {
    const d = f16Value(b.readUInt16LE(k * 18))
    for (let j = 0; j < 16; j++) {
      const q = b[k * 18 + 2 + j]
      out[k * BLOCK + j] = ((q & 15) - 8) * d
      out[k * BLOCK + j + 16] = ((q >> 4) - 8) * d
    }
  }
  return out
}

export function encodeTensor(x: Float32Array, type: GgmlType): Buffer {
  if (type === GgmlType.F32) return Buffer.from(x.buffer, x.byteOffset, x.byteLength)
  if (type === GgmlType.Q8_0) return quantizeQ8_0(x)
  if (type === GgmlType.Q4_0) return quantizeQ4_0(x)
  throw new Error(`cannot encode ggml type ${type}`)
}


/** Rows of a Splash affine-quantised matrix as stored: weight words, bf16 scales and biases per group of 64. */
export interface AffineBlock extends Quantized {
  rows: number
  cols: number
  bits: Bits
}

export const dequantAffine = (a: AffineBlock): Float32Array => dequantize(a, a.rows, a.cols, a.bits)

/** Rows [from + i] ← rows [from + order[i]], the rows before `from` kept, in either form. */
export function permuteRows<T extends Float32Array | AffineBlock>(x: T, rows: number, from: number, order: Int32Array): T {
  const move = <A extends Float32Array | Uint32Array | Uint16Array>(a: A): A => {
    const w = a.length / rows
    const out = a.slice() as A
    for (let r = 0; r < order.length; r++) out.set(a.subarray((from + order[r]) * w, (from + order[r] + 1) * w), (from + r) * w)
    return out
  }
  if (x instanceof Float32Array) return move(x) as T
  const a = x as AffineBlock
  return {...a, weight: move(a.weight), scales: move(a.scales), biases: move(a.biases)} as T
}

/** Rows of one tensor on their way into a GGUF: the values, what to apply to them, and the encoding. */
export interface ChunkJob {
  values: Float32Array | AffineBlock
  cols: number
  type: GgmlType
  /** Store −exp(x) (A_log → ssm_a). */
  negExp?: boolean
  /** Column order within each row, new → old (the GDN out_proj's V heads). */
  colOrder?: Int32Array
}

export function encodeChunk(job: ChunkJob): Uint8Array {
  let x = job.values instanceof Float32Array ? job.values : dequantAffine(job.values)
  if (job.negExp) x = x.map(v => -Math.exp(v))
  if (job.colOrder) {
    const {cols, colOrder} = job
    const y = new Float32Array(x.length)
    for (let r = 0; r < x.length / cols; r++) for (let j = 0; j < cols; j++) y[r * cols + j] = x[r * cols + colOrder[j]]
    x = y
  }
  const enc = encodeTensor(x, job.type)
  // a view of x's own buffer for F32: copy when x is the caller's array, so the result owns its bytes
  return job.type === GgmlType.F32 && x === job.values ? new Uint8Array(enc) : enc
}
