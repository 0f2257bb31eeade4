// Lark grammars (what OpenAI's custom tools carry in `format: {type: "grammar", syntax: "lark"}`, Codex's
// apply_patch among them) as TextGrammars. Read as the context-free language they define over characters:
// rules and TERMINALS, "strings" (with the `i` flag), "a".."z" ranges, /regex/ terminals (regex.ts, flag
// `s`), groups, alternation, [optional], ?, *, +, ~ n and ~ n..m, %import common.NAME (also `-> NEW` and
// `(A, B)`), %ignore (ignored terminals may stand before every token and at the end). What only shapes
// Lark's parse tree is dropped: `-> alias`, `?rule` / `!rule` and priorities. Templates, %declare,
// %override, %extend, other imports and unknown directives are refused (GrammarRefusal naming them): the
// language they define cannot be enforced here. Lark's lexer-level disambiguation (longest match,
// priorities) is not modelled; the grammar's language is.
import {LARK_COMMON} from './lark-common.js'
import {regexNode} from './regex.js'
import {alt, cls, GrammarRefusal, lit, MAX_GROUP_NESTING, rep, seq, type TextGrammar, type TextNode} from './text-grammar.js'

type Token =
  | {k: 'name'; v: string}
  | {k: 'string'; v: string; insensitive: boolean}
  | {k: 'regex'; v: string; flags: string}
  | {k: 'number'; v: number}
  | {k: 'directive'; v: string}
  | {k: 'op'; v: string}
  | {k: 'nl'}

const opIs = (t: Token | undefined, v: string) => t?.k === 'op' && t.v === v

const OPS = ['->', '..', ':', '|', '(', ')', '[', ']', '{', '}', '?', '*', '+', '~', '!', '.', ',']

/** Python-style escapes of a Lark string literal's body. */
function unescape(body: string, line: number): string {
  let out = ''
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!
    if (c !== '\\') {
      out += c
      continue
    }
    const e = body[++i]
    const simple: Record<string, string> = {n: '\n', t: '\t', r: '\r', f: '\f', v: '\v', a: '\x07', b: '\b', '0': '\0', '\\': '\\', '"': '"', "'": "'"}
    if (e !== undefined && e in simple) out += simple[e]
    else if (e === 'x' || e === 'u' || e === 'U') {
      const n = e === 'x' ? 2 : e === 'u' ? 4 : 8
      const digits = body.slice(i + 1, i + 1 + n)
      if (!/^[0-9a-fA-F]+$/.test(digits) || digits.length !== n) throw new GrammarRefusal(`a malformed \\${e} escape in a string on line ${line}`)
      out += String.fromCodePoint(parseInt(digits, 16))
      i += n
    } else out += '\\' + (e ?? '') // Python keeps unknown escapes as they are
  }
  return out
}

function tokenize(src: string): Array<Token & {line: number}> {
  const out: Array<Token & {line: number}> = []
  let line = 1
  let i = 0
  const push = (t: Token) => out.push({...t, line})
  while (i < src.length) {
    const c = src[i]!
    if (c === '\n') {
      push({k: 'nl'})
      line++
      i++
    } else if (c === ' ' || c === '\t' || c === '\r') i++
    else if (src.startsWith('//', i) || c === '#') {
      while (i < src.length && src[i] !== '\n') i++
    } else if (c === '"') {
      let j = i + 1
      while (j < src.length && src[j] !== '"' && src[j] !== '\n') j += src[j] === '\\' ? 2 : 1
      if (src[j] !== '"') throw new GrammarRefusal(`an unterminated string on line ${line}`)
      const insensitive = src[j + 1] === 'i'
      push({k: 'string', v: unescape(src.slice(i + 1, j), line), insensitive})
      i = j + 1 + (insensitive ? 1 : 0)
    } else if (c === '/' && src[i + 1] !== '/') {
      let j = i + 1
      while (j < src.length && src[j] !== '/' && src[j] !== '\n') j += src[j] === '\\' ? 2 : 1
      if (src[j] !== '/') throw new GrammarRefusal(`an unterminated regex on line ${line}`)
      const flags = /^[a-z]*/.exec(src.slice(j + 1))![0]
      push({k: 'regex', v: src.slice(i + 1, j), flags})
      i = j + 1 + flags.length
    } else if (c === '%') {
      const m = /^%[a-z_]+/.exec(src.slice(i))
      if (!m) throw new GrammarRefusal(`a stray "%" on line ${line}`)
      push({k: 'directive', v: m[0]})
      i += m[0].length
    } else if (/[0-9]/.test(c)) {
      const m = /^[0-9]+/.exec(src.slice(i))![0]
      push({k: 'number', v: Number(m)})
      i += m.length
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))![0]
      push({k: 'name', v: m})
      i += m.length
    } else {
      const op = OPS.find(o => src.startsWith(o, i))
      if (!op) throw new GrammarRefusal(`the character "${c}" on line ${line}`)
      push({k: 'op', v: op})
      i += op.length
    }
  }
  return out
}

