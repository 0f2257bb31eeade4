// A checked JSON Schema (see schema-policy.ts) as XGrammar EBNF, with numeric bounds written by integer-range.ts
// and number-range.ts instead of XGrammar. Each bounded integer or number is swapped for a one-value enum of a
// unique sentinel number before XGrammar converts the schema; the sentinel's literal in the EBNF is then replaced
// by the exact range expression. Property names that JSON escapes (`"`, `\`, control characters) are swapped for
// sentinel names the same way: XGrammar writes names into its EBNF unescaped, so such a name failed to compile
// (`"`, `\`, a newline) or made the grammar write a raw tab or control character, which is not JSON. Strings with
// length bounds are swapped for sentinels too and written by string-length.ts.
import {integerRangeEbnf} from './integer-range.js'
import {numberRangeEbnf} from './number-range.js'
import {boundedStringEbnf} from './string-length.js'
import {xgrammar} from '../xgrammar.js'

type Schema = Record<string, unknown>

/** Whitespace in generated JSON: none beyond ", " and ": " (fewer tokens, nothing to wander in). */
export const SEPARATORS: [string, string] = [', ', ': ']

/** Keys whose values are data (instances), not subschemas: never rewritten. */
const DATA_KEYS = new Set(['const', 'enum', 'default', 'examples'])

/** Keys a bounded integer or number may carry and still be replaced whole (everything else stays with XGrammar). */
const NUMERIC_KEYS = new Set([
  'type', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'title', 'description', '$comment', 'deprecated', 'readOnly', 'writeOnly',
  'nullable', 'default', 'examples',
])

/**
 * An integer or number without bounds, as Splash writes it in place of XGrammar's own (which lets digits run on, so a
 * looping model can write a value JSON.parse reads as Infinity, which no JSON Schema validator takes): at most 20
 * integer digits (every 64-bit integer), up to 20 fraction digits and a two-digit exponent, so every value parses to
 * a finite double.
 */
export const UNBOUNDED_INTEGER_EBNF = '( "0" | "-"? [1-9] [0-9]{0,19} )'
export const UNBOUNDED_NUMBER_EBNF = '( "-"? ( "0" | [1-9] [0-9]{0,19} ) ( "." [0-9]{1,20} )? ( [eE] [+-]? [0-9]{1,2} )? )'

/** Sentinels start here (16 digits, below 2^53); one that occurs in the schema's text is skipped. */
const SENTINEL_BASE = 7351924086000000

/** The EBNF (root rule `root`) of a checked JSON Schema, compact separators, strict mode. */
export async function jsonSchemaEbnf(schema: Schema | boolean): Promise<string> {
  const text = JSON.stringify(schema)
  const ranges = new Map<string, string>()
  let next = SENTINEL_BASE
  const sentinel = (range: string): number => {
    while (text.includes(String(next))) next++
    const n = next++
    ranges.set(`"${n}"`, range)
    return n
  }
  const names = new Map<string, string>() // property name → its sentinel name
  let nextName = 0
  const sentinelName = (name: string): string => {
    let n = names.get(name)
    if (n === undefined) {
      do n = `splash_key_${nextName++}`
      while (text.includes(n))
      names.set(name, n)
    }
    return n
  }
  const rules = new Set<string>()
  const rewritten = rewrite(schema, {sentinel, name: sentinelName, rules})
  let ebnf = await xgrammar().Testings._jsonSchemaToEBNF(JSON.stringify(rewritten), false, -1, SEPARATORS, true)
  for (const [literal, expr] of ranges) ebnf = ebnf.split(literal).join(expr)
  if (rules.size > 0) ebnf = `${ebnf.trimEnd()}\n${[...rules].join('\n')}\n`
  for (const [name, n] of names) {
    // XGrammar writes a property name as the EBNF literal "\"NAME\"": the JSON text of the name, escaped for EBNF
    ebnf = ebnf.split(`\\"${n}\\"`).join(ebnfEscape(JSON.stringify(name)))
    if (ebnf.includes(n)) throw new Error(`the property name ${JSON.stringify(name)} cannot be written by the grammar engine`)
  }
  return limitBasicNumbers(ebnf)
}

/** A property name JSON writes with escapes (XGrammar would write it raw). */
function needsEscape(name: string): boolean {
  return JSON.stringify(name) !== `"${name}"`
}

