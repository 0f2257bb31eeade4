// Keeps constrained output valid UTF-8. XGrammar matches a non-ASCII character by its UTF-8 shape only (a lead
// byte and that many continuation bytes), so its masks let through overlong forms (C0 95), UTF-16 surrogates
// (ED B6 AE) and code points past U+10FFFF, which a client decodes to U+FFFD: invalid text in a string, and up
// to four characters where the grammar counted one (a maxLength broken). The guard follows the bytes of the
// tokens a matcher accepts through the UTF-8 automaton (RFC 3629's well-formed sequences), refuses a token that
// would break it, and clears such tokens from masks. A token without bytes (an added token such as a stop token
// whose content is empty) is taken only between characters.
//
// The automaton also leaves out U+2028 and U+2029 (E2 80 A8/A9), which JSON may still write as escapes: a
// pattern's "." excludes them, and XGrammar's classes cannot exclude a non-ASCII character.
import {byteLevelBytes, byteLevelInto} from '../package/byte-level.js'

/**
 * Automaton states: 0 between characters; 1–3 that many continuation bytes (80–BF) still due; 4–7 the byte after
 * E0 (A0–BF), ED (80–9F), F0 (90–BF) or F4 (80–8F), after which one (4, 5) or two (6, 7) more are due; 8 after E2
 * (80 leads to 9, 81–BF to 1); 9 after E2 80 (80–BF but A8 and A9).
 */
export const UTF8_STATES = 10
const INVALID = -1

/** The state after byte `b` in state `s`, or INVALID. */
function step(s: number, b: number): number {
  switch (s) {
    case 0:
      if (b < 0x80) return 0
      if (b >= 0xc2 && b <= 0xdf) return 1
      if (b === 0xe0) return 4
      if (b === 0xe2) return 8
      if (b === 0xed) return 5
      if (b >= 0xe1 && b <= 0xef) return 2
      if (b === 0xf0) return 6
      if (b >= 0xf1 && b <= 0xf3) return 3
      if (b === 0xf4) return 7
      return INVALID
    case 1:
    case 2:
    case 3:
      return b >= 0x80 && b <= 0xbf ? s - 1 : INVALID
    case 4:
      return b >= 0xa0 && b <= 0xbf ? 1 : INVALID
    case 5:
      return b >= 0x80 && b <= 0x9f ? 1 : INVALID
    case 6:
      return b >= 0x90 && b <= 0xbf ? 2 : INVALID
    case 7:
      return b >= 0x80 && b <= 0x8f ? 2 : INVALID
    case 8:
      return b === 0x80 ? 9 : b >= 0x81 && b <= 0xbf ? 1 : INVALID
    case 9:
      return b >= 0x80 && b <= 0xbf && b !== 0xa8 && b !== 0xa9 ? 0 : INVALID
    default:
      return INVALID
  }
}

/** Writes a token's row of the table: for each entry state, the state after the token, or INVALID. */
function rowOf(b: Uint8Array, row: Int8Array): void {
  for (let s = 0; s < UTF8_STATES; s++) {
    // no bytes: only between characters (step would take it anywhere)
    let at = b.length === 0 && s !== 0 ? INVALID : s
    for (let i = 0; i < b.length && at !== INVALID; i++) at = step(at, b[i]!)
    row[s] = at
  }
}

export class Utf8Guard {
  /** Per state, the tokens allowed there (built with the table: 13 ms for 16K tokens, ~35 ms for 248K). */
  private readonly masks: Int32Array[] = []

  /** `table[token * UTF8_STATES + state]`: the state after the token, or -1 where it is not allowed. */
  private constructor(
    private readonly size: number,
    private readonly table: Int8Array,
  ) {
    for (let state = 0; state < UTF8_STATES; state++) {
      const allowed = new Int32Array(Math.ceil(size / 32))
      for (let id = 0; id < size; id++) if (table[id * UTF8_STATES + state]! !== INVALID) allowed[id >> 5]! |= 1 << (id & 31)
      this.masks.push(allowed)
    }
  }

  /**
   * From the vocabulary as XGrammar gets it (vocab.ts: byte-level spellings in id order) and the ids of added tokens,
   * whose strings are their text.
   */
  static fromVocab(tokens: readonly string[], added: ReadonlySet<number>): Utf8Guard {
    const alphabet = byteLevelBytes()
    const utf8 = new TextEncoder()
    const table = new Int8Array(tokens.length * UTF8_STATES)
    let buf = new Uint8Array(64)
    for (let id = 0; id < tokens.length; id++) {
      const token = tokens[id]!
      let n: number
      if (added.has(id)) {
        const b = utf8.encode(token)
        if (b.length > buf.length) buf = new Uint8Array(b.length * 2)
        buf.set(b)
        n = b.length
      } else {
        if (token.length > buf.length) buf = new Uint8Array(token.length * 2)
        n = byteLevelInto(token, alphabet, buf)
      }
      rowOf(buf.subarray(0, n), table.subarray(id * UTF8_STATES, (id + 1) * UTF8_STATES))
    }
    return new Utf8Guard(tokens.length, table)
  }

  /** From each token's bytes, in id order. */
  static fromBytes(bytes: readonly Uint8Array[]): Utf8Guard {
    const table = new Int8Array(bytes.length * UTF8_STATES)
    bytes.forEach((b, id) => rowOf(b, table.subarray(id * UTF8_STATES, (id + 1) * UTF8_STATES)))
    return new Utf8Guard(bytes.length, table)
  }

  /** The state after `token` in `state`, or -1 when the token would break UTF-8 there. */
  next(state: number, token: number): number {
    if (token < 0 || token >= this.size) return INVALID
    return this.table[token * UTF8_STATES + state]!
  }

  /** Clears from `mask` (bit per token, 32 to a word) the tokens that would break UTF-8 in `state`. */
  restrict(mask: Int32Array, state: number): Int32Array {
    const allowed = this.masks[state]!
    const n = Math.min(mask.length, allowed.length)
    for (let i = 0; i < n; i++) mask[i]! &= allowed[i]!
    for (let i = n; i < mask.length; i++) mask[i] = 0
    return mask
  }
}
