// Sampling parameters, checked once at admission, and what a step asks the native sampler for. The same
// rules apply to every API: plugins translate their fields into SamplingParams and nothing else. The token
// choice itself runs in the native core (core-native/sampler/), inside the step.
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
  /** Added to the named tokens' logits before anything else (OpenAI's logit_bias); absent: none. */
  logitBias?: LogitBias
}

/** Token ids (unique) and the bias each one's logit gets (plugins/shared/logit-bias.ts reads the wire form). */
export interface LogitBias {
  ids: Int32Array
  values: Float32Array
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

/**
 * Checked SamplingParams: the request's fields, then the package's defaults for those it leaves unset (its
 * splash.json `sampling`, see samplingDefaultsOf), then the APIs' own defaults (temperature 1, filters off).
 */
export function samplingParams(p: Partial<SamplingParams>, defaults: Partial<SamplingParams> = {}): SamplingParams {
  const s = {...GREEDY, temperature: 1, ...defaults, ...stripUndefined(p)}
  check(s.temperature >= 0 && s.temperature <= 2, 'temperature must be between 0 and 2', 'temperature')
  check(s.topP > 0 && s.topP <= 1, 'top_p must be in (0, 1]', 'top_p')
  check(Number.isInteger(s.topK) && s.topK >= 0, 'top_k must be a non-negative integer', 'top_k')
  check(s.minP >= 0 && s.minP <= 1, 'min_p must be between 0 and 1', 'min_p')
  check(s.presencePenalty >= -2 && s.presencePenalty <= 2, 'presence_penalty must be between -2 and 2', 'presence_penalty')
  check(s.frequencyPenalty >= -2 && s.frequencyPenalty <= 2, 'frequency_penalty must be between -2 and 2', 'frequency_penalty')
  check(s.repetitionPenalty > 0 && s.repetitionPenalty <= 10, 'repetition_penalty must be in (0, 10]', 'repetition_penalty')
  // a top_k past any vocabulary keeps every token, as 0 does (the native core counts in 32 bits)
  if (s.topK > 2 ** 31 - 1) s.topK = 0
  return s
}

/** A package's splash.json `sampling` (wire names) as SamplingParams fields. */
export function samplingDefaultsOf(m: {temperature?: number; top_p?: number; top_k?: number; min_p?: number; repetition_penalty?: number} | undefined): Partial<SamplingParams> {
  if (!m) return {}
  return stripUndefined({temperature: m.temperature, topP: m.top_p, topK: m.top_k, minP: m.min_p, repetitionPenalty: m.repetition_penalty})
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

/**
 * What a step item asks the native sampler for (src/native/native.ts, core-native/sampler/sampler.h has the
 * order of operations): its trailing `rows.length` rows are sampled (or scored) inside the step and come back
 * as SampledTokens instead of logits rows.
 */
export interface SampleRequest {
  /** The request's parameters (the seed is not used here: the engine's RNG gives each row its uniform). */
  params: SamplingParams
  /** One entry per sampled row: the item's last rows.length rows, in order. */
  rows: SampleRow[]
  /** undefined: no log-probabilities; N ≥ 0: the chosen token's and the top N (unmodified distribution). */
  logprobs?: number
  /** Tokens the penalties look at (see PenaltyCounts); absent: no penalties apply. */
  penalties?: {ids: Int32Array; counts: Int32Array}
}

export interface SampleRow {
  /** The uniform in [0, 1) the inverse-CDF draw uses; required at temperature > 0. */
  uniform?: number
  /**
   * Grammar mask (constrained decoding), XGrammar's bitmask layout: ceil(vocab/32) little-endian 32-bit words;
   * token `id` is allowed when bit (id & 31) of word (id >> 5) is set. Without `retry`, disallowed tokens are
   * set to −inf before anything else chooses (argmax included). A mask that allows no token is an
   * invalid_argument error. For a verify pass, one mask per sampled row.
   */
  allowed?: Int32Array
  /**
   * With `allowed` at temperature > 0: the grammar applies after the filters (llama.cpp's order). `uniform`
   * draws from the filtered distribution F of the unmasked row; an allowed token stands, otherwise this uniform
   * draws from F restricted to the allowed tokens (renormalised), or, when F gives them no mass, from the filters
   * applied to the masked row. Ignored without `allowed` or at T = 0 (there the argmax, if allowed, is the masked
   * argmax anyway).
   */
  retry?: number
  /** Do not sample: report this token (its logprob and the top list), e.g. prompt logprobs. */
  token?: number
  /**
   * Speculative sampling (T > 0, a verify pass): the drafted token this row verifies by the rejection rule, against
   * the distribution the sequence's last draft pass sampled it from (kept natively): accepted when
   * accept · q(draft) < p(draft), else `uniform` draws from the residual max(0, p − q).
   */
  draft?: number
  /** The uniform in [0, 1) of the acceptance test (with `draft`). */
  accept?: number
}

/** True when the parameters carry repetition / presence / frequency penalties (the sequence then counts tokens). */
export function penalized(p: SamplingParams): boolean {
  return p.presencePenalty !== 0 || p.frequencyPenalty !== 0 || p.repetitionPenalty !== 1
}
