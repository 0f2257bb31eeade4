// The family's tool-call forms as XGrammar structural tags, so a constrained call is a call the output
// parser reads back into arguments that follow the tool's schema.
// - JSON form: `<tool_call>\n{"name": NAME, "arguments": <schema>}\n</tool_call>`.
// - XML form: `<tool_call>\n<function=NAME>\n` then one `<parameter=ARG>\nVALUE\n</parameter>\n` per
//   argument (properties order; optional ones may be left out) then `</function>\n</tool_call>`. The
//   parser (tool-parser-xml.ts) reads a string-typed VALUE as raw text and any other VALUE as JSON, so
//   string parameters get raw-text grammars (a pattern, the enum values, or text that cannot close the
//   block) and the others a JSON grammar. XGrammar's own qwen_xml_parameter is not used: it allows
//   unbounded whitespace around every value and writes string enums JSON-quoted, which the parser (like
//   Qwen's reference parser) would keep as part of the string.
// - A freeform tool (an input grammar instead of a schema) is called with its one parameter `input`: the
//   grammar's text itself in the XML form, the text as a JSON string in the JSON form.
// - A tool held to no schema (true) takes any parameters in the XML form (raw values, any names) and any
//   object in the JSON form.
import {MARKUP_FREE, type StructuralTagFormat, type ToolGrammarTool} from '../../src/grammar/compiler.js'
import {resolvePointer} from '../../src/grammar/schema-policy.js'
import {jsonSafePattern} from '../../src/grammar/json/json-pattern.js'
import {boundedRawEbnf} from '../../src/grammar/json/string-length.js'
import {errors} from '../../src/errors.js'
import type {ToolCallFormat} from './output.js'
import {isPlainString, schemaTypes} from './tool-arguments.js'
import type {JsonSchema} from './template.js'

type TagFormat = Extract<StructuralTagFormat, {type: 'tag'}>
type Schema = Record<string, unknown>

export type {ToolGrammarTool}

export type ToolGrammarMode =
  /** Exactly the tools' calls: one (stopAfterFirst) or several, nothing else. */
  | {type: 'calls'; stopAfterFirst: boolean}
  /** Free text (thinking included) where any `<tool_call>` must be a valid call. */
  | {type: 'triggered'}

const TRIGGER = '<tool_call>'
/** Raw text that cannot end the value: no `</…` and no `<p…` (so no `</parameter>`, `<parameter=`, `</function>`). */
const RAW_TEXT = '([^<]|<[^/p<])*'
const EMPTY: StructuralTagFormat = {type: 'grammar', grammar: 'root ::= ""'}
/** What ends a raw value when the parser reads it back (tool-parser-xml.ts). */
const CLOSING_MARKER = /<\/parameter>|<parameter=|<\/function>/
const UUID = '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}'

function refuse(tool: string, param: string, why: string): never {
  throw errors.invalidRequest(`Tool "${tool}" parameter "${param}" cannot be enforced in this model's tool-call form: ${why}`, 'tools', 'unsupported_schema')
}

/** A tool or parameter name the XML form can carry: the parser reads `<function=NAME>` / `<parameter=NAME>` up to `>` or a line break. */
function checkXmlName(tool: string, param: string | undefined): void {
  const name = param ?? tool
  if (name === '' || /[<>\r\n]/.test(name)) {
    const what = param === undefined ? `Tool name ${JSON.stringify(tool)}` : `Tool "${tool}" parameter name ${JSON.stringify(param)}`
    throw errors.invalidRequest(`${what} cannot be written in this model's tool-call form: it is empty or holds "<", ">" or a line break`, 'tools', 'unsupported_schema')
  }
}

const constant = (value: string): StructuralTagFormat => (value === '' ? EMPTY : {type: 'const_string', value})
const sequence = (elements: StructuralTagFormat[]): StructuralTagFormat => (elements.length === 1 ? elements[0]! : {type: 'sequence', elements})

/**
 * A pattern as the structural tag's regex, which matches the whole value: jsonSafePattern already spelled out the
 * search (open sides as any text) and anchored the result `^…$`, so the anchors go.
 */
function fullMatch(anchored: string): string {
  return anchored.slice(1, -1)
}

