// Prompt tokenization with a per-turn cache. Agents resend the whole conversation every turn, so the
// rendered prompt is cut into turns at each `<|im_start|>` and each turn's ids are cached by its text.
// The cut is exact: `<|im_start|>` is an added token (no lstrip), so the tokenizer itself splits the
// text there before anything else, and tokenize(a + b) = tokenize(a) + tokenize(b) at those points.
// A re-sent conversation costs a cache lookup per turn plus tokenizing only the new turns. Large
// uncached text goes to worker threads (piscina) so the event loop stays free.

import {createHash} from 'node:crypto'
import {availableParallelism} from 'node:os'
import {Piscina} from 'piscina'
import type {TokenizeTask} from './tokenize-worker.js'
import type {QwenTokenizer} from './tokenizer.js'

export interface PromptTokensOptions {
  /** The added token turns start with (default `<|im_start|>`). */
  boundary?: string
  /** Cache bound, in characters of the cached turns' text (default 16M; ids cost ~1/4 of that in entries). */
  maxCachedChars?: number
  /** encodeAsync sends uncached text to workers above this many characters (default 32K). */
  workerThreshold?: number
  /** Worker threads (default min(4, cores - 1)); 0 disables workers. */
  workers?: number
}

export interface PromptTokensStats {
  segments: number
  cachedSegments: number
  tokenizedChars: number
}

export class PromptTokenizer {
  private readonly boundary: string | undefined
  /** Content hash of a turn's text → its ids and the text's length (keys are hashes, so no prompt text is retained). */
  private readonly cache = new Map<string, {ids: number[]; chars: number}>()
  private cachedChars = 0
  private readonly maxCachedChars: number
  private readonly workerThreshold: number
  private readonly workers: number
  private pool: Piscina | undefined
  /** What the last encode did (for tests and benchmarks). */
  last: PromptTokensStats = {segments: 0, cachedSegments: 0, tokenizedChars: 0}

  constructor(
    private readonly tokenizer: QwenTokenizer,
    options: PromptTokensOptions = {},
  ) {
    const boundary = options.boundary ?? '<|im_start|>'
    const token = tokenizer.addedToken(boundary)
    // Without an added token that cannot absorb the whitespace before it, cutting would change the ids.
    this.boundary = token && !token.lstrip ? boundary : undefined
    this.maxCachedChars = options.maxCachedChars ?? 16 * 1024 * 1024
    this.workerThreshold = options.workerThreshold ?? 32 * 1024
    this.workers = options.workers ?? Math.max(1, Math.min(4, availableParallelism() - 1))
  }

  /** The prompt cut before every boundary token; the pieces join back to the prompt. */
  segments(prompt: string): string[] {
    if (!this.boundary) return prompt === '' ? [] : [prompt]
    const out: string[] = []
    let start = 0
    for (let at = prompt.indexOf(this.boundary, 1); at > 0; at = prompt.indexOf(this.boundary, at + 1)) {
      out.push(prompt.slice(start, at))
      start = at
    }
    if (start < prompt.length) out.push(prompt.slice(start))
    return out
  }

  /** Token ids of a rendered prompt, on this thread. */
  encode(prompt: string): number[] {
    const segments = this.segments(prompt)
    const found = segments.map(s => this.lookup(s))
    const missing = segments.filter((_, i) => found[i] === undefined)
    const ids = missing.map(s => this.tokenizer.encode(s))
    return this.assemble(segments, found, missing, ids)
  }

  /** Token ids of a rendered prompt; large uncached text is tokenized on worker threads. */
  async encodeAsync(prompt: string): Promise<number[]> {
    const segments = this.segments(prompt)
    const found = segments.map(s => this.lookup(s))
    const missing = segments.filter((_, i) => found[i] === undefined)
    const chars = missing.reduce((n, s) => n + s.length, 0)
    const source = this.tokenizer.source
    let ids: number[][]
    if (chars < this.workerThreshold || this.workers === 0 || !source) ids = missing.map(s => this.tokenizer.encode(s))
    else {
      const pool = this.getPool()
      const groups = balance(missing, this.workers)
      const results = await Promise.all(groups.map(g => pool.run({source, texts: g.texts} satisfies TokenizeTask) as Promise<Int32Array[]>))
      ids = new Array(missing.length)
      groups.forEach((g, k) => g.indices.forEach((i, j) => (ids[i] = Array.from(results[k]![j]!))))
    }
    return this.assemble(segments, found, missing, ids)
  }

  /** Stops the worker threads. */
  async close(): Promise<void> {
    const pool = this.pool
    this.pool = undefined
    await pool?.destroy()
  }

  private assemble(segments: string[], found: (number[] | undefined)[], missing: string[], ids: number[][]): number[] {
    let m = 0
    const parts: number[][] = new Array(segments.length)
    for (let i = 0; i < segments.length; i++) {
      let seg = found[i]
      if (seg === undefined) {
        seg = ids[m]!
        this.store(missing[m]!, seg)
        m++
      }
      parts[i] = seg
    }
    const out = ([] as number[]).concat(...parts) // far faster than pushing id by id
    this.last = {
      segments: segments.length,
      cachedSegments: segments.length - missing.length,
      tokenizedChars: missing.reduce((n, s) => n + s.length, 0),
    }
    return out
  }

  private lookup(segment: string): number[] | undefined {
    const key = contentKey(segment)
    const entry = this.cache.get(key)
    if (entry) {
      this.cache.delete(key) // most recently used goes last
      this.cache.set(key, entry)
    }
    return entry?.ids
  }

  private store(segment: string, ids: number[]): void {
    const key = contentKey(segment)
    if (segment.length > this.maxCachedChars || this.cache.has(key)) return
    this.cache.set(key, {ids, chars: segment.length})
    this.cachedChars += segment.length
    for (const [oldKey, entry] of this.cache) {
      if (this.cachedChars <= this.maxCachedChars) break
      this.cache.delete(oldKey)
      this.cachedChars -= entry.chars
    }
  }

  private getPool(): Piscina {
    // The worker is a .ts file when this module runs from source (tsx, tap), a .js file in dist/.
    const ext = import.meta.url.endsWith('.ts') ? '.ts' : '.js'
    this.pool ??= new Piscina({
      filename: new URL(`./tokenize-worker${ext}`, import.meta.url).href,
      maxThreads: this.workers,
      minThreads: 0,
      idleTimeout: 60_000,
    })
    return this.pool
  }
}

function contentKey(text: string): string {
  return `${createHash('sha1').update(text).digest('base64')}:${text.length}`
}

/** Splits texts into at most `n` groups of similar total length, remembering each text's position. */
function balance(texts: string[], n: number): {texts: string[]; indices: number[]}[] {
  const groups = Array.from({length: Math.min(n, texts.length)}, () => ({texts: [] as string[], indices: [] as number[], chars: 0}))
  const order = texts.map((t, i) => i).sort((a, b) => texts[b]!.length - texts[a]!.length)
  for (const i of order) {
    const g = groups.reduce((a, b) => (b.chars < a.chars ? b : a))
    g.texts.push(texts[i]!)
    g.indices.push(i)
    g.chars += texts[i]!.length
  }
  return groups.filter(g => g.texts.length > 0)
}
