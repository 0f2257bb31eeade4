// A checked JSON Schema (see schema-policy.ts) as XGrammar EBNF, with integer bounds written by
// integer-range.ts instead of XGrammar. Each bounded integer is swapped for a one-value enum of a
// unique sentinel number before XGrammar converts the schema; the sentinel's literal in the EBNF is
// then replaced by the exact range expression.
import {integerRangeEbnf} from './integer-range.js'
import {xgrammar} from './xgrammar.js'

type Schema = Record<string, unknown>

/** Whitespace in generated JSON: none beyond ", " and ": " (fewer tokens, nothing to wander in). */
export const SEPARATORS: [string, string] = [', ', ': ']

/** Keys whose values are data (instances), not subschemas: never rewritten. */
const DATA_KEYS = new Set(['const', 'enum', 'default', 'examples'])

/** Keys a bounded integer may carry and still be replaced whole (everything else stays with XGrammar). */
const INTEGER_KEYS = new Set(['type', 'minimum', 'maximum', 'title', 'description', '$comment', 'deprecated', 'readOnly', 'writeOnly', 'nullable', 'default', 'examples'])

/** Sentinels start here (16 digits, below 2^53); one that occurs in the schema's text is skipped. */
const SENTINEL_BASE = 7351924086000000

/** The EBNF (root rule `root`) of a checked JSON Schema, compact separators, strict mode. */
export async function jsonSchemaEbnf(schema: Schema | boolean): Promise<string> {
  const text = JSON.stringify(schema)
  const ranges = new Map<string, string>()
  let next = SENTINEL_BASE
  const sentinel = (lo: number, hi: number): number => {
    while (text.includes(String(next))) next++
    const n = next++
    ranges.set(`"${n}"`, integerRangeEbnf(lo, hi))
    return n
  }
  const rewritten = rewrite(schema, sentinel)
  let ebnf = await xgrammar().Testings._jsonSchemaToEBNF(JSON.stringify(rewritten), false, -1, SEPARATORS, true)
  for (const [literal, expr] of ranges) ebnf = ebnf.split(literal).join(expr)
  return ebnf
}

function rewrite(node: unknown, sentinel: (lo: number, hi: number) => number): unknown {
  if (Array.isArray(node)) return node.map(n => rewrite(n, sentinel))
  if (typeof node !== 'object' || node === null) return node
  const s = node as Schema
  const bounded = boundedInteger(s)
  if (bounded) {
    const value = {enum: [sentinel(bounded.lo, bounded.hi)]}
    return bounded.others.length === 0 ? value : {anyOf: [value, ...bounded.others.map(type => ({type}))]}
  }
  const out: Schema = {}
  for (const [k, v] of Object.entries(s)) out[k] = DATA_KEYS.has(k) ? v : rewrite(v, sentinel)
  return out
}

/** An integer schema with both bounds and nothing else that constrains it (its other allowed types). */
function boundedInteger(s: Schema): {lo: number; hi: number; others: string[]} | undefined {
  if (typeof s.minimum !== 'number' || typeof s.maximum !== 'number') return undefined
  if (!Number.isSafeInteger(s.minimum) || !Number.isSafeInteger(s.maximum) || s.minimum > s.maximum) return undefined
  const types = typeof s.type === 'string' ? [s.type] : Array.isArray(s.type) ? s.type : []
  if (!types.includes('integer') || !types.every(t => typeof t === 'string')) return undefined
  if (!Object.keys(s).every(k => INTEGER_KEYS.has(k))) return undefined
  return {lo: s.minimum, hi: s.maximum, others: (types as string[]).filter(t => t !== 'integer')}
}
