// The shortest way the grammar lets an output end from where it stands: what budget-aware structured output forces
// once the tokens left in max_tokens come down to it (budget-close.ts), and what a request's max_tokens is checked
// against before any work (the shortest instance of its schema, the shortest forced tool call). The path is found
// greedily on the matcher: a fixed text of the grammar that it takes whole where there is one (closing-hints.ts: a
// tag's end first), else one ASCII character at a time: inside a JSON string its closing quote first, outside one
// the closers `}` `]` first, then the cheapest value `0`, the line break last; a token of any other kind only where
// no character fits (a special token, a non-ASCII character). Where the grammar's alternatives (the tools of a
// forced call) are all still open, each is walked and the shortest kept. The characters are then re-encoded by the
// tokenizer into fewer tokens when the grammar takes that encoding too.
import {byteLevelBytes, byteLevelTokenBytes} from '../package/byte-level.js'
import {NO_HINTS, type ClosingHints} from './closing-hints.js'
import {allows, literalTokens, walkOut, type ClosableMatcher, type ClosingVocab, type Walked} from './closing-walk.js'

export {jsonStringState, type ClosableMatcher, type ClosingVocab} from './closing-walk.js'
export type {ClosingHints}

// closers first, then the shortest values and the separators; letters and digits next; the space and the line break
// last (the grammar's separators and tool-call forms need them, but free whitespace would never end)
const ORDER = '}]"0:,' + 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ123456789' + '.-+_e{[\\/@#$%&*()=<>?!;\'`^|~' + ' \n\t\r'
/** How tokenizer.json's byte-level alphabet spells the whitespace characters. */
const BYTE_LEVEL: Record<string, string> = {'Ġ': ' ', 'Ċ': '\n', 'ĉ': '\t', 'č': '\r'}

/** The closer's vocabulary from the byte-level token strings. */
export function closingVocab(vocab: readonly string[]): ClosingVocab {
  const ids = new Map<string, number>()
  vocab.forEach((s, id) => {
    const ch = BYTE_LEVEL[s] ?? s
    if (ch.length === 1 && ORDER.includes(ch) && !ids.has(ch)) ids.set(ch, id)
  })
  const chars = [...ORDER].filter(c => ids.has(c)).map((c): [string, number] => [c, ids.get(c)!])
  const quote = chars.filter(([c]) => c === '"')
  const alphabet = byteLevelBytes()
  return {
    chars,
    inString: [...quote, ...chars.filter(([c]) => c !== '"' && c !== '\\'), ...chars.filter(([c]) => c === '\\')],
    bytes: id => String.fromCharCode(...byteLevelTokenBytes(vocab[id] ?? '', alphabet)),
  }
}

export type ClosingPath = number[] | 'long' | 'stuck'

/**
 * The tokens that take the matcher from its state to a complete output (one where a stop token is allowed);
 * 'long' when the walk finds none within about `limit` tokens, 'stuck' when the grammar allows nothing but what it
 * cannot end with. The matcher is left where it was. `encode` (the tokenizer) turns the characters into fewer
 * tokens; `before` is the text the matcher took so far; `hints` the grammar's own shape (closing-hints.ts); a path of
 * at most `within` tokens is taken as it is found, without comparing the grammar's alternatives.
 */
export async function closingPath(
  m: ClosableMatcher,
  vocab: ClosingVocab,
  limit: number,
  encode?: (text: string) => number[],
  before = '',
  hints: ClosingHints = NO_HINTS,
  within = Infinity,
): Promise<ClosingPath> {
  const tokensOf = literalTokens(vocab, encode)
  const first = await packed(m, await walkOut(m, vocab, hints, tokensOf, limit, before), encode)
  if (typeof first !== 'string' && first.length <= within) return first
  // the output has not chosen among the grammar's alternatives yet: the shortest close among them
  let best = first
  for (const path of await viaStarts(m, vocab, limit, encode, before, hints, tokensOf)) {
    if (typeof path !== 'string' && (typeof best === 'string' || path.length < best.length)) best = path
  }
  return best
}

/**
 * The closing path through each of the grammar's top-level alternatives (closing-hints.ts: one tool's call each) that
 * `before` has not ruled out yet, in the order of the hints.
 */
export async function viaStarts(
  m: ClosableMatcher,
  vocab: ClosingVocab,
  limit: number,
  encode: ((text: string) => number[]) | undefined,
  before: string,
  hints: ClosingHints,
  tokensOf = literalTokens(vocab, encode),
): Promise<ClosingPath[]> {
  const out: ClosingPath[] = []
  for (const start of hints.starts) {
    if (start.length <= before.length || !start.startsWith(before)) continue
    const rest = start.slice(before.length)
    const ids = tokensOf(rest)
    if (!ids) continue
    let n = 0
    while (n < ids.length && m.accept(ids[n]!)) n++
    let w: Walked | undefined
    try {
      if (n === ids.length) w = await walkOut(m, vocab, hints, tokensOf, limit, start)
    } finally {
      m.rollBack(n)
    }
    if (w) out.push(await packed(m, {...w, ids: [...ids, ...w.ids], text: rest + w.text}, encode))
  }
  return out
}

/** The walk's tokens, packed into the tokenizer's encoding of its text when that is shorter and the grammar takes it. */
async function packed(m: ClosableMatcher, w: Walked, encode?: (text: string) => number[]): Promise<ClosingPath> {
  if (w.end !== 'done') return w.end
  if (encode && w.packable && w.ids.length > 1) {
    const ids = encode(w.text)
    if (ids.length < w.ids.length && (await takes(m, ids))) return ids
  }
  return w.ids
}

/** Whether the grammar takes `tokens` from here and ends there (the matcher is left where it was). */
async function takes(m: ClosableMatcher, tokens: number[]): Promise<boolean> {
  let n = 0
  try {
    for (const t of tokens) {
      if (!m.accept(t)) return false
      n++
    }
    const mask = await m.nextMask()
    return m.stopTokenIds.some(t => allows(mask, t))
  } finally {
    m.rollBack(n)
  }
}
