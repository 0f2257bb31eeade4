// Which JSON Schema keywords constrained decoding enforces, checked before anything is compiled. XGrammar
// (0.1.27) accepts many keywords it does not enforce, or enforces wrongly; each rule below comes from
// random walks over its token masks validated with ajv (docs/structured-output.md). A schema
// using anything else is refused with a 400 naming the keyword and where it is: output is never
// silently less constrained than asked. Some keywords are rewritten into forms XGrammar does enforce
// (numeric bounds made two-sided, some formats into patterns); the grammar of a numeric range is then written by
// integer-range.ts / number-range.ts and that of a string with length bounds by string-length.ts, not XGrammar
// (json-ebnf.ts).
import {errors} from '../errors.js'
import {jsonSafePattern} from './json/json-pattern.js'
import {patternSpan} from './text/pattern-span.js'

type Schema = Record<string, unknown>

/** Keywords that only annotate; they constrain nothing, so ignoring them is exact. */
const ANNOTATIONS = new Set([
  'title', 'description', 'default', 'examples', '$comment', '$schema', '$id', '$anchor', 'deprecated', 'readOnly', 'writeOnly', 'nullable',
  'contentMediaType', 'contentEncoding', 'strict', 'name',
  // OpenAPI's annotations (Pydantic writes `discriminator` beside a tagged union's oneOf)
  'discriminator', 'example', 'externalDocs', 'xml',
])

/** Keywords enforced as they are. */
const ENFORCED = new Set([
  'type', 'enum', 'const', 'anyOf', 'oneOf', '$ref', '$defs', 'definitions', 'properties', 'required', 'additionalProperties',
  'patternProperties', 'minProperties', 'maxProperties', 'items', 'prefixItems', 'minItems', 'maxItems', 'pattern', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minLength', 'maxLength',
])

/** Formats XGrammar enforces exactly (ajv-formats agrees on every output). */
const NATIVE_FORMATS = new Set(['uuid', 'duration'])

const DAY = '(0[1-9]|1[0-9]|2[0-8])'
const DATE = `[0-9]{4}-((0[1-9]|1[0-2])-${DAY}|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)`
const TIME = '([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])'
const OCTET = '(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])'
// email: a dot-atom local part and a dotted host name (ajv-formats' full pattern), no quoted local part or address literal
const ATEXT = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]"
const LABEL = '[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?'
// uri: RFC 3986 characters; a scheme, then an authority and path, an absolute path or a rootless one, never nothing;
// uri-reference: the scheme optional, the rest may be empty
const PCT = '%[0-9A-Fa-f][0-9A-Fa-f]'
const URI_CHAR = (extra: string) => `([A-Za-z0-9._~!$&'()*+,;=${extra}-]|${PCT})`
const SEGMENT = `${URI_CHAR(':@')}*`
const URI_TAIL = `(\\?${URI_CHAR(':@/?')}*)?(#${URI_CHAR(':@/?')}*)?`
const URI_SCHEME = '[A-Za-z][A-Za-z0-9+.-]*'
const URI_AUTHORITY = `//(${URI_CHAR(':')}*@)?${URI_CHAR('')}*(:[0-9]*)?(/${SEGMENT})*`
const URI_PATH = `/(${URI_CHAR(':@')}+(/${SEGMENT})*)?|${URI_CHAR(':@')}+(/${SEGMENT})*`
// ipv6: the eight hexadecimal forms (no embedded IPv4 tail)
const H16 = '[0-9A-Fa-f]{1,4}'
const IPV6 = [
  `(${H16}:){7}(${H16}|:)`,
  ...[6, 5, 4, 3, 2, 1].map(n => `(${H16}:){${n}}((:${H16}){1,${7 - n}}|:)`),
  `:((:${H16}){1,7}|:)`,
].join('|')

/**
 * Formats XGrammar gets wrong (31 November, minute 60, octets with leading zeros; quoted email local parts and
 * hosts without a dot, URIs with nothing after the scheme, IPv4 tails with leading zeros in IPv6; its uri-reference
 * takes no scheme at all) enforced instead
 * as patterns that accept a subset of the valid values: 29 February is never produced, nor leap seconds, address
 * literals, or IPv6 with an IPv4 tail.
 */
