// A JSON Schema `pattern` narrowed to the characters a JSON string may hold raw. XGrammar writes what a pattern
// matches into the string unescaped, so `^.*$` or `[^,]+` let a raw `"` end the string early, and a control
// character or `\s` put a raw tab or line break in it: JSON that does not parse. The rewrite keeps the pattern's
// structure and removes `"`, `\` and U+0000–U+001F from what each atom matches: `.` and negated classes exclude
// them too, positive classes lose them as members, `\s` becomes a space; an atom that matches nothing else (a
// literal quote, `\n`) is refused. Every string the result matches is one the pattern matches, without those
// characters (a subset of what the schema allows).

import {DIGIT, WORD} from '../text/regex.js'
import {complementRanges as complement, JSON_SPECIAL as UNSAFE, normalizeRanges as normalise, subtractRanges as subtract} from '../text/text-grammar.js'

type Ranges = Array<[number, number]>

/** `\s` as far as the result goes: the space (the other ASCII whitespace is unsafe; XGrammar mismatches non-ASCII classes). */
const SPACE: Ranges = [[0x20, 0x20]]

/**
 * A code point inside a class: printable ASCII and the space as themselves (the class's own syntax escaped), others
 * as `\xHH` escapes. XGrammar reads every hex digit after `\x`, so `[\x20A-Z]` was U+020A–Z (an abort) and
 * `a\x20b` U+020B; a control only ever stands in the excluded list of a negated class, where the next member is
 * a space, `!` or `"`, and DEL comes last.
 */
function classChar(cp: number): string {
  if (cp >= 0x80) return String.fromCodePoint(cp)
  if (cp >= 0x20 && cp <= 0x7e) return '\\]-['.includes(String.fromCodePoint(cp)) ? `\\${String.fromCodePoint(cp)}` : String.fromCodePoint(cp)
  return `\\x${cp.toString(16).toUpperCase().padStart(2, '0')}`
}

/** A literal code point outside classes (regex syntax escaped; DEL as a class of its own, which ends the escape). */
function atomChar(cp: number): string {
  if (cp >= 0x80) return String.fromCodePoint(cp)
  if (cp === 0x7f) return '[\\x7F]'
  const c = String.fromCodePoint(cp)
  if (cp >= 0x20 && cp <= 0x7e) return '\\.^$|?*+()[]{}'.includes(c) ? `\\${c}` : c
  return `\\x${cp.toString(16).toUpperCase().padStart(2, '0')}`
}

/** An atom that matches the empty string: XGrammar aborted on an empty alternative such as `(|a)`. */
const EMPTY = 'a{0}'

/** Most non-ASCII members a class may have: they are written out one by one (below). */
export const MAX_WIDE_MEMBERS = 256

/**
 * A class for XGrammar, whose classes work on ASCII: a negated class of the excluded ASCII when nothing else is
 * excluded (`lineSeparators`: U+2028 and U+2029 may be let through, as XGrammar's own "." does), else the ASCII
 * members as a class and the others as literals in a group (a class member past ASCII matched other characters
 * than itself: `[α-ω]` took "ÿ", `[à-ÿ]` refused "é"), up to MAX_WIDE_MEMBERS of them.
 */
