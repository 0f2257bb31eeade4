// One walk of the closing path (closing.ts) on the grammar matcher, from where it stands to where a stop token is
// allowed: a fixed text of the grammar it takes whole (closing-hints.ts), else the preferred character (inside a JSON
// string its quote first, stringChar), else any token the grammar allows. Where the preferred character leaves the
// state as it was again and again (a free part of the grammar, such as a Lark rule's `/.+/` before its line break,
// which the walk's order never reaches), the walk gives up: it says 'stuck' rather than go round until its limit.
// States are told apart by their masks.
import type {ClosingHints} from './closing-hints.js'

/** A grammar matcher as the closer walks it (GrammarMatcherState). */
export interface ClosableMatcher {
  nextMask(): Promise<Int32Array>
  accept(token: number): boolean
  rollBack(n: number): void
  readonly stopTokenIds: readonly number[]
}

/** The vocabulary facts the closer needs: single-character tokens, most preferred first. */
export interface ClosingVocab {
  /** [character, token id] for the printable ASCII characters, the space and the line break, tab and carriage return, in the order the closer tries them. */
  chars: Array<[string, number]>
  /** The same inside a JSON string (the closing quote first, characters that need no escape next). */
  inString: Array<[string, number]>
  /** A token's bytes, one character per byte (what the walk reads quotes and backslashes from). */
  bytes(id: number): string
}

/** Whether JSON text that starts at a value ends inside a string, and right after a backslash there. */
export function jsonStringState(text: string): {inString: boolean; escaped: boolean} {
  let inString = false
  let escaped = false
  for (const ch of text) {
    if (escaped) escaped = false
    else if (inString && ch === '\\') escaped = true
    else if (ch === '"') inString = !inString
  }
  return {inString, escaped}
}

/** Whether `mask` allows `token` (matcher.ts has the same; this file imports nothing of it). */
export function allows(mask: Int32Array, token: number): boolean {
  return (mask[token >> 5]! & (1 << (token & 31))) !== 0
}

export interface Walked {
  ids: number[]
  text: string
  /** Every token came from characters or fixed texts (so `text` can be encoded again). */
  packable: boolean
  end: 'done' | 'long' | 'stuck'
}

/**
 * The preferred character left the mask as it was this many times in a row: a free part it will not leave, where a
 * line break (inside a JSON string its escape) would leave it, such as a grammar's line of free text; a string of a
 * minimum length (raw or JSON) repeats its mask too, until that length, and is walked on.
 */
const LOOPS = 8

/** The walk from the matcher's state (left where it was); `limit`: about the tokens it may take. */
export function walkOut(m: ClosableMatcher, vocab: ClosingVocab, hints: ClosingHints, tokensOf: (text: string) => number[] | undefined, limit: number, before: string): Promise<Walked> {
  // a few characters more than the limit: the tokenizer usually packs them into fewer tokens
  return walk(m, vocab, hints, tokensOf, before, limit * 4 + 8)
}

/** A fixed text's tokens (the tokenizer's, else one per character), or undefined where a character has no token. */
export function literalTokens(vocab: ClosingVocab, encode?: (text: string) => number[]): (text: string) => number[] | undefined {
  const byChar = new Map(vocab.chars)
  const memo = new Map<string, number[] | undefined>()
  return text => {
    if (!memo.has(text)) {
      const ids = encode ? encode(text) : [...text].map(c => byChar.get(c))
      memo.set(text, ids.length > 0 && ids.every(id => id !== undefined) ? (ids as number[]) : undefined)
    }
    return memo.get(text)
  }
}

/** The text after the last fixed text of the grammar in `before` (where a JSON string's state can be read from). */
function sinceLiteral(before: string, hints: ClosingHints): string {
  let at = 0
  for (const lit of [...hints.closers, ...hints.openers]) at = Math.max(at, before.lastIndexOf(lit))
  return before.slice(at)
}

