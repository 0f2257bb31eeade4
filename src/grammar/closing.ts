// The shortest way the grammar lets a JSON output end from where it stands: what budget-aware structured output
// forces once the tokens left in max_tokens come down to it (scheduler.ts, Scheduler.closeForBudget), and what a
// request's max_tokens is checked against before any work (the shortest instance of its schema). The path is found
// greedily on the matcher, one ASCII character at a time: inside a string its closing quote first, outside one the
// closers `}` `]` first, then the cheapest value `0`; then re-encoded by the tokenizer into fewer tokens when the
// grammar takes that encoding too.

/** A grammar matcher as the closer walks it (GrammarMatcherState). */
export interface ClosableMatcher {
  nextMask(): Promise<Int32Array>
  accept(token: number): boolean
  rollBack(n: number): void
  readonly stopTokenIds: readonly number[]
}

/** The vocabulary facts the closer needs: single-character tokens, most preferred first. */
export interface ClosingVocab {
  /** [character, token id] for the printable ASCII characters and the space, in the order the closer tries them. */
  chars: Array<[string, number]>
  /** The same inside a JSON string (the closing quote first, characters that need no escape next). */
  inString: Array<[string, number]>
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

// closers first, then the shortest values and the separators; letters and digits next; the space last (the grammar's
// separators need it, but free whitespace would never end)
const ORDER = '}]"0:,' + 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ123456789' + '.-+_e{[\\/@#$%&*()=<>?!;\'`^|~' + ' '

/** The closer's vocabulary from the byte-level token strings (tokenizer.json spells the space "Ġ"). */
export function closingVocab(vocab: readonly string[]): ClosingVocab {
  const ids = new Map<string, number>()
  vocab.forEach((s, id) => {
    const ch = s === 'Ġ' ? ' ' : s
    if (ch.length === 1 && ORDER.includes(ch) && !ids.has(ch)) ids.set(ch, id)
  })
  const chars = [...ORDER].filter(c => ids.has(c)).map((c): [string, number] => [c, ids.get(c)!])
  const quote = chars.filter(([c]) => c === '"')
  return {chars, inString: [...quote, ...chars.filter(([c]) => c !== '"' && c !== '\\'), ...chars.filter(([c]) => c === '\\')]}
}

function allows(mask: Int32Array, token: number): boolean {
  return (mask[token >> 5]! & (1 << (token & 31))) !== 0
}

/**
 * The tokens that take the matcher from its state to a complete output (one where a stop token is allowed);
 * 'long' when the walk finds none within about `limit` tokens, 'stuck' when the grammar needs a character the closer
 * does not try (a special token, a non-ASCII one). The matcher is left where it was. `encode` (the tokenizer) turns
 * the characters into fewer tokens; `before` is the text the matcher took so far.
 */
export type ClosingPath = number[] | 'long' | 'stuck'

export async function closingPath(m: ClosableMatcher, vocab: ClosingVocab, limit: number, encode?: (text: string) => number[], before = ''): Promise<ClosingPath> {
  const ids: number[] = []
  let text = ''
  let done = false
  let stuck = false
  // `before`: the output so far, whose end may be inside a string
  let {inString, escaped} = jsonStringState(before)
  // the characters this string took from the closer, and when (a pattern or format may need new ones to end)
  const used = new Map<string, number>()
  try {
    // a few characters more than the limit: the tokenizer usually packs them into fewer tokens
    for (let steps = 0; steps <= limit * 4 + 8; steps++) {
      const mask = await m.nextMask()
      if (m.stopTokenIds.some(t => allows(mask, t))) {
        done = true
        break
      }
      const next = inString && !escaped ? await stringChar(m, vocab, mask, used) : vocab.chars.find(([, id]) => allows(mask, id))
      if (!next || !m.accept(next[1])) {
        stuck = true
        break
      }
      ids.push(next[1])
      text += next[0]
      if (escaped) escaped = false
      else if (inString && next[0] === '\\') escaped = true
      else if (next[0] === '"') inString = !inString
      if (inString) used.set(next[0], steps)
      else used.clear()
    }
  } finally {
    m.rollBack(ids.length)
  }
  if (!done) return stuck ? 'stuck' : 'long'
  if (encode && ids.length > 1) {
    const packed = encode(text)
    if (packed.length < ids.length && (await takes(m, packed))) return packed
  }
  return ids
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
