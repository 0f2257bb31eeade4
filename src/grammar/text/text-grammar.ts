// A grammar over text, built from what a client sends (a Lark grammar or a regex; lark.ts, regex.ts),
// and written out as XGrammar EBNF. Two spellings of the same language: the text itself (`raw`), or the
// text as the inside of a JSON string (`json`: every character that JSON escapes is written escaped), so a
// tool whose calls carry the text inside JSON arguments can be held to it too.
//
// Character classes are written the way XGrammar 0.1.27 (wasm) matches them correctly: its classes work
// on ASCII members only (a positive class with a member above U+007F matches bytes, not characters, and a
// negated one drops such members with a warning), so non-ASCII members of positive classes are written as
// alternatives of one-character strings (at most MAX_WIDE of them) and negated classes may only exclude
// ASCII characters. What cannot be written that way is refused (`GrammarRefusal`), never widened.

/** Deepest nesting of groups a client's grammar may use (the parsers and the EBNF writer recurse on it). */
export const MAX_GROUP_NESTING = 64

/** A node of the grammar: code points, sequences, choices, repetitions, rule references. */
export type TextNode =
  | {t: 'lit'; s: string}
  /** A set of code points, as sorted disjoint inclusive ranges; `neg`: every character outside them. */
  | {t: 'cls'; ranges: Array<[number, number]>; neg: boolean}
  | {t: 'seq'; items: TextNode[]}
  | {t: 'alt'; items: TextNode[]}
  /** max = Infinity: unbounded. */
  | {t: 'rep'; node: TextNode; min: number; max: number}
  | {t: 'ref'; rule: string}

export interface TextGrammar {
  /** Rules by name (names are [A-Za-z_][A-Za-z0-9_]*); `root` is where the text starts. */
  rules: Map<string, TextNode>
  root: string
}

/** A construct the grammar engine cannot enforce exactly; `construct` names it for the 400. */
export class GrammarRefusal extends Error {
  constructor(readonly construct: string) {
    super(construct)
  }
}

/** Non-ASCII members a positive class may have (each becomes a one-character alternative). */
const MAX_WIDE = 256
const MAX_CODE_POINT = 0x10ffff

export const lit = (s: string): TextNode => ({t: 'lit', s})
export const seq = (items: TextNode[]): TextNode => (items.length === 1 ? items[0]! : {t: 'seq', items})
export const alt = (items: TextNode[]): TextNode => (items.length === 1 ? items[0]! : {t: 'alt', items})
export const rep = (node: TextNode, min: number, max: number): TextNode => ({t: 'rep', node, min, max})

/** Sorted, merged ranges. */
export function normalizeRanges(ranges: Array<[number, number]>): Array<[number, number]> {
  const sorted = ranges.filter(([a, b]) => a <= b).sort((x, y) => x[0] - y[0])
  const out: Array<[number, number]> = []
  for (const [a, b] of sorted) {
    const last = out[out.length - 1]
    if (last && a <= last[1] + 1) last[1] = Math.max(last[1], b)
    else out.push([a, b])
  }
  return out
}

export function cls(ranges: Array<[number, number]>, neg = false): TextNode {
  return {t: 'cls', ranges: normalizeRanges(ranges), neg}
}

/** The code points outside `ranges` (which are normalized). */
function complement(ranges: Array<[number, number]>): Array<[number, number]> {
  const out: Array<[number, number]> = []
  let next = 0
  for (const [a, b] of ranges) {
    if (a > next) out.push([next, a - 1])
    next = b + 1
  }
  if (next <= MAX_CODE_POINT) out.push([next, MAX_CODE_POINT])
  return out
}

const hex = (n: number, width: number) => n.toString(16).padStart(width, '0')

