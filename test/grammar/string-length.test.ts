// Strings with length bounds through real grammars (the default package's vocabulary), every text also checked by
// ajv: a text is accepted exactly when it is valid and spelled in the grammar's alphabet, which is all of JSON's
// (raw non-ASCII characters, escapes) up to CHAIN_LIMIT characters, and raw characters only past it. Lengths count
// characters, not bytes or UTF-16 units; `\u` escapes of surrogates are never taken. The XML call form counts a raw
// value's characters the same way.
import t from 'tap'
import {decider} from '../helpers/grammar-accepts.js'
import {invalidity} from '../helpers/ajv.js'
import {toolCallGrammar} from '../../models/qwen3_5/tool-grammar.js'
import {CHAIN_LIMIT} from '../../src/grammar/json/string-length.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

const RAW = ['', 'a', 'é', '😀', 'ab', 'éé', '😀😀', 'a😀', 'abc', 'ééé', '日本', '日本語', 'a b', '<a>']
const ESCAPED = ['"a\\"b"', '"a\\\\"', '"a\\nb"', '"\\t"', '"\\u00e9"', '"\\u0041b"', '"\\/"', '"\\ud83d\\ude00"', '"\\uDE00"']
const texts = [...RAW.map(s => JSON.stringify(s)), ...ESCAPED, '"\\x"', '"\\u12"', '"a\nb"']
const surrogateEscape = (text: string) => /\\u[dD][89a-fA-F]/.test(text)

t.test('JSON strings', async t => {
  const d = await decider(DEFAULT)
  const long = 'x'.repeat(CHAIN_LIMIT - 2)
  const cases: Array<{schema: Record<string, unknown>; extra?: string[]}> = [
    {schema: {type: 'string', maxLength: 2}},
    {schema: {type: 'string', minLength: 2}},
    {schema: {type: 'string', minLength: 1, maxLength: 2}},
    {schema: {type: 'string', minLength: 3, maxLength: 3}},
    {schema: {type: 'string', maxLength: 0}},
    {schema: {type: ['string', 'null'], maxLength: 1}, extra: ['null', '1']},
    {schema: {type: 'string', maxLength: CHAIN_LIMIT}, extra: [`"${long}éé"`, `"${long}\\n\\n"`, `"${long}ééé"`]},
    {schema: {type: 'string', minLength: 2, maxLength: CHAIN_LIMIT + 72}, extra: [`"${long}${long}"`]},
    {schema: {type: 'string', minLength: CHAIN_LIMIT + 1}, extra: [`"${long}abc"`, `"${long}ab"`, `"${long}ééé"`]},
  ]
  for (const {schema, extra = []} of cases) {
    const checked = d.grammars.checkSchema(schema, 'response_format')
    const chained = Math.max(Number(schema.minLength ?? 0), Number(schema.maxLength ?? 0)) <= CHAIN_LIMIT
    for (const text of [...texts, ...extra]) {
      const valid = invalidity(schema, text) === undefined
      const spelled = text === 'null' || (!surrogateEscape(text) && (chained || !text.slice(1, -1).includes('\\')))
      const accepted = await d.acceptsJson(checked, text)
      t.equal(accepted, valid && spelled, `${JSON.stringify(schema)} ${text}: ${valid ? 'valid' : 'invalid'}`)
    }
  }
})

t.test('raw values of the XML call form', async t => {
  const d = await decider(DEFAULT)
  const schema = {type: 'object', properties: {s: {type: 'string', minLength: 1, maxLength: 3}}, required: ['s']}
  const spec = {type: 'structural' as const, format: toolCallGrammar('xml', [{name: 'f', schema: d.grammars.checkSchema(schema, 'tools')}], {type: 'calls', stopAfterFirst: true})}
  const call = (value: string) => `<tool_call>\n<function=f>\n<parameter=s>\n${value}\n</parameter>\n</function>\n</tool_call>`
  for (const [value, ok] of [['a', true], ['日本語', true], ['a"\\', true], ['😀😀😀', true], ['', false], ['abcd', false], ['日本語x', false], ['a<b', false], ['a\tb', false]] as const) {
    t.equal(await d.accepts(spec, call(value)), ok, JSON.stringify(value))
  }
})
