// Affine quantization in MLX's layout (group size 64 along the input dimension, values packed little-end first into
// uint32 words, bf16 scales and biases) and bf16 conversion.
//
// A group's scale and bias follow MLX: scale = (max − min) / (2^bits − 1), bias = min, both rounded to bf16 before
// the values are quantized against them (so the stored scale and bias are the ones the values were fitted to).
// Dequantization is value = scale · q + bias, whatever edge choice the quantizer made.

export type Bits = 4 | 8
export const GROUP_SIZE = 64

const f32 = new Float32Array(1)
const u32 = new Uint32Array(f32.buffer)

/** One float to bf16 bits, rounding to nearest even; NaN stays a (quiet) NaN. */
export function bf16Bits(x: number): number {
  f32[0] = x
  const u = u32[0]
  if ((u & 0x7fffffff) > 0x7f800000) return ((u >>> 16) | 0x40) & 0xffff
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff
}

export function bf16Value(bits: number): number {
  u32[0] = bits << 16
  return f32[0]
}

/** Float32 values to bf16 bits (round to nearest even). */
export function toBf16(values: Float32Array): Uint16Array {
  const src = new Uint32Array(values.buffer, values.byteOffset, values.length)
  const out = new Uint16Array(values.length)
  for (let i = 0; i < src.length; i++) {
    const u = src[i]
    out[i] = (u & 0x7fffffff) > 0x7f800000 ? (u >>> 16) | 0x40 : (u + 0x7fff + ((u >>> 16) & 1)) >>> 16
  }
  return out
}

export function fromBf16(bits: Uint16Array): Float32Array {
  const out = new Uint32Array(bits.length)
  for (let i = 0; i < bits.length; i++) out[i] = bits[i] << 16
  return new Float32Array(out.buffer)
}

export interface Quantized {
  /** [rows, cols·bits/32] */
  weight: Uint32Array
  /** bf16 bits, [rows, cols/64] */
  scales: Uint16Array
  biases: Uint16Array
}

export function canQuantize(cols: number): boolean {
  return cols % GROUP_SIZE === 0
}

/** bf16 (16) → [weight]; q4/q8 → [weight, scales, biases]. */
export type Target = Bits | 16

/** A block in its stored parts: bf16 bits, or the q4/q8 weight, scales and biases. */
export function quantizeParts(data: Float32Array, rows: number, cols: number, bits: Target): (Uint32Array | Uint16Array)[] {
  if (bits === 16) return [toBf16(data)]
  const q = quantize(data, rows, cols, bits)
  return [q.weight, q.scales, q.biases]
}

/** Quantizes a row-major [rows, cols] matrix (cols a multiple of 64). Leading dims fold into rows. */
export function quantize(w: Float32Array, rows: number, cols: number, bits: Bits): Quantized {
  if (cols % GROUP_SIZE !== 0) throw new Error(`cannot quantize ${cols} columns in groups of ${GROUP_SIZE}`)
  const perWord = 32 / bits
  const levels = (1 << bits) - 1
  const groups = cols / GROUP_SIZE
  const weight = new Uint32Array((rows * cols) / perWord)
  const scales = new Uint16Array(rows * groups)
  const biases = new Uint16Array(rows * groups)
  let word = 0
  for (let g = 0; g < rows * groups; g++) {
    const base = g * GROUP_SIZE
    let lo = Infinity
    let hi = -Infinity
    for (let i = 0; i < GROUP_SIZE; i++) {
      const v = w[base + i]
      if (v < lo) lo = v
      if (v > hi) hi = v
    }
    const sBits = bf16Bits((hi - lo) / levels)
    const bBits = bf16Bits(lo)
    scales[g] = sBits
    biases[g] = bBits
    const s = bf16Value(sBits)
    const b = bf16Value(bBits)
    const inv = s === 0 ? 0 : 1 / s
    for (let i = 0; i < GROUP_SIZE; i += perWord) {
      let packed = 0
      for (let j = 0; j < perWord; j++) {
        let q = ((w[base + i + j] - b) * inv + 0.5) | 0 // round half up; negatives clamp to 0 below
        if (q < 0) q = 0
        else if (q > levels) q = levels
        packed |= q << (bits * j)
      }
      weight[word++] = packed >>> 0
    }
  }
  return {weight, scales, biases}
}

/** The float values of a quantized [rows, cols] matrix. */
export function dequantize(q: Quantized, rows: number, cols: number, bits: Bits): Float32Array {
  const perWord = 32 / bits
  const mask = (1 << bits) - 1
  const groups = cols / GROUP_SIZE
  const out = new Float32Array(rows * cols)
  const s = fromBf16(q.scales)
  const b = fromBf16(q.biases)
  for (let g = 0; g < rows * groups; g++) {
    const base = g * GROUP_SIZE
    for (let i = 0; i < GROUP_SIZE; i += perWord) {
      const word = q.weight[(base + i) / perWord]
      for (let j = 0; j < perWord; j++) out[base + i + j] = s[g] * ((word >>> (bits * j)) & mask) + b[g]
    }
  }
  return out
}

/** Largest dequantization error the format allows for a group with this scale: half a step (plus bf16 rounding). */
export function maxError(scale: number): number {
  return Math.abs(scale) * 0.5 + 1e-6
}

/** bits of a quantized linear from its packed and scales column counts: 32·cols(weight) / (64·cols(scales)). */
export function bitsOf(weightCols: number, scalesCols: number, groupSize = GROUP_SIZE): number {
  return (32 * weightCols) / (groupSize * scalesCols)
}