const FORMAT_PATTERNS: Record<string, string> = {
  date: `^${DATE}$`,
  time: `^${TIME}$`,
  'date-time': `^${DATE}T${TIME}$`,
  ipv4: `^(${OCTET}\\.){3}${OCTET}$`,
  // the dot-atom as one loop (a character, or a dot and a character): the same strings as ATOM(\.ATOM)*, whose
  // group repetition left XGrammar 0.1–0.2 ms a mask after the first dot against 0.005 ms (docs/structured-output.md)
  email: `^${ATEXT}(${ATEXT}|\\.${ATEXT})*@(${LABEL}\\.)+${LABEL}$`,
  uri: `^${URI_SCHEME}:(${URI_AUTHORITY}|${URI_PATH})${URI_TAIL}$`,
  'uri-reference': `^(${URI_SCHEME}:)?(${URI_AUTHORITY}|${URI_PATH})?${URI_TAIL}$`,
  ipv6: `^(${IPV6})$`,
  // base64 (ajv-formats' pattern)
  byte: '^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$',
}

const MAX_SAFE = Number.MAX_SAFE_INTEGER

/** A string length no generated text reaches (see strings()). */
const UNREACHABLE_LENGTH = 1e12
/** An item or property count no generated text reaches (see counts()). */
const UNREACHABLE_COUNT = 2 ** 31 - 1

/**
 * Deepest nesting of subschemas, and of groups in a pattern. XGrammar (wasm) recurses on both and, past its stack
 * (objects nested ~55 deep, arrays ~65, groups ~300 here), traps in a way that leaves its instance unusable for
 * every later grammar; well under that, and deeper than any real schema.
 */
export const MAX_NESTING = 32

/**
 * Most subschemas in one schema. XGrammar compiles on the serving thread, where every other stream waits for it, in
 * time that grows faster than the schema: 128 / 256 / 512 properties took 0.4 / 1.3 / 4.5–4.9 s here, four objects of
 * 256 took 23 s, and one object of 2,000 optional properties 85 s before it trapped. A compiled schema is cached.
 */
export const MAX_SUBSCHEMAS = 512

/** The values of `type`. */
const JSON_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'])

/** What a walk carries: the root (for $ref) and how many subschemas it has seen. */
interface Walk {
  root: Schema
  nodes: number
}

function refuse(keyword: string, path: string, why: string): never {
  throw errors.invalidRequest(`JSON Schema keyword "${keyword}" at ${path || '/'} cannot be enforced: ${why}`, keyword, 'unsupported_schema')
}