/** The grammar of a raw string value that follows `s` (a string schema as the policy left it). */
function rawString(s: unknown, root: Schema, tool: string, param: string): StructuralTagFormat {
  if (s === true || (typeof s === 'object' && s !== null && Object.keys(s).every(k => k === 'description' || k === 'title'))) return {type: 'regex', pattern: RAW_TEXT}
  if (typeof s !== 'object' || s === null) return refuse(tool, param, 'its schema admits nothing')
  const schema = s as Schema
  if (typeof schema.$ref === 'string') return rawString(resolvePointer(root, schema.$ref), root, tool, param)
  const values = Array.isArray(schema.enum) ? schema.enum : 'const' in schema ? [schema.const] : undefined
  if (values) {
    if (!values.every(v => typeof v === 'string')) refuse(tool, param, 'its values mix strings with other types')
    // the parser ends a raw value at the first closing marker, so a value holding one would come back cut
    const marked = (values as string[]).find(v => CLOSING_MARKER.test(v))
    if (marked !== undefined) refuse(tool, param, `the value ${JSON.stringify(marked)} holds a closing marker of the XML call form`)
    const options = [...new Set(values as string[])].map(constant)
    return options.length === 1 ? options[0]! : {type: 'or', elements: options}
  }
  const branches = (schema.anyOf ?? schema.oneOf) as unknown[] | undefined
  if (branches) return {type: 'or', elements: branches.map(b => rawString(b, root, tool, param))}
  const types = typeof schema.type === 'string' ? [schema.type] : Array.isArray(schema.type) ? schema.type : ['string']
  if (types.length !== 1 || types[0] !== 'string') refuse(tool, param, 'it mixes strings with other types')
  // without "<": a raw value must not hold a closing marker, which would cut it when read back
  if (typeof schema.pattern === 'string') return {type: 'regex', pattern: fullMatch(jsonSafePattern(schema.pattern, why => refuse(tool, param, why), [[0x3c, 0x3c]]))}
  if (typeof schema.minLength === 'number' || typeof schema.maxLength === 'number') {
    // the policy keeps lengths only without pattern and format; a raw value's characters are counted as they are
    return {type: 'grammar', grammar: boundedRawEbnf(typeof schema.minLength === 'number' ? schema.minLength : 0, typeof schema.maxLength === 'number' ? schema.maxLength : undefined)}
  }
  if (schema.format === 'uuid') return {type: 'regex', pattern: UUID}
  if (schema.format !== undefined) refuse(tool, param, `format "${String(schema.format)}" has no raw-text form here`)
  return {type: 'regex', pattern: RAW_TEXT}
}

/** A string-or-null schema without its null part. */
function withoutNull(s: Schema): Schema {
  const out: Schema = {...s}
  if (Array.isArray(s.type)) out.type = s.type.filter(t => t !== 'null')
  if (Array.isArray(s.enum)) out.enum = s.enum.filter(v => v !== null)
  for (const k of ['anyOf', 'oneOf'] as const) {
    if (!Array.isArray(s[k])) continue
    const rest = (s[k] as Schema[]).filter(b => !(b && (b.type === 'null' || b.const === null)))
    delete out[k]
    if (rest.length === 1) Object.assign(out, rest[0])
    else out[k] = rest
  }
  return out
}

/** The grammar of one parameter's VALUE, as the XML parser will read it. */
function xmlValue(prop: unknown, root: Schema, tool: string, param: string): StructuralTagFormat {
  const types = schemaTypes(prop as JsonSchema, root as JsonSchema)
  if (isPlainString(types)) return rawString(prop, root, tool, param)
  // string or null: the parser reads a bare `null` as null and anything else as the string
  if (types.length === 2 && types.includes('string') && types.includes('null')) {
    return {type: 'or', elements: [rawString(withoutNull(prop as Schema), root, tool, param), constant('null')]}
  }
  if (types.includes('string')) refuse(tool, param, 'it mixes strings with other types')
  const defs = Object.fromEntries((['$defs', 'definitions'] as const).filter(k => root[k] !== undefined).map(k => [k, root[k]]))
  const text = JSON.stringify(prop)
  if (text.includes('"$ref":"#"') || text.includes('"$ref":"#/properties')) refuse(tool, param, 'it refers to the root schema')
  const value = typeof prop === 'object' ? markupFree({...(prop as Schema), ...defs}, tool, param) : (prop as boolean)
  return {type: 'json_schema', json_schema: value, [MARKUP_FREE]: true} as StructuralTagFormat
}

/**
 * A JSON value's schema as the XML form can read it back: the parser cuts a value at the first closing marker, even
 * inside a JSON string, so patterns lose `<` (free strings lose it in the compiler, MARKUP_FREE), and constants and
 * property names holding a marker are refused.
 */