/** Text as the inside of an EBNF string literal. */
function ebnfEscape(text: string): string {
  return text.replace(/[\\"]/g, c => `\\${c}`)
}

/** XGrammar's rules for numbers inside untyped values (basic_integer, basic_number) with the digit limits above. */
function limitBasicNumbers(ebnf: string): string {
  return ebnf
    .split('\n')
    .map(line =>
      line.startsWith('basic_integer ::= ') ? `basic_integer ::= ${UNBOUNDED_INTEGER_EBNF}` : line.startsWith('basic_number ::= ') ? `basic_number ::= ${UNBOUNDED_NUMBER_EBNF}` : line,
    )
    .join('\n')
}

interface Sentinels {
  /** A unique number standing for an expression written in its place (a numeric range, a bounded string). */
  sentinel: (range: string) => number
  /** The name standing for a property name that needs escapes (the same name for the same text). */
  name: (name: string) => string
  /** Rules the replaced expressions refer to, added to the grammar once each. */
  rules: Set<string>
}

function rewrite(node: unknown, to: Sentinels): unknown {
  if (Array.isArray(node)) return node.map(n => rewrite(n, to))
  if (typeof node !== 'object' || node === null) return node
  const s = node as Schema
  const bounded = boundedNumeric(s)
  if (bounded) {
    const value = {enum: [to.sentinel(bounded.range)]}
    return bounded.others.length === 0 ? value : {anyOf: [value, ...bounded.others.map(type => ({type}))]}
  }
  const text = boundedString(s)
  if (text) {
    const written = boundedStringEbnf(text.min, text.max)
    for (const rule of written.rules) to.rules.add(rule)
    const value = {enum: [to.sentinel(written.expr)]}
    return text.others.length === 0 ? value : {anyOf: [value, ...text.others.map(type => ({type}))]}
  }
  const key = (name: string) => (needsEscape(name) ? to.name(name) : name)
  const out: Schema = {}
  for (const [k, v] of Object.entries(s)) {
    if (DATA_KEYS.has(k)) out[k] = v
    else if (k === 'properties' && typeof v === 'object' && v !== null && !Array.isArray(v))
      out[k] = Object.fromEntries(Object.entries(v).map(([name, sub]) => [key(name), rewrite(sub, to)]))
    else if (k === 'required' && Array.isArray(v)) out[k] = v.map(name => (typeof name === 'string' ? key(name) : name))
    else if (k === '$ref' && typeof v === 'string') out[k] = renameInPointer(v, key)
    else out[k] = rewrite(v, to)
  }
  return out
}

/** A local pointer whose segments after `properties` are renamed like the property names they point through. */
function renameInPointer(ref: string, key: (name: string) => string): string {
  if (!ref.startsWith('#/')) return ref
  const parts = ref.slice(2).split('/')
  return (
    '#/' +
    parts
      .map((raw, i) => {
        if (i === 0 || parts[i - 1] !== 'properties') return raw
        const name = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~')
        const renamed = key(name)
        return renamed === name ? raw : renamed
      })
      .join('/')
  )
}

/** Keys a string with length bounds may carry and still be replaced whole. */
const STRING_KEYS = new Set([
  'type', 'minLength', 'maxLength', 'title', 'description', '$comment', 'deprecated', 'readOnly', 'writeOnly', 'nullable', 'default', 'examples',
])

/**
 * A string schema with length bounds (checked schemas carry them only without pattern or format): the bounds and
 * its other allowed types, or undefined when it has none. An untyped node with bounds is written as a string.
 */
function boundedString(s: Schema): {min: number; max: number | undefined; others: string[]} | undefined {
  const min = typeof s.minLength === 'number' ? s.minLength : 0
  const max = typeof s.maxLength === 'number' ? s.maxLength : undefined
  if (min === 0 && max === undefined) return undefined
  const types = typeof s.type === 'string' ? [s.type] : Array.isArray(s.type) ? s.type.filter((t): t is string => typeof t === 'string') : []
  if (types.length > 0 && !types.includes('string')) return undefined
  if (!Object.keys(s).every(k => STRING_KEYS.has(k))) throw new Error('string lengths next to other keywords (enum, const, anyOf …) cannot be enforced')
  return {min, max, others: types.filter(t => t !== 'string')}
}

/**
 * An integer or number schema: its range and its other allowed types (undefined when XGrammar writes it: a node that
 * is not numeric, or an unbounded one next to other keywords). Without bounds, the digit-limited UNBOUNDED_* forms.
 * XGrammar's own integer ranges are wrong for some bounds and it bounds no other number, so a bounded node that
 * cannot be replaced whole (next to enum, const, anyOf …, or typed both integer and number) is refused (a 400).
 * Checked schemas always carry both sides (schema-policy.ts), integers inclusive.
 */
function boundedNumeric(s: Schema): {range: string; others: string[]} | undefined {
  const types = typeof s.type === 'string' ? [s.type] : Array.isArray(s.type) ? s.type.filter((t): t is string => typeof t === 'string') : []
  const integer = types.includes('integer')
  const number = types.includes('number')
  if (!['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].some(k => typeof s[k] === 'number')) {
    // no bounds: digits limited (UNBOUNDED_*) where the node can be replaced whole, else XGrammar's own as before
    if (integer === number || !Object.keys(s).every(k => NUMERIC_KEYS.has(k))) return undefined
    return {range: integer ? UNBOUNDED_INTEGER_EBNF : UNBOUNDED_NUMBER_EBNF, others: types.filter(t => t !== 'integer' && t !== 'number')}
  }
  if (!integer && !number) return undefined // bounds on no numeric type constrain nothing
  if (integer && number) throw new Error('bounds on a value that may be an integer or a number cannot be enforced')
  if (!Object.keys(s).every(k => NUMERIC_KEYS.has(k))) throw new Error('numeric bounds next to other keywords (enum, const, anyOf …) cannot be enforced')
  const side = (inclusive: unknown, exclusive: unknown) =>
    typeof exclusive === 'number' ? {value: exclusive, strict: true} : typeof inclusive === 'number' ? {value: inclusive, strict: false} : undefined
  const lo = side(s.minimum, s.exclusiveMinimum)
  const hi = side(s.maximum, s.exclusiveMaximum)
  if (!lo || !hi || !Number.isFinite(lo.value) || !Number.isFinite(hi.value) || lo.value > hi.value) throw new Error('numeric bounds need both sides, finite and in order')
  const others = types.filter(t => t !== 'integer' && t !== 'number')
  if (integer) {
    if (lo.strict || hi.strict || !Number.isSafeInteger(lo.value) || !Number.isSafeInteger(hi.value)) throw new Error('integer bounds must be inclusive safe integers')
    return {range: integerRangeEbnf(lo.value, hi.value), others}
  }
  const range = numberRangeEbnf(lo, hi)
  if (range === undefined) throw new Error('no decimal number satisfies the bounds')
  return {range, others}
}