function isSchema(v: unknown): v is Schema {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function typesOf(s: Schema): string[] {
  if (typeof s.type === 'string') return [s.type]
  if (Array.isArray(s.type)) return s.type.filter((t): t is string => typeof t === 'string')
  return []
}

/**
 * Checks a schema and returns the form to compile (a copy; the input is not changed). Throws a 400
 * SplashError naming the first keyword that cannot be enforced.
 */
export function enforceableSchema(schema: unknown, param: string): Schema | boolean {
  if (typeof schema === 'boolean') return schema
  if (!isSchema(schema)) throw errors.invalidRequest('The JSON Schema must be an object', param)
  return walk(schema, '', {root: schema, nodes: 0}, 0)
}

function walk(s: Schema, path: string, w: Walk, depth: number): Schema {
  // `{allOf: [X]}` beside annotations and definitions only (Pydantic's wrapper for a described $ref) is X itself
  const only = Array.isArray(s.allOf) && s.allOf.length === 1 ? s.allOf[0] : undefined
  if (isSchema(only) && Object.keys(s).every(k => k === 'allOf' || ANNOTATIONS.has(k) || k === '$defs' || k === 'definitions') && !Object.keys(only).some(k => Object.hasOwn(s, k))) {
    const {allOf: _, ...notes} = s
    return walk({...notes, ...only}, path, w, depth)
  }
  const root = w.root
  const out: Schema = {}
  const types = typesOf(s)
  for (const [key, value] of Object.entries(s)) {
    const at = `${path}/${key}`
    if (ANNOTATIONS.has(key)) {
      if (key !== '$id' || path === '') out[key] = value
      else refuse(key, at, 'only the root schema may set $id')
      continue
    }
    // `uniqueItems: false` (OpenAPI generators write it) says what holds anyway
    if (key === 'uniqueItems' && value === false) continue
    if (!ENFORCED.has(key)) refuse(key, path, whyUnsupported(key))
    out[key] = value
  }
  for (const key of ['properties', 'patternProperties', '$defs', 'definitions'] as const) {
    if (s[key] === undefined) continue
    if (!isSchema(s[key])) refuse(key, path, 'it must be an object of schemas')
    out[key] = Object.fromEntries(Object.entries(s[key] as Schema).map(([name, sub]) => [name, child(sub, `${path}/${key}/${name}`, key, w, depth)]))
  }
  for (const key of ['additionalProperties', 'items'] as const) {
    if (s[key] !== undefined && typeof s[key] !== 'boolean') out[key] = child(s[key], `${path}/${key}`, key, w, depth)
  }
  for (const key of ['anyOf', 'oneOf', 'prefixItems'] as const) {
    if (s[key] === undefined) continue
    if (!Array.isArray(s[key]) || (s[key] as unknown[]).length === 0) refuse(key, path, 'it must be a non-empty array of schemas')
    out[key] = (s[key] as unknown[]).map((sub, i) => child(sub, `${path}/${key}/${i}`, key, w, depth))
  }
  if (s.oneOf !== undefined && !branchesDisjoint(s.oneOf as unknown[], root)) {
    refuse('oneOf', path, 'its branches may overlap (only anyOf semantics can be enforced; use anyOf, or branches that differ by type or by a required const/enum property)')
  }
  if (s.$ref !== undefined && (typeof s.$ref !== 'string' || !(s.$ref === '#' || s.$ref.startsWith('#/')))) {
    refuse('$ref', path, 'only references inside the schema ("#" or "#/...") are supported')
  }
  if (s.$ref !== undefined && typeof s.$ref === 'string' && resolvePointer(root, s.$ref) === undefined) {
    refuse('$ref', path, `"${s.$ref}" does not resolve`)
  }
  for (const key of ['enum', 'const'] as const) {
    // 1e400 parses to Infinity, which JSON writes as null: the grammar would produce a value the schema refuses
    if (s[key] !== undefined && !finiteData(s[key])) refuse(key, path, 'it holds a number too large for a double (JSON would write it as null)')
  }
  if (s.enum !== undefined && (!Array.isArray(s.enum) || s.enum.length === 0)) refuse('enum', path, 'it must be a non-empty array')
  if (s.required !== undefined && (!Array.isArray(s.required) || s.required.some(r => typeof r !== 'string'))) {
    refuse('required', path, 'it must be an array of property names (strings)')
  }
  if (s.type !== undefined) {
    const listed = Array.isArray(s.type) ? s.type : [s.type]
    const bad = listed.find(t => typeof t !== 'string' || !JSON_TYPES.has(t))
    if (bad !== undefined || listed.length === 0) refuse('type', path, `${listed.length === 0 ? 'an empty list' : JSON.stringify(bad)} is not a JSON Schema type (${[...JSON_TYPES].join(', ')})`)
  }
  const n = numericFormat(s, out, types)
  numbers(n, out, path, typesOf(n))
  strings(n, out, path)
  counts(out, path)
  objects(out, path)
  openContainers(out)
  return out
}

/**
 * Item and property counts: non-negative integers, the minimum at most the maximum. A count of 2^31 − 1 or more is
 * past any output (more than 6·10^9 characters with the ", " between members, against a context under 2^24 tokens
 * of a few hundred characters at most) and past XGrammar's 32-bit counts (it aborted on `maxProperties: 2^31`): such
 * a maximum bounds nothing and goes, such a minimum is a 400.
 */
function counts(out: Schema, path: string): void {
  for (const [lo, hi] of [['minItems', 'maxItems'], ['minProperties', 'maxProperties']] as const) {
    const min = count(out, lo, path)
    const max = count(out, hi, path)
    if (max !== undefined && max >= UNREACHABLE_COUNT) delete out[hi]
    if (min !== undefined && min >= UNREACHABLE_COUNT) refuse(lo, path, 'no output can hold that many')
    if (min !== undefined && max !== undefined && min > max) refuse(lo, path, `${lo} is above ${hi}`)
  }
}

/** `s[key]` when it is a non-negative integer, undefined when absent; anything else is a 400. */
function count(s: Schema, key: string, path: string): number | undefined {
  const v = s[key]
  if (v !== undefined && (typeof v !== 'number' || !Number.isInteger(v) || v < 0)) refuse(key, path, 'it must be a non-negative integer')
  return v as number | undefined
}

/**
 * XGrammar aborted on a lower bound over unconstrained members: `{type: "array", minItems: 1}` (also beside
 * `prefixItems`) and `{type: "object", minProperties: 1}`, common schemas that came back as a 400; and with an upper
 * bound alone it took no member at all: `{type: "array", maxItems: 5}` allowed only `[]`, `{type: "object",
 * maxProperties: 5}` only `{}`. Their members are any value, which the explicit `items: true` /
 * `additionalProperties: true` says in a form it compiles.
 */
function openContainers(out: Schema): void {
  if ((out.minItems !== undefined || out.maxItems !== undefined) && out.items === undefined) out.items = true
  const named = out.properties !== undefined || out.patternProperties !== undefined
  if ((out.minProperties !== undefined || out.maxProperties !== undefined) && out.additionalProperties === undefined && !named) out.additionalProperties = true
}

/** True when every number inside `v` is finite. */
function finiteData(v: unknown): boolean {
  const stack = [v]
  while (stack.length > 0) {
    const x = stack.pop()
    if (typeof x === 'number' && !Number.isFinite(x)) return false
    if (x !== null && typeof x === 'object') stack.push(...Object.values(x))
  }
  return true
}

/** OpenAPI's formats (ajv-formats' meaning), on numbers and on strings that they do not constrain. */
const INT32: [number, number] = [-(2 ** 31), 2 ** 31 - 1]
const NUMERIC_FORMATS = new Set(['int32', 'int64', 'float', 'double'])
const FREE_FORMATS = new Set(['password', 'binary'])

/**
 * The schema with an OpenAPI format turned into what enforces it: int32 / int64 make the value an integer (int32 also
 * bounds it), float / double and the string formats password / binary constrain nothing (their annotations go).
 */
function numericFormat(s: Schema, out: Schema, types: string[]): Schema {
  const f = s.format
  if (typeof f !== 'string' || !(NUMERIC_FORMATS.has(f) || FREE_FORMATS.has(f))) return s
  const n: Schema = {...s}
  delete n.format
  delete out.format
  if (f === 'int32' || f === 'int64') {
    // on "number" too: ajv-formats holds the value to an integer
    const t = types.map(x => (x === 'number' ? 'integer' : x))
    if (t.length > 0) n.type = out.type = typeof s.type === 'string' ? t[0] : [...new Set(t)]
    if (f === 'int32' && t.includes('integer')) {
      n.minimum = Math.max(typeof s.minimum === 'number' ? s.minimum : -Infinity, INT32[0])
      n.maximum = Math.min(typeof s.maximum === 'number' ? s.maximum : Infinity, INT32[1])
    }
  }
  return n
}

/**
 * Object keys, where XGrammar lets declared names through its other branches: with declared properties beside
 * `additionalProperties` (true or a schema), it wrote `{"a": "x"}` for an integer `a` (the additional branch took a
 * declared name), and it ignores required names that `properties` does not declare (`{}` for `required: ["b"]`).
 * So: a required name not declared becomes a declared property (its schema: the one patternProperties entry it matches,
 * else additionalProperties', any value when that is absent or true); a declared name that a patternProperties entry
 * also matches would need both schemas (an intersection) and is refused; an object with declared names produces
 * only those (XGrammar drops `required` beside patternProperties), one with patterns alone only keys they match
 * (additionalProperties false: in both, a subset of what the schema allows).
 */
function objects(out: Schema, path: string): void {
  const props = isSchema(out.properties) ? {...(out.properties as Schema)} : {}
  const patterns = isSchema(out.patternProperties) ? Object.entries(out.patternProperties as Schema) : []
  const required = Array.isArray(out.required) ? out.required : []
  if (out.required !== undefined && !required.every(r => typeof r === 'string')) refuse('required', path, 'it must be an array of names')
  const matching = (name: string) =>
    patterns.filter(([p]) => {
      try {
        return new RegExp(p, 'u').test(name)
      } catch {
        return refuse('patternProperties', path, `"${p}" is not a regular expression`)
      }
    })
  for (const name of Object.keys(props)) {
    const m = matching(name)
    if (m.length > 0) refuse('patternProperties', path, `the declared property "${name}" also matches "${m[0]![0]}", so both schemas would apply (an intersection)`)
  }
  const additional = out.additionalProperties
  for (const name of required as string[]) {
    if (Object.hasOwn(props, name)) continue
    const m = matching(name)
    if (m.length > 1) refuse('required', path, `"${name}" matches several patternProperties, so all their schemas would apply (an intersection)`)
    if (m.length === 0 && additional === false) refuse('required', path, `"${name}" is required but additionalProperties is false and no property or pattern declares it`)
    // defined, not assigned: a name such as "__proto__" is a key like any other
    Object.defineProperty(props, name, {value: m.length === 1 ? m[0]![1] : additional === undefined || additional === true ? {} : additional, enumerable: true, writable: true, configurable: true})
  }
  if (Object.keys(props).length === 0 && patterns.length === 0) return
  if (Object.keys(props).length > 0) {
    // beside patternProperties XGrammar drops `required` (it wrote {} for a required declared name), so an object
    // with declared names keeps to them: keys the patterns would add are not produced (a subset)
    out.properties = props
    delete out.patternProperties
  } else {
    if (out.properties !== undefined) out.properties = props
    out.patternProperties = Object.fromEntries(patterns.map(([p, sub]) => [jsonSafePattern(p, why => refuse('patternProperties', path, why)), sub]))
  }
  out.additionalProperties = false
}

function child(sub: unknown, path: string, key: string, w: Walk, depth: number): Schema | boolean {
  if (typeof sub === 'boolean') return sub
  if (!isSchema(sub)) refuse(key, path, 'it must hold schemas')
  if (depth >= MAX_NESTING) refuse(key, path, `subschemas nested more than ${MAX_NESTING} levels deep are not supported`)
  if (++w.nodes > MAX_SUBSCHEMAS) {
    refuse(key, path, `the schema holds more than ${MAX_SUBSCHEMAS} subschemas (properties, items, branches); the grammar engine would take many seconds to compile it`)
  }
  return walk(sub, path, w, depth + 1)
}

/** How deep a regex nests its groups (escapes and character classes skipped). */
function groupDepth(pattern: string): number {
  let depth = 0
  let max = 0
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i]
    if (c === '\\') i++
    else if (inClass) inClass = c !== ']'
    else if (c === '[') inClass = true
    else if (c === '(') max = Math.max(max, ++depth)
    else if (c === ')') depth--
  }
  return max
}

