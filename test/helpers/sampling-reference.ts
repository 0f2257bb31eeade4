// A straightforward reference for the native sampler (core-native/sampler/sampler.h states the rules): sort
// the whole vocabulary, filter, draw. Slow on purpose; tests hold the native sampler to it.
import type {SamplingParams, SampleRequest, SampleRow, SampledToken} from '../../src/engine/sampling.js'

/** Penalties (in float32, as the native core computes them) and the grammar mask. */
export function adjusted(logits: Float32Array, req: SampleRequest, row: SampleRow): Float32Array {
  const p = req.params
  const v = Float32Array.from(logits)
  const pen = req.penalties
  if (pen && (p.presencePenalty !== 0 || p.frequencyPenalty !== 0 || p.repetitionPenalty !== 1)) {
    const f = Math.fround
    for (let i = 0; i < pen.ids.length; i++) {
      const id = pen.ids[i]
      let x = v[id]
      if (p.repetitionPenalty !== 1) x = x > 0 ? f(x / f(p.repetitionPenalty)) : f(x * f(p.repetitionPenalty))
      if (pen.counts[i] > 0) x = f(x - f(f(f(p.frequencyPenalty) * pen.counts[i]) + f(p.presencePenalty)))
      v[id] = x
    }
  }
  if (row.allowed) for (let id = 0; id < v.length; id++) if (!maskAllows(row.allowed, id)) v[id] = -Infinity
  return v
}

/** The kept candidates in order (logit descending, id ascending) with their weights exp((v − max) / T). */
export function filtered(v: Float32Array, p: SamplingParams): {idx: number[]; w: number[]} {
  let idx = Array.from(v.keys()).filter(i => v[i] > -Infinity)
  idx.sort((a, b) => (v[b] - v[a]) || a - b)
  if (p.topK > 0) idx = idx.slice(0, p.topK)
  const m = v[idx[0]]
  let w = idx.map(i => Math.exp((v[i] - m) / p.temperature))
  if (p.minP > 0) {
    const n = w.findIndex(x => x < p.minP)
    if (n >= 0) (idx = idx.slice(0, n)), (w = w.slice(0, n))
  }
  if (p.topP < 1) {
    const total = w.reduce((a, b) => a + b, 0)
    let cum = 0
    let n = 0
    while (n < w.length) {
      cum += w[n++]
      if (cum >= p.topP * total) break
    }
    idx = idx.slice(0, n)
    w = w.slice(0, n)
  }
  return {idx, w}
}

/** The normalised distribution a row is drawn from at temperature > 0. */
export function distribution(logits: Float32Array, req: SampleRequest, row: SampleRow = {}): Map<number, number> {
  const {idx, w} = filtered(adjusted(logits, req, row), req.params)
  const total = w.reduce((a, b) => a + b, 0)
  return new Map(idx.map((id, i) => [id, w[i] / total]))
}

/** Token `id` is allowed by a grammar mask (bit id & 31 of word id >> 5). */
export function maskAllows(mask: Int32Array, id: number): boolean {
  return ((mask[id >> 5]! >>> (id & 31)) & 1) === 1
}

/**
 * How a row whose grammar applies after the filters (SampleRow.retry) chooses: 'first' when the draw from the
 * filtered distribution F is allowed, 'restricted' when `retry` draws from F over the allowed tokens (inverse CDF
 * in id order), 'masked' when F gives them no mass and the filters apply to the masked row.
 */
export function drawThenMask(logits: Float32Array, req: SampleRequest, row: SampleRow & {allowed: Int32Array; retry: number}): {token: number; path: 'first' | 'restricted' | 'masked'} {
  const first = sampleRow(logits, req, {uniform: row.uniform}).token
  if (maskAllows(row.allowed, first)) return {token: first, path: 'first'}
  const kept = [...distribution(logits, req)].filter(([id, p]) => p > 0 && maskAllows(row.allowed, id)).sort((a, b) => a[0] - b[0])
  if (kept.length === 0) return {token: sampleRow(logits, req, {uniform: row.retry, allowed: row.allowed}).token, path: 'masked'}
  const target = row.retry * kept.reduce((a, x) => a + x[1], 0)
  let acc = 0
  return {token: (kept.find(x => (acc += x[1]) > target) ?? kept[kept.length - 1])[0], path: 'restricted'}
}

export function sampleRow(logits: Float32Array, req: SampleRequest, row: SampleRow): SampledToken {
  let token = row.token ?? -1
  if (token < 0 && row.allowed && row.retry !== undefined && req.params.temperature > 0) {
    token = drawThenMask(logits, req, {...row, allowed: row.allowed, retry: row.retry}).token
  }
  if (token < 0) {
    const v = adjusted(logits, req, row)
    if (req.params.temperature === 0) {
      token = 0
      for (let i = 1; i < v.length; i++) if (v[i] > v[token]) token = i
    } else {
      const {idx, w} = filtered(v, req.params)
      let x = (row.uniform ?? 0) * w.reduce((a, b) => a + b, 0)
      token = idx[idx.length - 1]
      for (let i = 0; i < idx.length; i++) {
        x -= w[i]
        if (x <= 0) {
          token = idx[i]
          break
        }
      }
    }
  }
  if (req.logprobs === undefined) return {token}
  let m = -Infinity
  for (const x of logits) m = Math.max(m, x)
  let sum = 0
  for (const x of logits) sum += Math.exp(x - m)
  const lse = m + Math.log(sum)
  const order = Array.from(logits.keys()).sort((a, b) => (logits[b] - logits[a]) || a - b)
  const top = order.slice(0, req.logprobs).map(id => ({token: id, logprob: logits[id] - lse}))
  return {token, logprob: logits[token] - lse, top}
}