const isTerminal = (name: string) => /^_*[A-Z]/.test(name)
/** Rule-table keys: rules and terminals apart (Lark tells them by case; names may start with "_"). */
const key = (name: string) => (isTerminal(name) ? `t${name}` : `r${name}`)

interface Definition {
  name: string
  body: Array<Token & {line: number}>
  line: number
}

interface Parsed {
  defs: Definition[]
  /** Imported common names: local name → common name. */
  imports: Map<string, string>
  ignores: Array<Array<Token & {line: number}>>
}

/** Splits the token stream into statements (a newline ends one unless the next line starts with "|" or brackets are open). */
function statements(tokens: Array<Token & {line: number}>): Array<Array<Token & {line: number}>> {
  const out: Array<Array<Token & {line: number}>> = []
  let cur: Array<Token & {line: number}> = []
  let depth = 0
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!
    if (t.k === 'nl') {
      let j = i
      while (tokens[j]?.k === 'nl') j++
      const next = tokens[j]
      if (depth > 0 || (next?.k === 'op' && next.v === '|')) {
        i = j - 1
        continue
      }
      if (cur.length > 0) out.push(cur)
      cur = []
      continue
    }
    if (t.k === 'op' && (t.v === '(' || t.v === '[')) depth++
    if (t.k === 'op' && (t.v === ')' || t.v === ']')) depth = Math.max(0, depth - 1)
    cur.push(t)
  }
  if (cur.length > 0) out.push(cur)
  return out
}

function describeToken(t: Token | undefined): string {
  if (!t) return 'the end of the statement'
  if (t.k === 'nl') return 'a newline'
  if (t.k === 'string') return JSON.stringify(t.v)
  if (t.k === 'regex') return `/${t.v}/`
  return `"${String(t.v)}"`
}

function parseStatements(src: string): Parsed {
  const parsed: Parsed = {defs: [], imports: new Map(), ignores: []}
  for (const st of statements(tokenize(src))) {
    const first = st[0]!
    if (first.k === 'directive') {
      if (first.v === '%import') parseImport(st, parsed)
      else if (first.v === '%ignore') parsed.ignores.push(st.slice(1))
      else throw new GrammarRefusal(`the directive ${first.v} (line ${first.line})`)
      continue
    }
    let i = 0
    if (opIs(st[i], '?') || opIs(st[i], '!')) i++
    const name = st[i]
    if (name?.k !== 'name') throw new GrammarRefusal(`a statement starting with ${describeToken(first)} (line ${first.line})`)
    i++
    if (opIs(st[i], '{')) throw new GrammarRefusal(`the template ${name.v}{...} (line ${name.line})`)
    if (opIs(st[i], '.')) {
      if (st[i + 1]?.k !== 'number') throw new GrammarRefusal(`a priority without a number (line ${name.line})`)
      i += 2
    }
    if (!(opIs(st[i], ':'))) throw new GrammarRefusal(`${describeToken(st[i])} after "${name.v}" where ":" was expected (line ${name.line})`)
    parsed.defs.push({name: name.v, body: st.slice(i + 1), line: name.line})
  }
  return parsed
}

function parseImport(st: Array<Token & {line: number}>, parsed: Parsed): void {
  const line = st[0]!.line
  const path: string[] = []
  let i = 1
  while (st[i]?.k === 'name') {
    path.push((st[i] as {v: string}).v)
    i++
    if (opIs(st[i], '.')) i++
    else break
  }
  if (path[0] !== 'common') throw new GrammarRefusal(`%import of "${path.join('.')}" (only common.NAME is available; line ${line})`)
  if (path.length === 2) {
    let local = path[1]!
    if (opIs(st[i], '->')) {
      if (st[i + 1]?.k !== 'name') throw new GrammarRefusal(`an %import alias without a name (line ${line})`)
      local = (st[i + 1] as {v: string}).v
      i += 2
    }
    if (i !== st.length) throw new GrammarRefusal(`${describeToken(st[i])} in an %import (line ${line})`)
    parsed.imports.set(local, path[1]!)
    return
  }
  if (path.length === 1 && opIs(st[i], '(')) {
    i++
    for (;;) {
      const t = st[i]
      if (t?.k !== 'name') throw new GrammarRefusal(`${describeToken(t)} in an %import list (line ${line})`)
      parsed.imports.set(t.v, t.v)
      i++
      if (opIs(st[i], ',')) i++
      else break
    }
    if (!(opIs(st[i], ')')) || i + 1 !== st.length) throw new GrammarRefusal(`an unclosed %import list (line ${line})`)
    return
  }
  throw new GrammarRefusal(`the %import "${path.join('.')}" (line ${line})`)
}