function whyUnsupported(key: string): string {
  switch (key) {
    case 'multipleOf':
      return 'the grammar engine ignores it'
    case 'uniqueItems':
    case 'contains':
    case 'minContains':
    case 'maxContains':
      return 'array element relations are not expressible in the grammar'
    case 'allOf':
    case 'not':
    case 'if':
    case 'then':
    case 'else':
      return 'schema intersection and negation are not supported by the grammar engine'
    case 'dependentRequired':
    case 'dependentSchemas':
    case 'dependencies':
    case 'propertyNames':
    case 'unevaluatedProperties':
    case 'unevaluatedItems':
      return 'the grammar engine does not enforce it'
    default:
      return 'it is not a keyword the grammar engine supports'
  }
}

/**
 * Numeric bounds on "integer" or "number" (alone or with "null"). Both sides are always set (a missing one becomes
 * ±(2^53−1)) and the grammar of the range is written by integer-range.ts / number-range.ts (json-ebnf.ts), not
 * XGrammar (its integer ranges are wrong for some bounds, and it does not bound other numbers). Integers: exclusive
 * bounds become inclusive. Numbers keep exclusive bounds as they are (the range's decimals then leave the bound out).
 */
function numbers(s: Schema, out: Schema, path: string, types: string[]): void {
  const keys = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum'].filter(k => s[k] !== undefined)
  if (keys.length === 0) return
  for (const k of keys) if (typeof s[k] !== 'number' || !Number.isFinite(s[k])) refuse(k, path, 'it must be a finite number')
  const numeric = types.filter(t => t !== 'null')
  if (numeric.length !== 1 || (numeric[0] !== 'integer' && numeric[0] !== 'number')) {
    refuse(keys[0]!, path, 'numeric ranges are enforced on "type": "integer" or "number" alone (or with "null")')
  }
  delete out.exclusiveMinimum
  delete out.exclusiveMaximum
  if (numeric[0] === 'number') {
    // the tighter of each side's inclusive and exclusive bound
    let lo = {value: -MAX_SAFE, strict: false}
    let hi = {value: MAX_SAFE, strict: false}
    if (typeof s.minimum === 'number' && s.minimum > lo.value) lo = {value: s.minimum, strict: false}
    if (typeof s.exclusiveMinimum === 'number' && s.exclusiveMinimum >= lo.value) lo = {value: s.exclusiveMinimum, strict: true}
    if (typeof s.maximum === 'number' && s.maximum < hi.value) hi = {value: s.maximum, strict: false}
    if (typeof s.exclusiveMaximum === 'number' && s.exclusiveMaximum <= hi.value) hi = {value: s.exclusiveMaximum, strict: true}
    if (lo.value > hi.value || (lo.value === hi.value && (lo.strict || hi.strict))) refuse(keys[0]!, path, 'no number satisfies the bounds')
    delete out.minimum
    delete out.maximum
    out[lo.strict ? 'exclusiveMinimum' : 'minimum'] = lo.value
    out[hi.strict ? 'exclusiveMaximum' : 'maximum'] = hi.value
    return
  }
  let lo = -MAX_SAFE
  let hi = MAX_SAFE
  if (typeof s.minimum === 'number') lo = Math.max(lo, Math.ceil(s.minimum))
  if (typeof s.exclusiveMinimum === 'number') lo = Math.max(lo, Math.floor(s.exclusiveMinimum) + 1)
  if (typeof s.maximum === 'number') hi = Math.min(hi, Math.floor(s.maximum))
  if (typeof s.exclusiveMaximum === 'number') hi = Math.min(hi, Math.ceil(s.exclusiveMaximum) - 1)
  if (lo > hi) refuse(keys[0]!, path, 'no integer satisfies the bounds')
  out.minimum = lo
  out.maximum = hi
}

