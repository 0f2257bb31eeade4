// One sequence's position in its grammar: accepts the tokens the sequence commits, rolls back with it,
// and gives the mask of tokens allowed next (ceil(vocab/32) words, bit (id & 31) of word (id >> 5) set =
// allowed; the layout the sampler takes). The mask is computed once per position and kept until the
// next accept or rollback, so the engine can compute it while a step runs. Tokens that would make the output
// invalid UTF-8 are refused and masked out as well (utf8-guard.ts).
import type {GrammarMatcher} from '@mlc-ai/web-xgrammar'
import type {Utf8Guard} from './utf8-guard.js'
import {closingPath, viaStarts, type ClosingHints, type ClosingPath, type ClosingVocab} from './closing.js'
import {SplashError, errors} from '../errors.js'

export class GrammarMatcherState {
  private mask: Int32Array | undefined
  private pending: Promise<Int32Array> | undefined
  private disposed = false
  /** The UTF-8 automaton's state after each accepted token (the last is the current one). */
  private readonly utf8: number[] = [0]
  /** A stop token was the last token accepted (the matcher has terminated). */
  private ended = false

  constructor(
    private readonly matcher: GrammarMatcher,
    readonly stopTokenIds: readonly number[],
    private readonly guard: Utf8Guard,
    private readonly closer?: ClosingVocab,
    private readonly hints?: ClosingHints,
  ) {}

  /**
   * The tokens of the shortest way to a complete output from here (closing.ts: 'long' when none is found within
   * about `limit` tokens); the state is left where it was. `encode` packs the characters into fewer tokens; `before` is
   * the text taken so far; a path of at most `within` tokens is good enough (the grammar's alternatives are compared
   * only when the first path found is longer).
   */
  async closingPath(limit: number, encode?: (text: string) => number[], before = '', within?: number): Promise<ClosingPath> {
    if (!this.closer || this.disposed || this.ended) return 'stuck'
    if (this.pending) await this.pending.catch(() => undefined)
    return closingPath(this, this.closer, limit, encode, before, this.hints, within)
  }

  /**
   * From the start, the length of the shortest complete output through each of the grammar's top-level alternatives
   * (each tool's call of a forced call: closing-hints.ts) where it has several ('long' counts as `limit`; one the walk
   * cannot close is left out); the longest is how far one token can move the closing path where the grammar may
   * start over (a second call after the first).
   */
  async alternativeLengths(limit: number, encode?: (text: string) => number[]): Promise<number[]> {
    if (!this.closer || !this.hints || this.disposed || this.ended) return []
    if (this.pending) await this.pending.catch(() => undefined)
    const paths = await viaStarts(this, this.closer, limit, encode, '', this.hints)
    return paths.flatMap(p => (p === 'stuck' ? [] : [p === 'long' ? limit : p.length]))
  }

  /** The mask for the next token if it was computed since the last accept / rollback. */
  get ready(): Int32Array | undefined {
    return this.mask
  }

  /** Computes (once) the mask for the next token. */
  nextMask(): Promise<Int32Array> {
    if (this.mask) return Promise.resolve(this.mask)
    if (this.pending) return this.pending
    // xgrammar aborts its wasm instance (every later grammar with it) when asked past a stop token or after
    // release; these are engine bugs, so they fail the one request instead
    if (this.disposed) return Promise.reject(new Error('the grammar matcher was asked for a mask after it was released'))
    if (this.ended) return Promise.reject(new Error('the grammar matcher was asked for a mask after its stop token'))
    const state = this.utf8.at(-1)!
    const p = this.matcher.getNextTokenBitmask().then(raw => {
      const m = this.guard.restrict(raw, state)
      if (!m.some(w => w !== 0)) throw noValue()
      if (this.pending === p) {
        this.mask = m
        this.pending = undefined
      }
      return m
    })
    this.pending = p
    return p
  }

  /** Advances by one token; false when the grammar does not allow it (the state is unchanged then). */
  accept(token: number): boolean {
    if (this.disposed || this.ended) return false
    const next = this.guard.next(this.utf8.at(-1)!, token)
    if (next < 0 || !this.matcher.acceptToken(token)) return false
    this.utf8.push(next)
    // the grammar takes a stop token only where it ends, and the matcher then terminates (kept here: asking the
    // wasm costs ~1 µs a call, twice a token)
    this.ended = this.stopTokenIds.includes(token)
    this.invalidate()
    return true
  }

  /** Undoes the last `n` accepted tokens. */
  rollBack(n: number): void {
    if (n <= 0 || this.disposed) return
    this.matcher.rollBack(n)
    this.utf8.length = Math.max(1, this.utf8.length - n)
    this.ended = false
    this.invalidate()
  }

  /** True once the grammar is complete and a stop token was accepted. */
  get terminated(): boolean {
    return !this.disposed && this.ended
  }

  dispose(): void {
    if (this.disposed) return
    this.disposed = true
    this.matcher.dispose()
  }

  private invalidate(): void {
    this.mask = undefined
    this.pending = undefined
  }
}

/**
 * A grammar that allows no token where its output is not complete: its schema admits no finite value (a $ref cycle
 * with no way out, say `{"$ref": "#"}`), which only shows once the grammar is walked.
 */
function noValue(): SplashError {
  return errors.invalidRequest(
    'The JSON Schema the output must follow admits no finite value (a $ref that only leads back to itself, or constraints no value meets); give every recursive $ref a way out',
    undefined,
    'unsupported_schema',
  )
}

/** True when `token` is allowed by `mask`. */
export function allows(mask: Int32Array, token: number): boolean {
  return (mask[token >> 5]! & (1 << (token & 31))) !== 0
}

/**
 * The one token `mask` allows, or -1 when it allows none or several (stops at the second set bit, so a mask
 * that allows many tokens costs a few words).
 */
export function soleAllowed(mask: Int32Array): number {
  let at = -1
  for (let i = 0; i < mask.length; i++) {
    const w = mask[i]!
    if (w === 0) continue
    if (at >= 0 || (w & (w - 1)) !== 0) return -1
    at = (i << 5) | (31 - Math.clz32(w))
  }
  return at
}