/** A case-insensitive literal: ASCII letters become two-letter classes. */
function insensitive(s: string): TextNode {
  const items: TextNode[] = []
  for (const ch of s) {
    const lo = ch.toLowerCase()
    const up = ch.toUpperCase()
    if (lo === up) items.push(lit(ch))
    else if (/^[a-z]$/.test(lo)) items.push(cls([[lo.codePointAt(0)!, lo.codePointAt(0)!], [up.codePointAt(0)!, up.codePointAt(0)!]]))
    else throw new GrammarRefusal(`a case-insensitive string with the non-ASCII letter "${ch}"`)
  }
  return seq(items.length === 0 ? [lit('')] : items)
}

/** Expansions of one definition body. `wrapToken` turns each token-level item into what the rule uses. */
class BodyParser {
  private i = 0
  private depth = 0

  constructor(
    private readonly toks: Array<Token & {line: number}>,
    private readonly where: string,
    private readonly refer: (name: string, line: number) => TextNode,
    private readonly wrapToken: (n: TextNode) => TextNode,
  ) {}

  parse(): TextNode {
    const node = this.expansions()
    if (this.i < this.toks.length) throw new GrammarRefusal(`${describeToken(this.toks[this.i])} in ${this.where} (line ${this.toks[this.i]!.line})`)
    return node
  }

  private isOp(v: string, k = 0): boolean {
    const t = this.toks[this.i + k]
    return t?.k === 'op' && t.v === v
  }

  private expansions(): TextNode {
    const branches = [this.alias()]
    while (this.isOp('|')) {
      this.i++
      branches.push(this.alias())
    }
    return alt(branches)
  }

  private alias(): TextNode {
    const items: TextNode[] = []
    while (this.i < this.toks.length && !this.isOp('|') && !this.isOp(')') && !this.isOp(']') && !this.isOp('->')) items.push(this.expr())
    if (this.isOp('->')) {
      if (this.toks[this.i + 1]?.k !== 'name') throw new GrammarRefusal(`an alias "->" without a name in ${this.where}`)
      this.i += 2
    }
    return items.length === 0 ? lit('') : seq(items)
  }

  private expr(): TextNode {
    const a = this.atom()
    const simple: Record<string, [number, number]> = {'?': [0, 1], '*': [0, Infinity], '+': [1, Infinity]}
    const t = this.toks[this.i]
    if (t?.k === 'op' && t.v in simple) {
      this.i++
      return rep(a, simple[t.v]![0], simple[t.v]![1])
    }
    if (this.isOp('~')) {
      const lo = this.toks[this.i + 1]
      if (lo?.k !== 'number') throw new GrammarRefusal(`"~" without a count in ${this.where}`)
      this.i += 2
      let hi = lo.v
      if (this.isOp('..')) {
        const h = this.toks[this.i + 1]
        if (h?.k !== 'number') throw new GrammarRefusal(`"~ n.." without an upper count in ${this.where}`)
        hi = h.v
        this.i += 2
      }
      if (hi < lo.v || hi > 10000) throw new GrammarRefusal(`the repetition ~ ${lo.v}..${hi} in ${this.where}`)
      return rep(a, lo.v, hi)
    }
    return a
  }