/**
 * Strings: patterns narrowed to what a JSON string holds raw (json-pattern.ts); formats
 * natively or as patterns; minLength / maxLength kept, alone with the type and annotations, for json-ebnf.ts to
 * write (string-length.ts; XGrammar's own length bound lets raw control characters through). Lengths on a node
 * that cannot be a string constrain nothing and are dropped.
 */
function strings(s: Schema, out: Schema, path: string): void {
  let pattern = typeof s.pattern === 'string' ? s.pattern : undefined
  if (s.pattern !== undefined && pattern === undefined) refuse('pattern', path, 'it must be a string')
  if (pattern !== undefined) {
    if (groupDepth(pattern) > MAX_NESTING) refuse('pattern', path, `groups nested more than ${MAX_NESTING} levels deep are not supported`)
    // jsonSafePattern refuses what the engine cannot take (lookaround, word boundaries, ...) and narrows the rest to
    // what a JSON string holds raw
    pattern = jsonSafePattern(pattern, why => refuse('pattern', path, why))
  }
  if (s.format !== undefined) {
    if (typeof s.format !== 'string') refuse('format', path, 'it must be a string')
    const f = s.format as string
    if (FORMAT_PATTERNS[f]) {
      if (pattern !== undefined) refuse('format', path, `"${f}" together with "pattern" is not supported`)
      pattern = FORMAT_PATTERNS[f]
      delete out.format
    } else if (!NATIVE_FORMATS.has(f)) {
      refuse('format', path, `format "${f}" is not enforced (supported: ${[...NATIVE_FORMATS, ...Object.keys(FORMAT_PATTERNS)].join(', ')})`)
    }
  }
  const min = count(s, 'minLength', path)
  let max = count(s, 'maxLength', path)
  if (min !== undefined || max !== undefined) {
    // no output is that long (a context of at most 2^24 tokens, a token of far fewer than 10^4 characters): such a
    // maximum bounds nothing, and XGrammar aborts on counts past 10^15
    if (max !== undefined && max >= UNREACHABLE_LENGTH) max = undefined
    const key = min !== undefined ? 'minLength' : 'maxLength'
    const types = typesOf(s)
    delete out.minLength
    delete out.maxLength
    if (types.length === 0 || types.includes('string')) {
      if (min !== undefined && min >= UNREACHABLE_LENGTH) refuse('minLength', path, 'no output can be that long')
      for (const other of ['enum', 'const']) if (s[other] !== undefined) refuse(key, path, `string lengths together with "${other}" are not supported`)
      if (min !== undefined && max !== undefined && min > max) refuse(key, path, 'minLength is above maxLength')
      if (pattern !== undefined || out.format !== undefined) {
        // beside a pattern or format, lengths are kept only where every string it matches already has them
        const span = out.format === 'uuid' ? {min: 36, max: 36} : pattern !== undefined ? patternSpan(pattern) : undefined
        const implied = span !== undefined && (min === undefined || min <= span.min) && (max === undefined || max >= span.max)
        if (!implied) refuse(key, path, 'string lengths together with "pattern" or "format" are supported only where the pattern or format implies them')
      } else {
        if (min !== undefined && min > 0) out.minLength = min
        if (max !== undefined) out.maxLength = max
      }
    }
  }
  if (pattern !== undefined) out.pattern = pattern
}