function writeClass(r: Ranges, refuse: (why: string) => never, lineSeparators = false): string {
  const members = normalise(r)
  const excluded = complement(members)
  const ascii = excluded.filter(([lo]) => lo < 0x80).map(([lo, hi]): [number, number] => [lo, Math.min(hi, 0x7f)])
  const wide = subtract(excluded, [[0, 0x7f], ...(lineSeparators ? ([[0x2028, 0x2029]] as Ranges) : [])])
  // a caret goes last, as itself (XGrammar took "[\^a]" for something that matched neither "a" nor "^")
  const body = (x: Ranges) => {
    const caret = x.some(([lo, hi]) => lo <= 0x5e && hi >= 0x5e)
    const rest = subtract(x, [[0x5e, 0x5e]]).map(([lo, hi]) => (lo === hi ? classChar(lo) : `${classChar(lo)}-${classChar(hi)}`))
    return rest.join('') + (caret ? '^' : '')
  }
  const positive = (x: Ranges) => (body(x) === '^' ? '\\^' : `[${body(x)}]`)
  if (wide.length === 0) return `[^${body(ascii)}]`
  const low = subtract(members, [[0x80, 0x10ffff]])
  const high = subtract(members, [[0, 0x7f]])
  if (high.length === 0) return positive(low)
  const count = high.reduce((n, [lo, hi]) => n + hi - lo + 1, 0)
  if (count > MAX_WIDE_MEMBERS) refuse(`a character class with more than ${MAX_WIDE_MEMBERS} non-ASCII members (the grammar engine matches them only one by one)`)
  const chars = high.flatMap(([lo, hi]) => Array.from({length: hi - lo + 1}, (_, k) => atomChar(lo + k)))
  return `(${[...(low.length > 0 ? [positive(low)] : []), ...chars].join('|')})`
}

/**
 * Narrows `pattern` (ECMA-262 syntax) as above; `refuse(why)` throws. `also`: more code points to take out (the XML
 * tool-call form takes out `<`, which could start a closing marker inside a raw value).
 */