/** One code point inside an EBNF string literal or class. */
function escapeCodePoint(cp: number, inClass: boolean): string {
  if ((cp >= 0x30 && cp <= 0x39) || (cp >= 0x41 && cp <= 0x5a) || (cp >= 0x61 && cp <= 0x7a)) return String.fromCodePoint(cp)
  if (cp === 0x20 || (!inClass && cp > 0x20 && cp < 0x7f && cp !== 0x22 && cp !== 0x5c)) return String.fromCodePoint(cp)
  // \u takes exactly four digits (XGrammar's \x takes every hex digit that follows)
  if (cp < 0x10000) return `\\u${hex(cp, 4)}`
  return `\\U${hex(cp, 8)}`
}

function ebnfString(s: string): string {
  let out = '"'
  for (const ch of s) out += escapeCodePoint(ch.codePointAt(0)!, false)
  return out + '"'
}

function ebnfClass(ranges: Array<[number, number]>, neg: boolean): string {
  const body = ranges.map(([a, b]) => (a === b ? escapeCodePoint(a, true) : `${escapeCodePoint(a, true)}-${escapeCodePoint(b, true)}`)).join('')
  return `[${neg ? '^' : ''}${body}]`
}

/** JSON's spelling of one character inside a string. */
function jsonChar(cp: number): string {
  return JSON.stringify(String.fromCodePoint(cp)).slice(1, -1)
}

/** Characters JSON writes escaped: controls, `"` and `\`. */
export const JSON_SPECIAL: Array<[number, number]> = [
  [0, 0x1f],
  [0x22, 0x22],
  [0x5c, 0x5c],
]

function intersect(a: Array<[number, number]>, b: Array<[number, number]>): Array<[number, number]> {
  const out: Array<[number, number]> = []
  for (const [x, y] of a) for (const [u, v] of b) if (Math.max(x, u) <= Math.min(y, v)) out.push([Math.max(x, u), Math.min(y, v)])
  return normalizeRanges(out)
}

function subtract(a: Array<[number, number]>, b: Array<[number, number]>): Array<[number, number]> {
  return intersect(a, complement(normalizeRanges(b)))
}

/** The code points outside `ranges` (any order). */
export const complementRanges = (ranges: Array<[number, number]>): Array<[number, number]> => complement(normalizeRanges(ranges))
/** The code points of `a` outside `b`. */
export const subtractRanges = subtract

function codePoints(ranges: Array<[number, number]>): number[] {
  const out: number[] = []
  for (const [a, b] of ranges) for (let c = a; c <= b; c++) out.push(c)
  return out
}

const count = (ranges: Array<[number, number]>) => ranges.reduce((n, [a, b]) => n + b - a + 1, 0)

function choice(parts: string[]): string {
  if (parts.length === 0) throw new GrammarRefusal('a character class that matches no character')
  return parts.length === 1 ? parts[0]! : `(${parts.join(' | ')})`
}

/** A positive set of code points as EBNF: an ASCII class plus one-character strings for the rest. */
function positiveSet(ranges: Array<[number, number]>, spell: (cp: number) => string): string {
  const ascii = intersect(ranges, [[0, 0x7f]])
  const wide = intersect(ranges, [[0x80, MAX_CODE_POINT]])
  if (count(wide) > MAX_WIDE) throw new GrammarRefusal(`a character class with more than ${MAX_WIDE} non-ASCII characters (${describe(wide)})`)
  const parts = ascii.length > 0 ? [ebnfClass(ascii, false)] : []
  for (const cp of codePoints(wide)) parts.push(ebnfString(spell(cp)))
  return choice(parts)
}

function describe(ranges: Array<[number, number]>): string {
  return ranges
    .slice(0, 3)
    .map(([a, b]) => (a === b ? `U+${hex(a, 4).toUpperCase()}` : `U+${hex(a, 4).toUpperCase()}-U+${hex(b, 4).toUpperCase()}`))
    .join(', ')
}

