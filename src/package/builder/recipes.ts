// Building blocks for family sanitize files: each returns a TensorPlan whose chunks read the checkpoint lazily, a
// block of rows at a time, so a build never holds more than one block of one tensor.
import {SplashError} from '../../errors.js'
import type {Checkpoint} from './checkpoint.js'
import type {TensorPlan} from './family.js'

/** Rows per block when a big 2-D tensor is copied: about 16M values (64 MiB of float32). */
const BLOCK_VALUES = 16 * 1024 * 1024

function blocks(rows: number, cols: number, read: (r0: number, r1: number) => Promise<Float32Array>) {
  const step = Math.max(1, Math.floor(BLOCK_VALUES / Math.max(1, cols)))
  const chunks = []
  for (let r = 0; r < rows; r += step) {
    const r0 = r
    const r1 = Math.min(rows, r + step)
    chunks.push(() => read(r0, r1))
  }
  return chunks
}

/** A linear copied as is ([out, in] or stacked [E, out, in]); its quantized bytes may pass through. */
export function linear(ck: Checkpoint, src: string, name: string, opts: {q8?: boolean} = {}): TensorPlan {
  const shape = ck.shape(src)
  const [rows, cols] = ck.dims(src)
  return {name, kind: 'linear', shape, source: src, q8: opts.q8, chunks: blocks(rows, cols, (a, b) => ck.readRowsF32(src, a, b))}
}

/** A float32 tensor (conv1d, A_log, dt_bias, plain norms), reshaped to `shape` when given. */
export function f32(ck: Checkpoint, src: string, name: string, shape?: number[]): TensorPlan {
  const s = shape ?? ck.shape(src)
  return {name, kind: 'f32', shape: s, chunks: [() => ck.readF32(src)]}
}

/** A zero-centred RMSNorm weight stored as the multiplier 1 + w (computed in fp32); `preShifted` takes it as is. */
export function norm(ck: Checkpoint, src: string, name: string, zeroCentred: boolean): TensorPlan {
  return {
    name,
    kind: 'f32',
    shape: ck.shape(src),
    chunks: [
      async () => {
        const w = await ck.readF32(src)
        if (zeroCentred) for (let i = 0; i < w.length; i++) w[i] = 1 + w[i]
        return w
      },
    ],
  }
}

/** Experts stored one tensor set per expert (`sources[e]`, each [out, in]), stacked to [E, out, in]. */
export function stacked(ck: Checkpoint, sources: string[], name: string): TensorPlan {
  const [out, inp] = ck.dims(sources[0])
  for (const s of sources) {
    const [o, i] = ck.dims(s)
    if (o !== out || i !== inp) throw new SplashError('invalid_checkpoint', 'invalid_request', `${s}: expert shapes differ`)
  }
  return {name, kind: 'linear', shape: [sources.length, out, inp], chunks: sources.map(s => () => ck.readF32(s))}
}

/** Rows [start, start+len) of every expert of a stacked [E, R, in] tensor (e.g. the gate half of gate_up_proj). */
export function expertSlice(ck: Checkpoint, src: string, name: string, start: number, len: number): TensorPlan {
  const shape = ck.shape(src)
  if (shape.length !== 3 || start + len > shape[1]) {
    throw new SplashError('invalid_checkpoint', 'invalid_request', `${src}: expected [E, rows, in] with ${start + len} rows, got [${shape}]`)
  }
  const [E, R, inp] = shape
  const chunks = []
  for (let e = 0; e < E; e++) chunks.push(() => ck.readRowsF32(src, e * R + start, e * R + start + len))
  return {name, kind: 'linear', shape: [E, len, inp], chunks}
}

/** A linear computed from whole source tensors (de-interleaving, concatenation). */
export function computed(name: string, shape: number[], load: () => Promise<Float32Array>): TensorPlan {
  return {name, kind: 'linear', shape, chunks: [load]}
}

/** Gathers row blocks [start, start+len) of a [rows, cols] matrix into a new matrix, in order. */
export function gatherRows(w: Float32Array, cols: number, ranges: [number, number][]): Float32Array {
  const total = ranges.reduce((n, [, len]) => n + len, 0)
  const out = new Float32Array(total * cols)
  let at = 0
  for (const [start, len] of ranges) {
    out.set(w.subarray(start * cols, (start + len) * cols), at)
    at += len * cols
  }
  return out
}