/** How many subschemas a checked schema holds (what MAX_SUBSCHEMAS bounds; for schemas compiled together). */
export function subschemaCount(schema: unknown): number {
  let n = 0
  const stack: unknown[] = [schema]
  while (stack.length > 0) {
    const s = stack.pop()
    if (!isSchema(s)) continue
    for (const key of ['properties', 'patternProperties', '$defs', 'definitions'] as const) if (isSchema(s[key])) stack.push(...Object.values(s[key] as Schema))
    for (const key of ['additionalProperties', 'items'] as const) if (isSchema(s[key])) stack.push(s[key])
    for (const key of ['anyOf', 'oneOf', 'prefixItems'] as const) if (Array.isArray(s[key])) stack.push(...(s[key] as unknown[]))
    if (s !== schema) n++
  }
  return n
}

/** A JSON pointer inside the root schema ("#/$defs/x"), or undefined. */
export function resolvePointer(root: Schema, ref: string): unknown {
  if (ref === '#') return root
  let node: unknown = root
  for (const raw of ref.slice(2).split('/')) {
    const part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~')
    if (!isSchema(node) && !Array.isArray(node)) return undefined
    node = (node as Record<string, unknown>)[part]
    if (node === undefined) return undefined
  }
  return node
}

/**
 * True when no JSON value can match two oneOf branches: every pair differs in its (declared) types, or
 * both require a property whose const / enum values do not meet.
 */
