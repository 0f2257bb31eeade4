// Regular expressions (Python `re` syntax, as Lark terminals and `syntax: "regex"` tools write them) as
// TextNodes. The subset whose language a grammar states exactly: literals and escapes, `.`, classes with
// ranges, groups, alternation and greedy quantifiers. Anchors, lookaround, backreferences, lazy or
// possessive quantifiers and inline flags change what matches in ways a grammar cannot say, so they are
// refused (GrammarRefusal naming them). `\d`, `\w` and `\s` match their ASCII members (Python's Unicode
// classes are larger: the output stays valid, it just never uses the other characters); `\D`, `\W`, `\S`
// and `\d`/`\w`/`\s` inside negated classes would need the complement of those Unicode sets and are refused.
import {alt, cls, GrammarRefusal, lit, MAX_GROUP_NESTING, rep, seq, type TextNode} from './text-grammar.js'

export interface RegexFlags {
  /** `s`: `.` also matches a newline. */
  dotAll?: boolean
}

export const DIGIT: Array<[number, number]> = [[0x30, 0x39]]
export const WORD: Array<[number, number]> = [
  [0x30, 0x39],
  [0x41, 0x5a],
  [0x5f, 0x5f],
  [0x61, 0x7a],
]
const SPACE: Array<[number, number]> = [
  [0x09, 0x0d],
  [0x20, 0x20],
]
const SIMPLE_ESCAPES: Record<string, number> = {n: 0x0a, t: 0x09, r: 0x0d, f: 0x0c, v: 0x0b, a: 0x07}

class RegexParser {
  private i = 0
  private depth = 0
  private readonly cps: number[]

  constructor(
    private readonly src: string,
    private readonly flags: RegexFlags,
  ) {
    this.cps = [...src].map(c => c.codePointAt(0)!)
  }

  parse(): TextNode {
    const node = this.alternation()
    if (this.i < this.cps.length) throw this.refuse(`an unmatched ")"`)
    return node
  }

  private refuse(what: string): GrammarRefusal {
    return new GrammarRefusal(`${what} in the regex /${this.src}/`)
  }

  private peek(k = 0): string | undefined {
    const c = this.cps[this.i + k]
    return c === undefined ? undefined : String.fromCodePoint(c)
  }

  private alternation(): TextNode {
    const branches = [this.sequence()]
    while (this.peek() === '|') {
      this.i++
      branches.push(this.sequence())
    }
    return alt(branches)
  }

  private sequence(): TextNode {
    const items: TextNode[] = []
    for (;;) {
      const c = this.peek()
      if (c === undefined || c === '|' || c === ')') break
      items.push(this.quantified(this.atom()))
    }
    return items.length === 0 ? lit('') : seq(items)
  }

  private quantified(node: TextNode): TextNode {
    for (;;) {
      const c = this.peek()
      let min: number
      let max: number
      if (c === '*') [min, max] = [0, Infinity]
      else if (c === '+') [min, max] = [1, Infinity]
      else if (c === '?') [min, max] = [0, 1]
      else if (c === '{') {
        const bounds = this.braces()
        if (!bounds) return node
        ;[min, max] = bounds
      } else return node
      if (c !== '{') this.i++
      if (this.peek() === '?') throw this.refuse('a lazy quantifier (its shortest-match meaning has no grammar form)')
      if (this.peek() === '+') throw this.refuse('a possessive quantifier')
      if (max < min) throw this.refuse(`the repetition {${min},${max}}`)
      node = rep(node, min, max)
    }
  }

  /** `{n}`, `{n,}`, `{,m}`, `{n,m}` at the cursor (consumed), or undefined when the brace is a literal. */
  private braces(): [number, number] | undefined {
    const m = /^\{(\d*)(,(\d*))?\}/.exec(this.src.slice(this.offset()))
    if (!m || (m[1] === '' && (m[2] === undefined || m[3] === ''))) return undefined
    this.i += [...m[0]].length
    const min = m[1] === '' ? 0 : Number(m[1])
    const max = m[2] === undefined ? min : m[3] === '' ? Infinity : Number(m[3])
    if (min > 10000 || (max !== Infinity && max > 10000)) throw this.refuse(`the repetition ${m[0]} (bounds above 10000)`)
    return [min, max]
  }

  /** The cursor as a UTF-16 offset into src. */
  private offset(): number {
    return String.fromCodePoint(...this.cps.slice(0, this.i)).length
  }

  private atom(): TextNode {
    const c = this.peek()!
    this.i++
    switch (c) {
      case '(':
        return this.group()
      case '[':
        return this.klass()
      case '.':
        return this.flags.dotAll ? cls([], true) : cls([[0x0a, 0x0a]], true)
      case '\\':
        return this.escape(false) as TextNode
      case '^':
      case '$':
        throw this.refuse(`the anchor "${c}"`)
      case '*':
      case '+':
      case '?':
        throw this.refuse(`a quantifier "${c}" with nothing to repeat`)
      default:
        return lit(c)
    }
  }

