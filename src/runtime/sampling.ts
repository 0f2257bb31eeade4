// Sampling parameters and the token choice from one row of logits. The same rules apply to every API:
// plugins translate their fields into SamplingParams and nothing else.
import {Rng} from './rng.js'
import {errors} from '../errors.js'

export interface SamplingParams {
  temperature: number // 0 = greedy
  topP: number // 1 = off
  topK: number // 0 = off
  minP: number // 0 = off
  presencePenalty: number
  frequencyPenalty: number
  repetitionPenalty: number // 1 = off
  seed?: number
}

export const GREEDY: SamplingParams = {
  temperature: 0,
  topP: 1,
  topK: 0,
  minP: 0,
  presencePenalty: 0,
  frequencyPenalty: 0,
  repetitionPenalty: 1,
}

export function samplingParams(p: Partial<SamplingParams>): SamplingParams {
  const s = {...GREEDY, temperature: 1, ...stripUndefined(p)}
  check(s.temperature >= 0 && s.temperature <= 2, 'temperature must be between 0 and 2', 'temperature')
  check(s.topP > 0 && s.topP <= 1, 'top_p must be in (0, 1]', 'top_p')
  check(Number.isInteger(s.topK) && s.topK >= 0, 'top_k must be a non-negative integer', 'top_k')
  check(s.minP >= 0 && s.minP <= 1, 'min_p must be between 0 and 1', 'min_p')
  check(s.presencePenalty >= -2 && s.presencePenalty <= 2, 'presence_penalty must be between -2 and 2', 'presence_penalty')
  check(s.frequencyPenalty >= -2 && s.frequencyPenalty <= 2, 'frequency_penalty must be between -2 and 2', 'frequency_penalty')
  check(s.repetitionPenalty > 0 && s.repetitionPenalty <= 10, 'repetition_penalty must be in (0, 10]', 'repetition_penalty')
  return s
}

function stripUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>
}

function check(ok: boolean, message: string, param: string): void {
  if (!ok) throw errors.invalidRequest(message, param)
}

export interface TopLogprob {
  token: number
  logprob: number
}

export interface SampledToken {
  token: number
  /** Log-probability of the chosen token under the unmodified model distribution (when asked for). */
  logprob?: number
  top?: TopLogprob[]
}

/** Log-softmax of one logits row, in float64 for stable sums. */
export function logSoftmax(logits: Float32Array): Float64Array {
  let max = -Infinity
  for (let i = 0; i < logits.length; i++) if (logits[i] > max) max = logits[i]
  let sum = 0
  for (let i = 0; i < logits.length; i++) sum += Math.exp(logits[i] - max)
  const lse = max + Math.log(sum)
  const out = new Float64Array(logits.length)
  for (let i = 0; i < logits.length; i++) out[i] = logits[i] - lse
  return out
}

export function topLogprobs(logprobs: Float64Array, n: number): TopLogprob[] {
  if (n <= 0) return []
  const top: TopLogprob[] = []
  for (let i = 0; i < logprobs.length; i++) {
    const lp = logprobs[i]
    if (top.length < n) {
      top.push({token: i, logprob: lp})
      top.sort((a, b) => b.logprob - a.logprob)
    } else if (lp > top[n - 1].logprob) {
      top[n - 1] = {token: i, logprob: lp}
      top.sort((a, b) => b.logprob - a.logprob)
    }
  }
  return top
}

/**
 * Logits with every token the grammar disallows set to −∞. `allowed` holds ceil(vocab/32) words; bit
 * (id & 31) of word (id >> 5) set = allowed (XGrammar's bitmask layout). This is the TypeScript sampling
 * path's only grammar hook: once the native sampler takes `allowed` per row, callers pass the mask there
 * instead of calling this.
 */
export function maskLogits(logits: Float32Array, allowed: Int32Array | undefined): Float32Array {
  if (!allowed) return logits
  const n = logits.length
  const out = new Float32Array(n).fill(-Infinity)
  for (let w = 0; w < allowed.length; w++) {
    const bits = allowed[w]!
    if (bits === 0) continue
    const base = w << 5
    for (let j = 0; j < 32 && base + j < n; j++) if ((bits >>> j) & 1) out[base + j] = logits[base + j]!
  }
  return out
}

export function argmax(logits: Float32Array): number {
  let best = 0
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i
  return best
}

/**
 * Chooses the next token. `history` holds the tokens the penalties look at (prompt and output for the
 * repetition penalty, output only for presence/frequency, as OpenAI and vLLM do).
 */
export function sampleToken(
  logits: Float32Array,
  params: SamplingParams,
  rng: Rng,
  output: readonly number[],
  prompt: ArrayLike<number>,
  /** undefined: no log-probabilities; N ≥ 0: the chosen token's and the top N. */
  nTop?: number,
): SampledToken {
  const adjusted = applyPenalties(logits, params, output, prompt)
  const token = params.temperature === 0 ? argmax(adjusted) : sampleFiltered(adjusted, params, rng)
  if (nTop === undefined) return {token}
  const lp = logSoftmax(logits)
  return {token, logprob: lp[token], top: topLogprobs(lp, nTop)}
}

