// The four scenarios of the product table, run against any Driver: decode on a short coding prompt, prefill of a long
// prompt, cached TTFT on a replay of that conversation plus one new message (and the same replay uncached), and
// aggregate decode at several concurrent short prompts.
import {randomBytes} from 'node:crypto'
import type {ChatResult, Driver, Message} from './driver.js'
import {ASSISTANT_REPLY, FOLLOW_UP, SHORT_PROMPTS, longCode, longPrompt} from './prompts.js'
import {stats, type Log, type Stats} from './common.js'

export interface ScenarioSettings {
  runs: number
  maxTokens: number
  prefillTokens: number
  concurrency: number[]
  /** Output limit of the prefill and replay requests (only the prompt phase is measured there). */
  prefillMaxTokens: number
}

export interface ScenarioResults {
  engine: string
  contextLength: number
  decode: {runs: ChatResult[]; tokensPerSecond: Stats}
  prefill: {targetTokens: number; promptTokens: number; runs: ChatResult[]; tokensPerSecond: Stats; ttftMs: Stats}
  cachedTtft: {replayTokens: number; cached: ChatResult[]; uncached: ChatResult[]; cachedMs: Stats; uncachedMs: Stats; cachedTokens: Stats; speedup: number}
  concurrency: {clients: number; runs: {results: ChatResult[]; wallMs: number; tokens: number; aggregateTps: number}[]; aggregateTps: Stats; perStreamTps: Stats}[]
}

const short = (i: number): Message[] => [{role: 'user', content: SHORT_PROMPTS[i % SHORT_PROMPTS.length]}]

/** A long user message of about `target` tokens (measured with the driver's own count). */
export async function sizeLongPrompt(d: Driver, target: number, nonce: string): Promise<{code: string; tokens: number}> {
  let chars = target * 3
  let code = longCode(chars)
  let tokens = await d.countTokens([{role: 'user', content: longPrompt(nonce, code)}])
  for (let k = 0; k < 4 && Math.abs(tokens - target) > Math.max(8, target * 0.01); k++) {
    chars = Math.max(64, Math.floor((chars * target) / Math.max(1, tokens)))
    code = longCode(chars)
    tokens = await d.countTokens([{role: 'user', content: longPrompt(nonce, code)}])
  }
  while (tokens > target && chars > 64) {
    chars = Math.floor(chars * 0.97)
    code = longCode(chars)
    tokens = await d.countTokens([{role: 'user', content: longPrompt(nonce, code)}])
  }
  return {code, tokens}
}

function nonce(): string {
  return randomBytes(4).toString('hex')
}

export async function runScenarios(d: Driver, s: ScenarioSettings, log: Log, code?: string): Promise<ScenarioResults & {code: string}> {
  const tag = `[${d.label}]`
  // Warm-up: one short request (first-use costs stay out of the figures).
  await d.chat(short(0), Math.min(4, s.maxTokens))

  const decodeRuns: ChatResult[] = []
  for (let r = 0; r < s.runs; r++) {
    const res = await d.chat(short(r), s.maxTokens)
    decodeRuns.push(res)
    log(`${tag} decode ${r + 1}/${s.runs}: ${res.completionTokens} tokens, ${res.decodeTps.toFixed(2)} tok/s`)
  }

  // Long prompt, sized once; every run gets a fresh nonce so nothing is cached across runs.
  const room = d.contextLength > 0 ? d.contextLength - s.maxTokens - 256 : s.prefillTokens
  const target = Math.max(64, Math.min(s.prefillTokens, room))
  if (target < s.prefillTokens) log(`${tag} prefill capped at ${target} tokens by the served context (${d.contextLength})`)
  if (code === undefined) code = (await sizeLongPrompt(d, target, nonce())).code
  const prefillRuns: ChatResult[] = []
  const cached: ChatResult[] = []
  const uncached: ChatResult[] = []
  let replayTokens = 0
  let promptTokens = 0
  for (let r = 0; r < s.runs; r++) {
    const first: Message[] = [{role: 'user', content: longPrompt(nonce(), code)}]
    const p = await d.chat(first, s.prefillMaxTokens)
    prefillRuns.push(p)
    promptTokens = p.promptTokens
    log(`${tag} prefill ${r + 1}/${s.runs}: ${p.promptTokens} tokens, TTFT ${(p.ttftMs / 1000).toFixed(2)} s`)
    const replay: Message[] = [...first, {role: 'assistant', content: ASSISTANT_REPLY}, {role: 'user', content: FOLLOW_UP}]
    const c = await d.chat(replay, s.prefillMaxTokens)
    cached.push(c)
    replayTokens = c.promptTokens
    const fresh: Message[] = [{role: 'user', content: longPrompt(nonce(), code)}, ...replay.slice(1)]
    const u = await d.chat(fresh, s.prefillMaxTokens)
    uncached.push(u)
    prefillRuns.push(u)
    log(`${tag} replay ${r + 1}/${s.runs}: cached TTFT ${(c.ttftMs / 1000).toFixed(3)} s (${c.cachedTokens} cached tokens), uncached ${(u.ttftMs / 1000).toFixed(2)} s`)
  }
  const prefillTps = stats(prefillRuns.map(p => ((p.promptTokens - p.cachedTokens) / p.promptMs) * 1000))
  const cachedMs = stats(cached.map(c => c.ttftMs))
  const uncachedMs = stats(uncached.map(c => c.ttftMs))

  const conc: ScenarioResults['concurrency'] = []
  for (const k of s.concurrency) {
    const runs: ScenarioResults['concurrency'][number]['runs'] = []
    for (let r = 0; r < s.runs; r++) {
      const t0 = performance.now()
      const results = await Promise.all(Array.from({length: k}, (_, i) => d.chat(short(i + r), s.maxTokens)))
      const wallMs = performance.now() - t0
      const tokens = results.reduce((a, x) => a + x.completionTokens, 0)
      // Aggregate decode: every token generated after the first of each stream, over the window from the first
      // stream's first token to the last stream's last token.
      const from = Math.min(...results.map(x => x.firstAt))
      const to = Math.max(...results.map(x => x.lastAt))
      const decoded = results.reduce((a, x) => a + Math.max(0, x.completionTokens - 1), 0)
      const aggregateTps = to > from ? (decoded / (to - from)) * 1000 : NaN
      runs.push({results, wallMs, tokens, aggregateTps})
      log(`${tag} ${k} concurrent ${r + 1}/${s.runs}: ${tokens} tokens, ${aggregateTps.toFixed(2)} tok/s aggregate`)
    }
    conc.push({clients: k, runs, aggregateTps: stats(runs.map(x => x.aggregateTps)), perStreamTps: stats(runs.flatMap(x => x.results.map(y => y.decodeTps)))})
  }

  return {
    engine: d.label,
    contextLength: d.contextLength,
    code,
    decode: {runs: decodeRuns, tokensPerSecond: stats(decodeRuns.map(x => x.decodeTps))},
    prefill: {targetTokens: target, promptTokens, runs: prefillRuns, tokensPerSecond: prefillTps, ttftMs: stats(prefillRuns.map(p => p.ttftMs))},
    cachedTtft: {
      replayTokens,
      cached,
      uncached,
      cachedMs,
      uncachedMs,
      cachedTokens: stats(cached.map(c => c.cachedTokens)),
      speedup: uncachedMs.median / cachedMs.median,
    },
    concurrency: conc,
  }
}