  private group(): TextNode {
    if (this.peek() === '?') {
      const next = this.peek(1)
      if (next === ':') this.i += 2
      else if (next === 'P' && this.peek(2) === '<') {
        const close = this.cps.indexOf(0x3e, this.i)
        if (close < 0) throw this.refuse('an unterminated group name')
        this.i = close + 1
      } else if (next === '=' || next === '!') throw this.refuse(`a lookahead "(?${next}"`)
      else if (next === '<') throw this.refuse('a lookbehind "(?<"')
      else if (next === 'P' && this.peek(2) === '=') throw this.refuse('a backreference "(?P="')
      else if (next === '#') throw this.refuse('a comment group "(?#"')
      else if (next === '(') throw this.refuse('a conditional group "(?("')
      else throw this.refuse(`the inline flags or group "(?${next ?? ''}"`)
    }
    if (++this.depth > MAX_GROUP_NESTING) throw this.refuse(`groups nested more than ${MAX_GROUP_NESTING} levels deep`)
    const inner = this.alternation()
    if (this.peek() !== ')') throw this.refuse('an unclosed "("')
    this.i++
    this.depth--
    return inner
  }

  /**
   * After a backslash: a code point, or (classes allowed) the ranges of \d \w \s. `inClass`: inside [...]
   * (where \b is a backspace).
   */
  private escape(inClass: boolean): TextNode | Array<[number, number]> | number {
    const c = this.peek()
    if (c === undefined) throw this.refuse('a trailing backslash')
    this.i++
    if (c in SIMPLE_ESCAPES) return this.single(SIMPLE_ESCAPES[c]!, inClass)
    if (c === 'b' && inClass) return 0x08
    if (c === 'x') return this.single(this.hexDigits(2), inClass)
    if (c === 'u') return this.single(this.hexDigits(4), inClass)
    if (c === 'U') return this.single(this.hexDigits(8), inClass)
    if (c === '0') {
      let v = 0
      for (let k = 0; k < 2 && /[0-7]/.test(this.peek() ?? ''); k++) {
        v = v * 8 + Number(this.peek())
        this.i++
      }
      return this.single(v, inClass)
    }
    if (c === 'd' || c === 'w' || c === 's') {
      const ranges = c === 'd' ? DIGIT : c === 'w' ? WORD : SPACE
      return inClass ? ranges : cls(ranges)
    }
    if (c === 'D' || c === 'W' || c === 'S') throw this.refuse(`the escape "\\${c}" (the complement of Python's Unicode class)`)
    if (/[1-9]/.test(c)) throw this.refuse(`the backreference "\\${c}"`)
    if (/[bBAZzG]/.test(c)) throw this.refuse(`the assertion "\\${c}"`)
    if (/[A-Za-z]/.test(c)) throw this.refuse(`the escape "\\${c}"`)
    return this.single(c.codePointAt(0)!, inClass)
  }

  private single(cp: number, inClass: boolean): TextNode | number {
    return inClass ? cp : lit(String.fromCodePoint(cp))
  }

  private hexDigits(n: number): number {
    let v = 0
    for (let k = 0; k < n; k++) {
      const d = this.peek()
      if (d === undefined || !/[0-9a-fA-F]/.test(d)) throw this.refuse(`a \\x/\\u/\\U escape without ${n} hex digits`)
      v = v * 16 + parseInt(d, 16)
      this.i++
    }
    if (v > 0x10ffff) throw this.refuse('an escape beyond U+10FFFF')
    return v
  }

  private klass(): TextNode {
    const neg = this.peek() === '^'
    if (neg) this.i++
    const ranges: Array<[number, number]> = []
    let first = true
    for (;;) {
      const c = this.peek()
      if (c === undefined) throw this.refuse('an unterminated character class')
      if (c === ']' && !first) {
        this.i++
        break
      }
      first = false
      const lo = this.classMember()
      if (Array.isArray(lo)) {
        if (neg) throw this.refuse('"\\d", "\\w" or "\\s" inside a negated class (Python means their Unicode sets)')
        ranges.push(...lo)
        continue
      }
      if (this.peek() === '-' && this.peek(1) !== undefined && this.peek(1) !== ']') {
        this.i++
        const hi = this.classMember()
        if (Array.isArray(hi)) throw this.refuse('a class range ending in a class escape')
        if (hi < lo) throw this.refuse('a reversed class range')
        ranges.push([lo, hi])
      } else ranges.push([lo, lo])
    }
    return cls(ranges, neg)
  }

  private classMember(): number | Array<[number, number]> {
    const c = this.peek()!
    this.i++
    if (c === '\\') return this.escape(true) as number | Array<[number, number]>
    if (c === '[' && (this.peek() === ':' || this.peek() === '=' || this.peek() === '.')) throw this.refuse('a POSIX class "[:"')
    return c.codePointAt(0)!
  }
}

/** A Python regex as a TextNode; throws GrammarRefusal naming what it cannot express. */
export function regexNode(source: string, flags: RegexFlags = {}): TextNode {
  return new RegexParser(source, flags).parse()
}