  private atom(): TextNode {
    const t = this.toks[this.i++]!
    if (t.k === 'op' && (t.v === '(' || t.v === '[')) {
      if (++this.depth > MAX_GROUP_NESTING) throw new GrammarRefusal(`groups nested more than ${MAX_GROUP_NESTING} levels deep in ${this.where} (line ${t.line})`)
      const inner = this.expansions()
      const close = t.v === '(' ? ')' : ']'
      if (!this.isOp(close)) throw new GrammarRefusal(`an unclosed "${t.v}" in ${this.where} (line ${t.line})`)
      this.i++
      this.depth--
      return t.v === '[' ? rep(inner, 0, 1) : inner
    }
    if (t.k === 'string') {
      if (this.isOp('..')) {
        const hi = this.toks[this.i + 1]
        if (hi?.k !== 'string' || [...t.v].length !== 1 || [...hi.v].length !== 1) throw new GrammarRefusal(`a range ".." that is not between two one-character strings in ${this.where}`)
        this.i += 2
        const a = t.v.codePointAt(0)!
        const b = hi.v.codePointAt(0)!
        if (b < a) throw new GrammarRefusal(`the reversed range "${t.v}".."${hi.v}" in ${this.where}`)
        return this.wrapToken(cls([[a, b]]))
      }
      return this.wrapToken(t.insensitive ? insensitive(t.v) : lit(t.v))
    }
    if (t.k === 'regex') {
      for (const f of t.flags) if (f !== 's' && f !== 'u') throw new GrammarRefusal(`the regex flag "${f}" on /${t.v}/ in ${this.where}`)
      try {
        return this.wrapToken(regexNode(t.v, {dotAll: t.flags.includes('s')}))
      } catch (e) {
        if (e instanceof GrammarRefusal) throw new GrammarRefusal(`${e.construct} (${this.where}, line ${t.line})`)
        throw e
      }
    }
    if (t.k === 'name') {
      if (this.isOp('{')) throw new GrammarRefusal(`the template use ${t.v}{...} in ${this.where}`)
      return this.refer(t.v, t.line)
    }
    throw new GrammarRefusal(`${describeToken(t)} in ${this.where} (line ${t.line})`)
  }
}

/** The rule that stands for any run of ignored tokens. */
const IGNORED = 'ignored'

/**
 * A Lark grammar as a TextGrammar rooted at its `start` rule. Throws GrammarRefusal naming the first
 * construct that cannot be enforced.
 */
export function larkGrammar(src: string): TextGrammar {
  const parsed = parseStatements(src)
  const commonDefs = new Map(parseStatements(LARK_COMMON).defs.map(d => [d.name, d]))
  const defs = new Map<string, Definition>()
  for (const d of parsed.defs) {
    if (defs.has(d.name) || parsed.imports.has(d.name)) throw new GrammarRefusal(`"${d.name}" defined twice (line ${d.line})`)
    defs.set(d.name, d)
  }
  if (!defs.has('start')) throw new GrammarRefusal('a grammar without a "start" rule')
  const rules = new Map<string, TextNode>()
  const hasIgnore = parsed.ignores.length > 0
  const ignored: TextNode = {t: 'ref', rule: IGNORED}
  const pending: Array<{def: Definition; k: string; common: boolean}> = []

  // The rule-table key of a name (queued for compilation on first use); imports resolve into common.
  const resolve = (name: string, line: number, common: boolean): string => {
    let def: Definition | undefined
    let k: string
    if (common) {
      def = commonDefs.get(name)
      if (!def) throw new GrammarRefusal(`%import common.${name} (no such common terminal)`)
      k = `c${name}`
    } else if (defs.has(name)) {
      def = defs.get(name)!
      k = key(name)
    } else if (parsed.imports.has(name)) return resolve(parsed.imports.get(name)!, line, true)
    else throw new GrammarRefusal(`a reference to the undefined ${isTerminal(name) ? 'terminal' : 'rule'} "${name}" (line ${line})`)
    if (!rules.has(k) && !pending.some(p => p.k === k)) pending.push({def, k, common})
    return k
  }
  // Inside a rule, every token (a terminal, a string, a regex) may be preceded by ignored tokens.
  const body = (toks: Array<Token & {line: number}>, where: string, inRule: boolean, common: boolean): TextNode => {
    const token = (n: TextNode) => (hasIgnore && inRule ? seq([ignored, n]) : n)
    const refer = (name: string, line: number): TextNode => {
      const ref: TextNode = {t: 'ref', rule: resolve(name, line, common)}
      return isTerminal(name) ? token(ref) : ref
    }
    return new BodyParser(toks, where, refer, token).parse()
  }

  const startKey = resolve('start', 0, false)
  if (hasIgnore) rules.set(IGNORED, rep(alt(parsed.ignores.map((toks, n) => body(toks, `%ignore #${n + 1}`, false, false))), 0, Infinity))
  while (pending.length > 0) {
    const {def, k, common} = pending.shift()!
    rules.set(k, {t: 'seq', items: []}) // placeholder: marks it compiled (recursion)
    const inRule = !common && !isTerminal(def.name)
    rules.set(k, body(def.body, `${inRule ? 'rule' : 'terminal'} "${def.name}"`, inRule, common))
  }
  if (!hasIgnore) return {rules, root: startKey}
  rules.set('root_', seq([{t: 'ref', rule: startKey}, ignored]))
  return {rules, root: 'root_'}
}
