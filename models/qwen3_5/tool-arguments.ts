// Parameter values of the XML tool-call form arrive as raw text; the tool's JSON schema says what JSON
// value each one is. Strings stay strings; integers, numbers, booleans, null, objects and arrays are
// parsed; a value that does not parse as its declared type falls back to a JSON string.

import type {JsonSchema, ToolDefinition} from './template.js'

/**
 * The JSON types a schema allows (from `type`, `anyOf` / `oneOf`, or `enum`/`const` values, following
 * local `$ref`s into `root`); empty = unknown.
 */
export function schemaTypes(schema: JsonSchema | undefined, root?: JsonSchema, depth = 0): string[] {
  if (!schema || typeof schema !== 'object') return []
  if (typeof schema.$ref === 'string' && root && depth < 16) return schemaTypes(resolveRef(root, schema.$ref), root, depth + 1)
  const types = new Set<string>()
  if (typeof schema.type === 'string') types.add(schema.type)
  if (Array.isArray(schema.type)) for (const t of schema.type) if (typeof t === 'string') types.add(t)
  for (const branch of [...(schema.anyOf ?? []), ...(schema.oneOf ?? [])]) for (const t of schemaTypes(branch, root, depth + 1)) types.add(t)
  const values = Array.isArray(schema.enum) ? schema.enum : 'const' in schema ? [schema.const] : []
  for (const v of values) types.add(v === null ? 'null' : Array.isArray(v) ? 'array' : typeof v === 'number' ? 'number' : typeof v)
  return [...types]
}

/** The schema a local JSON pointer (`#/$defs/x`) names inside `root`, if any. */
function resolveRef(root: JsonSchema, ref: string): JsonSchema | undefined {
  if (ref === '#') return root
  if (!ref.startsWith('#/')) return undefined
  let node: unknown = root
  for (const part of ref.slice(2).split('/')) {
    if (typeof node !== 'object' || node === null) return undefined
    node = (node as Record<string, unknown>)[part.replace(/~1/g, '/').replace(/~0/g, '~')]
  }
  return typeof node === 'object' && node !== null ? (node as JsonSchema) : undefined
}

/** Parameter name → allowed types, for one tool. */
export function parameterTypes(tool: ToolDefinition | undefined): Map<string, string[]> {
  const out = new Map<string, string[]>()
  const root = tool?.function.parameters
  const props = root?.properties ?? {}
  for (const [name, schema] of Object.entries(props)) out.set(name, schemaTypes(schema, root))
  return out
}

/** True when a value of these types is streamed as a JSON string while it is generated. */
export function isPlainString(types: string[]): boolean {
  return types.length === 0 || (types.length === 1 && types[0] === 'string')
}

/** The JSON text for a raw parameter value of the given types. */
export function convertParameter(raw: string, types: string[]): string {
  if (isPlainString(types)) return JSON.stringify(raw)
  const text = raw.trim()
  if (types.includes('string')) return types.includes('null') && text === 'null' ? 'null' : JSON.stringify(raw)
  for (const type of types) {
    const value = parseAs(text, type)
    if (value !== undefined) return value
  }
  return JSON.stringify(raw)
}

function parseAs(text: string, type: string): string | undefined {
  switch (type) {
    case 'integer':
      return /^-?\d+$/.test(text) ? text.replace(/^(-?)0+(?=\d)/, '$1') : undefined
    case 'number': {
      if (/^-?\d+$/.test(text)) return text.replace(/^(-?)0+(?=\d)/, '$1')
      const n = Number(text)
      return text !== '' && Number.isFinite(n) ? JSON.stringify(n) : undefined
    }
    case 'boolean': {
      const lower = text.toLowerCase()
      return lower === 'true' || lower === 'false' ? lower : undefined
    }
    case 'null':
      return text === 'null' || text === 'None' ? 'null' : undefined
    case 'object':
    case 'array': {
      const value = tryJson(text)
      if (value === undefined) return undefined
      const isArray = Array.isArray(value)
      const ok = type === 'array' ? isArray : value !== null && typeof value === 'object' && !isArray
      return ok ? JSON.stringify(value) : undefined
    }
    default:
      return undefined // 'string' is handled by the caller's fallback
  }
}

function tryJson(text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}
