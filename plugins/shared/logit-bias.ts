// OpenAI's logit_bias (Chat Completions and Completions): a token id as a decimal string → a bias in [-100, 100],
// read into the core's LogitBias. Whether each id is in the vocabulary is checked at admission (the scheduler
// knows the model).
import {errors} from '../../src/errors.js'
import type {LogitBias} from '../../src/engine/sampling.js'

/** The most tokens one request's logit_bias may name. */
export const MAX_LOGIT_BIAS = 4096

/** The request's logit_bias, or undefined for none (absent, null or empty). */
export function logitBias(raw: Record<string, unknown> | null | undefined, param = 'logit_bias'): LogitBias | undefined {
  if (raw == null) return undefined
  const entries = Object.entries(raw)
  if (entries.length === 0) return undefined
  const check = (ok: boolean, message: string) => {
    if (!ok) throw errors.invalidRequest(message, param)
  }
  check(entries.length <= MAX_LOGIT_BIAS, `${param} may name at most ${MAX_LOGIT_BIAS} tokens`)
  const ids = new Int32Array(entries.length)
  const values = new Float32Array(entries.length)
  entries.forEach(([key, value], i) => {
    check(/^(0|[1-9][0-9]{0,9})$/.test(key) && Number(key) <= 0x7fffffff, `${param} keys must be token ids (decimal integers); got ${JSON.stringify(key)}`)
    check(typeof value === 'number' && Number.isFinite(value) && value >= -100 && value <= 100, `${param}[${key}] must be a number between -100 and 100`)
    ids[i] = Number(key)
    values[i] = value as number
  })
  return {ids, values}
}