function applyPenalties(logits: Float32Array, p: SamplingParams, output: readonly number[], prompt: ArrayLike<number>): Float32Array {
  if (p.presencePenalty === 0 && p.frequencyPenalty === 0 && p.repetitionPenalty === 1) return logits
  const out = new Float32Array(logits)
  const counts = new Map<number, number>()
  for (const t of output) counts.set(t, (counts.get(t) ?? 0) + 1)
  if (p.repetitionPenalty !== 1) {
    const seen = new Set<number>(output)
    for (let i = 0; i < prompt.length; i++) seen.add(prompt[i])
    for (const t of seen) {
      if (t < 0 || t >= out.length) continue
      out[t] = out[t] > 0 ? out[t] / p.repetitionPenalty : out[t] * p.repetitionPenalty
    }
  }
  for (const [t, c] of counts) {
    if (t < 0 || t >= out.length) continue
    out[t] -= p.frequencyPenalty * c + p.presencePenalty
  }
  return out
}

function sampleFiltered(logits: Float32Array, p: SamplingParams, rng: Rng): number {
  return sampleWithUniform(logits, p, rng.next())
}

/**
 * The filtered candidates at temperature > 0: token ids sorted by logit (top-k applied), their unnormalised
 * weights exp((logit − max) / T), how many survive min-p and top-p, and the surviving total.
 */
function candidates(logits: Float32Array, p: SamplingParams): {idx: number[]; probs: number[]; n: number; total: number} {
  const k = p.topK > 0 ? Math.min(p.topK, logits.length) : logits.length
  let idx: number[]
  if (k < logits.length) {
    idx = topLogprobs(Float64Array.from(logits), k).map(x => x.token)
  } else {
    idx = Array.from({length: logits.length}, (_, i) => i).sort((a, b) => logits[b] - logits[a])
  }
  const inv = 1 / p.temperature
  const max = logits[idx[0]] * inv
  const probs = idx.map(i => Math.exp(logits[i] * inv - max))
  let total = probs.reduce((a, b) => a + b, 0)
  let n = probs.length
  if (p.minP > 0) {
    const floor = p.minP * (probs[0] / total)
    while (n > 1 && probs[n - 1] / total < floor) n--
  }
  if (p.topP < 1) {
    let cum = 0
    let keep = 0
    for (; keep < n; keep++) {
      cum += probs[keep] / total
      if (cum >= p.topP) {
        keep++
        break
      }
    }
    n = Math.max(1, Math.min(n, keep))
  }
  total = 0
  for (let i = 0; i < n; i++) total += probs[i]
  return {idx, probs, n, total}
}

/**
 * The token sampleToken picks at temperature > 0 (no penalties) when its uniform draw is `u01`: inverse CDF
 * over the filtered candidates sorted by logit. Speculative decoding samples the draft and the target at
 * one position with the same uniform (common random numbers), so the committed tokens are exactly those
 * plain decoding with the same seed would pick.
 */
export function sampleWithUniform(logits: Float32Array, p: SamplingParams, u01: number): number {
  const {idx, probs, n, total} = candidates(logits, p)
  let u = u01 * total
  for (let i = 0; i < n; i++) {
    u -= probs[i]
    if (u <= 0) return idx[i]
  }
  return idx[n - 1]
}

/** A filtered, normalised distribution over candidate tokens (sorted by probability, highest first). */
export interface Dist {
  idx: number[]
  prob: number[]
}

/**
 * The distribution sampleToken draws from at temperature > 0 (temperature, top-k, min-p, top-p; no
 * penalties), normalised. Speculative sampling uses it for the target (p) and the draft (q) alike.
 */
export function filteredDist(logits: Float32Array, p: SamplingParams): Dist {
  const {idx, probs, n, total} = candidates(logits, p)
  return {idx: idx.slice(0, n), prob: probs.slice(0, n).map(x => x / total)}
}

/** Draws one token from a Dist. */
export function sampleDist(d: Dist, rng: Rng): number {
  let u = rng.next()
  for (let i = 0; i < d.idx.length; i++) {
    u -= d.prob[i]
    if (u <= 0) return d.idx[i]
  }
  return d.idx[d.idx.length - 1]
}

/** Probability of `token` under d (0 when filtered out). */
export function distProb(d: Dist, token: number): number {
  const i = d.idx.indexOf(token)
  return i < 0 ? 0 : d.prob[i]
}

/**
 * Speculative sampling (exact): accept draft token d ~ q with probability min(1, p(d)/q(d)); on rejection
 * draw from normalise(max(p − q, 0)). Returns the accepted draft or the replacement, and whether it was accepted.
 */
export function verifyDraft(p: Dist, q: Dist, draft: number, rng: Rng): {token: number; accepted: boolean} {
  const pd = distProb(p, draft)
  const qd = distProb(q, draft)
  if (qd > 0 && rng.next() * qd < pd) return {token: draft, accepted: true}
  const qm = new Map<number, number>()
  for (let i = 0; i < q.idx.length; i++) qm.set(q.idx[i], q.prob[i])
  const res: Dist = {idx: [], prob: []}
  let total = 0
  for (let i = 0; i < p.idx.length; i++) {
    const r = p.prob[i] - (qm.get(p.idx[i]) ?? 0)
    if (r > 0) {
      res.idx.push(p.idx[i])
      res.prob.push(r)
      total += r
    }
  }
  if (total <= 0) return {token: sampleDist(p, rng), accepted: false}
  for (let i = 0; i < res.prob.length; i++) res.prob[i] /= total
  return {token: sampleDist(res, rng), accepted: false}
}

/** True when speculative decoding can serve these parameters exactly (penalties depend on the output so far). */
export function draftCompatible(p: SamplingParams): boolean {
  return p.presencePenalty === 0 && p.frequencyPenalty === 0 && p.repetitionPenalty === 1
}