function branchesDisjoint(branches: unknown[], root: Schema): boolean {
  const resolved = branches.map(b => (isSchema(b) && typeof b.$ref === 'string' ? resolvePointer(root, b.$ref) : b))
  for (let i = 0; i < resolved.length; i++) {
    for (let j = i + 1; j < resolved.length; j++) {
      if (!pairDisjoint(resolved[i], resolved[j])) return false
    }
  }
  return true
}

function valueTypes(s: Schema): Set<string> | undefined {
  const values = Array.isArray(s.enum) ? s.enum : 'const' in s ? [s.const] : undefined
  if (values) return new Set(values.map(v => (v === null ? 'null' : Array.isArray(v) ? 'array' : Number.isInteger(v) ? 'integer' : typeof v === 'number' ? 'number' : typeof v)))
  const t = typesOf(s)
  if (t.length === 0) return undefined
  const set = new Set(t)
  if (set.has('number')) set.add('integer') // an integer is a number
  if (set.has('integer')) set.add('number')
  return set
}

function pairDisjoint(a: unknown, b: unknown): boolean {
  if (!isSchema(a) || !isSchema(b)) return false
  const ta = valueTypes(a)
  const tb = valueTypes(b)
  if (ta && tb && ![...ta].some(t => tb.has(t))) return true
  const valuesA = Array.isArray(a.enum) ? a.enum : 'const' in a ? [a.const] : undefined
  const valuesB = Array.isArray(b.enum) ? b.enum : 'const' in b ? [b.const] : undefined
  if (valuesA && valuesB) return !valuesA.some(x => valuesB.some(y => JSON.stringify(x) === JSON.stringify(y)))
  const req = (s: Schema) => new Set(Array.isArray(s.required) ? (s.required as string[]) : [])
  const ra = req(a)
  const rb = req(b)
  const pa = isSchema(a.properties) ? a.properties : {}
  const pb = isSchema(b.properties) ? b.properties : {}
  for (const name of ra) {
    if (!rb.has(name)) continue
    if (pairDisjoint(pa[name], pb[name])) return true
  }
  return false
}