function markupFree(node: unknown, tool: string, param: string): unknown {
  if (Array.isArray(node)) return node.map(n => markupFree(n, tool, param))
  if (typeof node !== 'object' || node === null) return node
  const out: Schema = {}
  for (const [k, v] of Object.entries(node as Schema)) {
    if (k === 'default' || k === 'examples' || k === 'example') out[k] = v // data, not schemas
    else if (k === 'enum' || k === 'const') {
      if (CLOSING_MARKER.test(JSON.stringify(v))) refuse(tool, param, `its ${k} holds a closing marker of the XML call form`)
      out[k] = v
    } else if (k === 'pattern' && typeof v === 'string') out[k] = jsonSafePattern(v, why => refuse(tool, param, why), [[0x3c, 0x3c]])
    else if ((k === 'properties' || k === 'patternProperties' || k === '$defs' || k === 'definitions') && typeof v === 'object' && v !== null) {
      out[k] = Object.fromEntries(
        Object.entries(v as Schema).map(([name, sub]) => {
          if (k === 'properties' && CLOSING_MARKER.test(name)) refuse(tool, param, `the property name ${JSON.stringify(name)} holds a closing marker of the XML call form`)
          const key = k === 'patternProperties' ? jsonSafePattern(name, why => refuse(tool, param, why), [[0x3c, 0x3c]]) : name
          return [key, markupFree(sub, tool, param)]
        }),
      )
    } else out[k] = markupFree(v, tool, param)
  }
  return out
}

/** Any number of parameters with any names and raw values (what the parser reads without a schema). */
const ANY_XML_ARGUMENTS: StructuralTagFormat = {type: 'regex', pattern: `(<parameter=[^>\\n<]+>\\n${RAW_TEXT}\\n</parameter>\\n)*`}

function xmlArguments(tool: {name: string; schema: Schema | boolean}): StructuralTagFormat {
  if (tool.schema === true) return ANY_XML_ARGUMENTS
  const root: Schema = tool.schema === false ? {} : tool.schema
  if (root.anyOf || root.oneOf || root.$ref) refuse(tool.name, '*', 'the parameters schema must be one object schema')
  const props = (root.properties ?? {}) as Schema
  const required = new Set(Array.isArray(root.required) ? (root.required as string[]) : [])
  for (const name of required) if (!Object.hasOwn(props, name)) refuse(tool.name, name, 'it is required but has no schema in properties')
  if (typeof root.minProperties === 'number' && root.minProperties > required.size) refuse(tool.name, '*', 'minProperties above the required parameters')
  if (typeof root.maxProperties === 'number' && root.maxProperties < Object.keys(props).length) refuse(tool.name, '*', 'maxProperties below the number of parameters')
  const params = Object.entries(props).map(([name, prop]) => {
    checkXmlName(tool.name, name)
    const block = sequence([constant(`<parameter=${name}>\n`), xmlValue(prop, root, tool.name, name), constant('\n</parameter>\n')])
    return required.has(name) ? block : ({type: 'or', elements: [block, EMPTY]} as StructuralTagFormat)
  })
  return sequence(params.length > 0 ? params : [EMPTY])
}

function tag(format: ToolCallFormat, tool: ToolGrammarTool): TagFormat {
  if (format === 'xml') checkXmlName(tool.name, undefined)
  if (tool.input) {
    if (format === 'xml') {
      const content = sequence([constant('<parameter=input>\n'), {type: 'grammar', grammar: tool.input.raw}, constant('\n</parameter>\n')])
      return {type: 'tag', begin: `${TRIGGER}\n<function=${tool.name}>\n`, content, end: '</function>\n</tool_call>'}
    }
    return {
      type: 'tag',
      begin: `${TRIGGER}\n{"name": ${JSON.stringify(tool.name)}, "arguments": {"input": "`,
      content: {type: 'grammar', grammar: tool.input.json},
      end: '"}}\n</tool_call>',
    }
  }
  if (format === 'xml') {
    return {type: 'tag', begin: `${TRIGGER}\n<function=${tool.name}>\n`, content: xmlArguments(tool), end: '</function>\n</tool_call>'}
  }
  return {
    type: 'tag',
    begin: `${TRIGGER}\n{"name": ${JSON.stringify(tool.name)}, "arguments": `,
    content: {type: 'json_schema', json_schema: tool.schema === true ? {type: 'object'} : tool.schema},
    end: '}\n</tool_call>',
  }
}

export function toolCallGrammar(format: ToolCallFormat, tools: ToolGrammarTool[], mode: ToolGrammarMode): StructuralTagFormat {
  const tags = tools.map(t => tag(format, t))
  if (mode.type === 'triggered') return {type: 'triggered_tags', triggers: [TRIGGER], tags, at_least_one: false, stop_after_first: false}
  if (tags.length === 1 && mode.stopAfterFirst) return tags[0]!
  return {type: 'tags_with_separator', tags, separator: '\n', at_least_one: true, stop_after_first: mode.stopAfterFirst}
}