export function jsonSafePattern(pattern: string, refuse: (why: string) => never, also: Array<[number, number]> = []): string {
  try {
    new RegExp(pattern, 'u') // what a validator compiles (ajv: unicode mode)
  } catch {
    refuse('it is not a valid regular expression')
  }
  const UNSAFE_HERE = normalise([...UNSAFE, ...also])
  const cps = [...pattern].map(c => c.codePointAt(0)!)
  let i = 0
  let out = ''
  // JSON Schema's pattern matches anywhere in the string; XGrammar's whole strings. So each top-level alternative
  // gets "any safe text" on the sides its anchors leave open (`^https?://` had allowed "https://" alone).
  const ANY = `${writeClass(subtract(complement([]), UNSAFE_HERE), refuse)}*`
  const branches: string[] = []
  let depth = 0
  let anchoredStart = false
  let anchoredEnd = false
  const endBranch = () => {
    branches.push(`${anchoredStart ? '' : ANY}${out === '' ? EMPTY : out}${anchoredEnd ? '' : ANY}`)
    out = ''
    anchoredStart = anchoredEnd = false
  }
  const unsafe = (cp: number) => UNSAFE_HERE.some(([lo, hi]) => cp >= lo && cp <= hi)
  const literal = (cp: number, shown: string): string => {
    if (unsafe(cp)) refuse(`it matches ${shown}, which the grammar engine cannot write raw here`)
    return atomChar(cp)
  }
  const hex = (n: number): number => {
    const s = String.fromCodePoint(...cps.slice(i, i + n))
    if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(s)) refuse(`the escape "\\${String.fromCodePoint(cps[i - 1]!)}${s}" is malformed`)
    i += n
    return parseInt(s, 16)
  }
  // after a backslash: a set of ranges (class escapes) or one code point
  const escape = (): Ranges | number => {
    const c = String.fromCodePoint(cps[i++] ?? refuse('it ends with a backslash'))
    switch (c) {
      case 'd':
        return DIGIT
      case 'w':
        return WORD
      case 's':
        return SPACE
      case 'D':
        return complement(DIGIT)
      case 'W':
        return complement(WORD)
      case 'S':
        return refuse('"\\S" matches characters the grammar engine cannot exclude (non-ASCII whitespace)')
      case 'n':
        return 0x0a
      case 'r':
        return 0x0d
      case 't':
        return 0x09
      case 'f':
        return 0x0c
      case 'v':
        return 0x0b
      case '0':
        return 0
      case 'x':
        return hex(2)
      case 'u':
        return hex(4)
      case 'c':
        return refuse('a control escape "\\c"')
      default:
        if (/[1-9bBkpP]/.test(c)) refuse(`the escape "\\${c}"`)
        return c.codePointAt(0)!
    }
  }
  const classAt = (): string => {
    const negated = cps[i] === 0x5e
    if (negated) i++
    const members: Ranges = []
    let first = true
    while (i < cps.length && (cps[i] !== 0x5d || first)) {
      first = false
      let lo: Ranges | number
      if (cps[i] === 0x5c) {
        i++
        lo = escape()
      } else lo = cps[i++]!
      if (typeof lo === 'number' && cps[i] === 0x2d && cps[i + 1] !== undefined && cps[i + 1] !== 0x5d) {
        i++
        let hi: Ranges | number
        if (cps[i] === 0x5c) {
          i++
          hi = escape()
        } else hi = cps[i++]!
        if (typeof hi !== 'number' || hi < lo) refuse('a character class range out of order')
        members.push([lo, hi])
      } else if (typeof lo === 'number') members.push([lo, lo])
      else members.push(...lo)
    }
    if (i >= cps.length) refuse('an unterminated character class')
    i++ // ]
    const matched = negated ? complement(members) : members
    if (negated && complement(members).length > 0 && normalise(members).some(([, hi]) => hi >= 0x80)) {
      refuse('a negated character class that excludes non-ASCII characters (the grammar engine would drop them)')
    }
    const safe = subtract(matched, UNSAFE_HERE)
    if (safe.length === 0) refuse('a character class that only matches characters JSON writes escaped')
    return writeClass(safe, refuse)
  }
  const opensAlternative = () => /(\(|\(\?:|\|)$/.test(out) // (a literal "\(" too: EMPTY is harmless there)
  while (i < cps.length) {
    const cp = cps[i++]!
    if (cp === 0x5c) {
      const e = escape()
      if (typeof e === 'number') out += literal(e, `the character U+${e.toString(16).toUpperCase().padStart(4, '0')}`)
      else {
        const safe = subtract(e, UNSAFE_HERE)
        if (safe.length === 0) refuse('an escape that only matches characters JSON writes escaped')
        out += writeClass(safe, refuse)
      }
    } else if (cp === 0x5b) out += classAt()
    else if (cp === 0x2e) out += writeClass(subtract(complement([[0x0a, 0x0a], [0x0d, 0x0d], [0x2028, 0x2029]]), UNSAFE_HERE), refuse, true)
    else if (cp === 0x5e) {
      // an anchor: only where a top-level alternative starts (XGrammar matches the whole string either way)
      if (depth > 0 || out !== '') refuse('an anchor "^" that does not start the pattern or one of its top-level alternatives')
      anchoredStart = true
    } else if (cp === 0x24) {
      if (depth > 0 || (i < cps.length && cps[i] !== 0x7c)) refuse('an anchor "$" that does not end the pattern or one of its top-level alternatives')
      anchoredEnd = true
    } else if (cp === 0x7c) {
      if (depth === 0) endBranch()
      else out += `${opensAlternative() ? EMPTY : ''}|`
    } else if (cp === 0x28) {
      depth++
      out += '('
      if (cps[i] === 0x3f) {
        // (?: is a group; lookarounds and named groups are not in the grammar engine's language
        if (cps[i + 1] !== 0x3a) refuse('a lookaround or named group "(?"')
        out += '?:'
        i += 2
      }
    } else if (cp === 0x29) {
      if (--depth < 0) refuse('an unbalanced ")"')
      out += `${opensAlternative() ? EMPTY : ''})`
    } else if ('?*+{},'.includes(String.fromCodePoint(cp))) out += String.fromCodePoint(cp)
    else out += literal(cp, cp === 0x22 ? 'a quote' : `the character U+${cp.toString(16).toUpperCase().padStart(4, '0')}`)
  }
  if (depth !== 0) refuse('an unbalanced "("')
  endBranch()
  return branches.length === 1 ? `^${branches[0]}$` : `^(${branches.join('|')})$`
}