/** A class node as EBNF in one of the two spellings. */
function classEbnf(ranges: Array<[number, number]>, neg: boolean, json: boolean): string {
  if (neg && ranges.some(([, b]) => b > 0x7f)) throw new GrammarRefusal(`a negated character class or escape that excludes non-ASCII characters (${describe(intersect(ranges, [[0x80, MAX_CODE_POINT]]))})`)
  if (!json) {
    if (!neg) return positiveSet(ranges, cp => String.fromCodePoint(cp))
    // every character: the class that excludes nothing is written as "not a newline, or a newline"
    return ranges.length === 0 ? '([^\\x0a] | "\\x0a")' : ebnfClass(ranges, true)
  }
  const special = neg ? subtract(JSON_SPECIAL, ranges) : intersect(ranges, JSON_SPECIAL)
  const escapes = codePoints(special).map(cp => ebnfString(jsonChar(cp)))
  if (neg) return choice([ebnfClass(normalizeRanges([...ranges, ...JSON_SPECIAL]), true), ...escapes])
  const plain = subtract(ranges, JSON_SPECIAL)
  return choice([...(plain.length > 0 ? [positiveSet(plain, cp => String.fromCodePoint(cp))] : []), ...escapes])
}

function nodeEbnf(n: TextNode, json: boolean, name: (rule: string) => string): string {
  switch (n.t) {
    case 'lit': {
      if (!json) return ebnfString(n.s)
      let s = ''
      for (const ch of n.s) s += jsonChar(ch.codePointAt(0)!)
      return ebnfString(s)
    }
    case 'cls':
      return classEbnf(n.ranges, n.neg, json)
    case 'seq':
      return n.items.length === 0 ? '""' : `(${n.items.map(i => nodeEbnf(i, json, name)).join(' ')})`
    case 'alt':
      return `(${n.items.map(i => nodeEbnf(i, json, name)).join(' | ')})`
    case 'ref':
      return name(n.rule)
    case 'rep': {
      // a repeated repetition needs its own parentheses (`x{2}{3}` is not EBNF)
      const inner = n.node.t === 'rep' ? `(${nodeEbnf(n.node, json, name)})` : nodeEbnf(n.node, json, name)
      const {min, max} = n
      if (max === 0) return '""'
      if (min === 0 && max === Infinity) return `${inner}*`
      if (min === 1 && max === Infinity) return `${inner}+`
      if (min === 0 && max === 1) return `${inner}?`
      if (max === Infinity) return `${inner}{${min},}`
      return min === max ? `${inner}{${min}}` : `${inner}{${min},${max}}`
    }
  }
}

/** Bounded repetitions XGrammar unrolls: nested ones multiply (its compile runs on the serving thread). */
export const MAX_UNROLLED = 1000

function checkRepetition(n: TextNode, outer: number): void {
  if (n.t === 'seq' || n.t === 'alt') for (const i of n.items) checkRepetition(i, outer)
  if (n.t !== 'rep') return
  const bound = n.max === Infinity ? n.min : n.max
  const total = outer * Math.max(1, bound)
  if (total > MAX_UNROLLED) throw new GrammarRefusal(`a bounded repetition of ${total} (nested bounds multiplied; at most ${MAX_UNROLLED})`)
  checkRepetition(n.node, total)
}

/**
 * The grammar as XGrammar EBNF (`root` is its root rule). `prefix` keeps its rule names apart from those of
 * a grammar it is embedded in. Throws GrammarRefusal for what XGrammar cannot match exactly.
 */
export function toEbnf(g: TextGrammar, spelling: 'raw' | 'json', prefix = 'g_'): string {
  for (const node of g.rules.values()) checkRepetition(node, 1)
  const json = spelling === 'json'
  const name = (rule: string) => {
    if (!g.rules.has(rule)) throw new GrammarRefusal(`a reference to the undefined rule or terminal "${rule}"`)
    return `${prefix}${rule}`
  }
  const lines = [`root ::= ${name(g.root)}`]
  for (const [rule, node] of g.rules) lines.push(`${prefix}${rule} ::= ${nodeEbnf(node, json, name)}`)
  return lines.join('\n')
}