/** The walk itself, `most` steps at most (a character, a token or a fixed text each). */
async function walk(m: ClosableMatcher, vocab: ClosingVocab, hints: ClosingHints, tokensOf: (text: string) => number[] | undefined, before: string, most: number): Promise<Walked> {
  const ids: number[] = []
  let text = ''
  let packable = true
  let end: Walked['end'] = 'long'
  // the last mask's key, how many steps in a row it came back, and the masks a line break does not leave (walked on)
  let key = -1
  let loops = 0
  const plain = new Set<number>()
  // `before`: the output so far, whose end may be inside a string
  let {inString, escaped} = jsonStringState(sinceLiteral(before, hints))
  // the characters this string took from the closer, and when (a pattern or format may need new ones to end)
  const used = new Map<string, number>()
  const take = (chars: string) => {
    for (const ch of chars) {
      if (escaped) escaped = false
      else if (inString && ch === '\\') escaped = true
      else if (ch === '"') inString = !inString
    }
  }
  try {
    for (let steps = 0; steps <= most && ids.length <= most; steps++) {
      const mask = await m.nextMask()
      if (m.stopTokenIds.some(t => allows(mask, t))) {
        end = 'done'
        break
      }
      const str = inString && !escaped
      const last = key
      key = maskKey(mask)
      loops = key === last ? loops + 1 : 0
      if (loops >= LOOPS && !plain.has(key)) {
        if (await breakLeaves(m, vocab, key, str)) {
          end = 'stuck'
          break
        }
        plain.add(key)
      }
      const closer = literal(m, mask, hints.closers, tokensOf)
      const next = closer ? undefined : str ? await stringChar(m, vocab, mask, used) : vocab.chars.find(([, id]) => allows(mask, id))
      const lit = closer ?? (next && !str ? literal(m, mask, hints.openers.filter(o => o[0] === next[0]), tokensOf) : undefined)
      if (lit) {
        ids.push(...lit.ids)
        text += lit.text
        // a fixed text is the grammar's own structure: a string's state starts again from it
        ;({inString, escaped} = jsonStringState(lit.text))
        used.clear()
        continue
      }
      if (next) {
        if (!m.accept(next[1])) {
          end = 'stuck'
          break
        }
        ids.push(next[1])
        text += next[0]
        take(next[0])
        if (inString) used.set(next[0], steps)
        else used.clear()
        continue
      }
      // no character fits: the first other token the grammar allows
      const id = firstAllowed(mask, m.stopTokenIds)
      if (id < 0 || !m.accept(id)) {
        end = 'stuck'
        break
      }
      ids.push(id)
      text += vocab.bytes(id)
      take(vocab.bytes(id))
      packable = false
    }
  } finally {
    m.rollBack(ids.length)
  }
  return {ids, text, packable, end}
}

/** A hash of a mask (FNV-1a over its words): whether a step left the walk's state as it was. */
function maskKey(mask: Int32Array): number {
  let h = 0x811c9dc5
  for (let i = 0; i < mask.length; i++) h = Math.imul(h ^ mask[i]!, 0x01000193)
  return h >>> 0
}

/**
 * Whether a line break (inside a JSON string the escape `\\n`) takes the matcher from the mask `key` to another one
 * (the matcher is left where it was).
 */
async function breakLeaves(m: ClosableMatcher, vocab: ClosingVocab, key: number, inString: boolean): Promise<boolean> {
  const ids = (inString ? ['\\', 'n'] : ['\n']).map(c => vocab.chars.find(([ch]) => ch === c)?.[1])
  let n = 0
  try {
    for (const id of ids) {
      if (id === undefined || !m.accept(id)) return false
      n++
    }
    return maskKey(await m.nextMask()) !== key
  } catch {
    return false
  } finally {
    m.rollBack(n)
  }
}

/** The first of these fixed texts that the matcher takes whole from here (taken), if any. */
function literal(m: ClosableMatcher, mask: Int32Array, literals: readonly string[], tokensOf: (text: string) => number[] | undefined): {text: string; ids: number[]} | undefined {
  for (const text of literals) {
    const ids = tokensOf(text)
    if (!ids || !allows(mask, ids[0]!)) continue
    let n = 0
    while (n < ids.length && m.accept(ids[n]!)) n++
    if (n === ids.length) return {text, ids}
    m.rollBack(n)
  }
  return undefined
}

/** The lowest token id `mask` allows that is not a stop token, or -1. */
function firstAllowed(mask: Int32Array, stops: readonly number[]): number {
  for (let i = 0; i < mask.length; i++) {
    let w = mask[i]!
    while (w !== 0) {
      const bit = 31 - Math.clz32(w & -w)
      const id = (i << 5) | bit
      if (!stops.includes(id)) return id
      w &= w - 1
    }
  }
  return -1
}

/** Characters a string's grammar is tried with, one step ahead, when it does not take the closing quote yet. */
const LOOKAHEAD = 12

/**
 * The next character inside a string: its closing quote where the grammar takes it; else one after which it does
 * (a format or pattern one character short of its end), among the first LOOKAHEAD the closer would try; else the
 * first the string has not taken yet, else the one it took longest ago (a pattern such as `[A-Z]{3}-[0-9]+` or an
 * email address needs several kinds, in turn).
 */
async function stringChar(m: ClosableMatcher, vocab: ClosingVocab, mask: Int32Array, used: Map<string, number>): Promise<[string, number] | undefined> {
  const allowed = vocab.inString.filter(([, id]) => allows(mask, id))
  if (allowed.length === 0) return undefined
  if (allowed[0]![0] === '"') return allowed[0]
  const quote = vocab.inString[0]![0] === '"' ? vocab.inString[0]![1] : -1
  const fresh = [...allowed].sort((a, b) => (used.get(a[0]) ?? -1) - (used.get(b[0]) ?? -1))
  if (quote >= 0) {
    for (const cand of fresh.slice(0, LOOKAHEAD)) {
      if (!m.accept(cand[1])) continue
      const after = await m.nextMask()
      m.rollBack(1)
      if (allows(after, quote)) return cand
    }
  }
  return fresh[0]
}

