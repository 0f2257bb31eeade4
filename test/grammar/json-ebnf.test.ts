// Numbers without bounds (json-ebnf.ts): Splash writes them with limited digits in place of XGrammar's unbounded
// rules, so a model that loops on digits cannot write a value JSON.parse reads as Infinity (which no JSON Schema
// validator takes). Compiled for a real vocabulary: the limits hold in typed fields, in untyped values and in
// json_object; a node with other keywords keeps XGrammar's own rule.
import t from 'tap'
import {jsonSchemaEbnf, UNBOUNDED_INTEGER_EBNF, UNBOUNDED_NUMBER_EBNF} from '../../src/grammar/json/json-ebnf.js'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {invalidity} from '../helpers/ajv.js'
import {synthFixture} from '../helpers/packages.js'
import {seeded, walk} from '../helpers/grammar-walk.js'

t.test('the EBNF: typed integers and numbers, and the untyped values, get the limited rules', async t => {
  const ebnf = await jsonSchemaEbnf({type: 'object', properties: {a: {type: 'integer'}, b: {type: ['number', 'null']}, c: {type: 'integer', enum: [1, 2]}, d: {}}, required: ['a', 'b', 'c', 'd']})
  t.ok(ebnf.includes(UNBOUNDED_INTEGER_EBNF), 'integer')
  t.ok(ebnf.includes(UNBOUNDED_NUMBER_EBNF), 'number or null')
  t.match(ebnf, /basic_number ::= \( "-"\?/, 'untyped values')
  t.notMatch(ebnf, /\[0-9\]\*/, 'no unbounded digit run left')
  t.match(ebnf, /\("1"\) \| \("2"\)/, 'an enum stays an enum')
})

t.test('compiled: 20 integer digits, 20 fraction digits and a two-digit exponent at most; every value is finite', async t => {
  const {accepts, acceptsJson} = await decider(await synthFixture('tiny-hybrid', 'q4'))
  const obj = (v: unknown) => ({type: 'object', properties: {v}, required: ['v'], additionalProperties: false})
  const digits = (n: number) => '1' + '0'.repeat(n - 1)
  const cases: Array<[unknown, string[], string[]]> = [
    [obj({type: 'integer'}), ['0', '-7', digits(20), '-' + digits(20)], [digits(21), '007', '-0', '1.5', '1e3']],
    [obj({type: ['integer', 'null']}), ['null', digits(19)], [digits(21)]],
    [obj({type: 'number'}), ['0', '-0.5', digits(20), `1.${'5'.repeat(20)}`, '2.5e-99', '1E+10'], [digits(21), `1.${'5'.repeat(21)}`, '1e100', '1e999']],
    [obj({type: 'array', items: {type: 'integer'}}), ['[1, 22]'], [`[${digits(21)}]`]],
    [obj({}), [digits(20), '"x"', '[1.5e10]'], [digits(21), '1e999']],
  ]
  for (const [schema, good, bad] of cases) {
    const checked = enforceableSchema(schema, 'x')
    for (const v of good) {
      t.ok(await acceptsJson(checked, `{"v": ${v}}`), `${JSON.stringify(schema)} takes ${v.slice(0, 30)}`)
      t.equal(invalidity(schema, `{"v": ${v}}`), undefined, `ajv takes ${v.slice(0, 30)}`)
    }
    for (const v of bad) t.notOk(await acceptsJson(checked, `{"v": ${v}}`), `${JSON.stringify(schema)} refuses ${v.slice(0, 30)}`)
  }
  t.ok(await accepts({type: 'json_object'}, `{"n": ${digits(20)}, "m": [2.5e10]}`), 'json_object takes 20 digits')
  t.notOk(await accepts({type: 'json_object'}, `{"n": ${digits(21)}}`), 'json_object refuses 21')
  // next to other keywords, the node keeps XGrammar's rule (unchanged behaviour)
  t.ok(await acceptsJson(enforceableSchema(obj({type: 'integer', enum: [5, 7]}), 'x'), '{"v": 7}'))
})

// XGrammar writes property names into its EBNF unescaped: a name with `"`, `\` or a newline failed to compile, and
// one with a tab or another control character made the grammar write it raw, which is not JSON.
t.test('property names that JSON escapes are written escaped', async t => {
  const d = await decider(new URL('../../packages/default/', import.meta.url).pathname)
  const names = ['a"b', 'c\\d', 'nl\nx', 'tab\there', '\u0001', 'plain', 'ü']
  const schema = {
    type: 'object',
    properties: Object.fromEntries(names.map(n => [n, {type: 'integer', minimum: 0, maximum: 9}])),
    required: names,
    additionalProperties: false,
  }
  const checked = enforceableSchema(schema, 'x')
  const text = `{${names.map((n, i) => `${JSON.stringify(n)}: ${i}`).join(', ')}}`
  t.equal(invalidity(schema, text), undefined, 'ajv takes the escaped text')
  t.ok(await d.acceptsJson(checked, text), 'the grammar takes it')
  t.notOk(await d.acceptsJson(checked, text.replace('tab\\there', 'tab\there')), 'and not a raw tab')
  // a $ref through such a name, and the same name at two levels
  const nested = {
    type: 'object',
    properties: {'k"1': {type: 'object', properties: {'k"1': {type: 'boolean'}}, required: ['k"1'], additionalProperties: false}, other: {$ref: '#/properties/k"1'}},
    required: ['k"1', 'other'],
    additionalProperties: false,
  }
  const nestedText = '{"k\\"1": {"k\\"1": true}, "other": {"k\\"1": false}}'
  t.equal(invalidity(nested, nestedText), undefined)
  t.ok(await d.acceptsJson(enforceableSchema(nested, 'x'), nestedText), 'a $ref through an escaped name')
  // random walks over the masks end in JSON that ajv takes
  const rnd = seeded(3)
  for (let i = 0; i < 10; i++) {
    const m = await d.grammars.matcher({type: 'json_schema', schema, param: 'x'})
    const w = await walk(m, d.size, rnd, 120)
    m.dispose()
    if (w.ended) t.equal(invalidity(schema, d.tokenizer.decode(w.ids)), undefined, `walk ${i}`)
  }
})

t.test('object keys, decided: no declared name through another branch, required names present', async t => {
  const d = await decider(new URL('../../packages/default/', import.meta.url).pathname)
  const cases: Array<[Record<string, unknown>, string[], string[]]> = [
    [{type: 'object', properties: {a: {type: 'integer'}}, additionalProperties: {type: 'string'}}, ['{"a": 1}'], ['{"a": "x"}', '{"a": 1, "a": "s"}']],
    [{type: 'object', properties: {a: {type: 'integer'}}, additionalProperties: true}, ['{"a": 1}'], ['{"a": "x"}']],
    [{type: 'object', properties: {a: {type: 'integer'}}, required: ['a', 'b']}, ['{"a": 1, "b": [2]}'], ['{"a": 1}']],
    [{type: 'object', required: ['b']}, ['{"b": 2}'], ['{}']],
  ]
  for (const [schema, good, bad] of cases) {
    const checked = enforceableSchema(schema, 'x')
    for (const text of good) {
      t.equal(invalidity(schema, text), undefined)
      t.ok(await d.acceptsJson(checked, text), `${JSON.stringify(schema)} takes ${text}`)
    }
    for (const text of bad) {
      t.not(invalidity(schema, text), undefined)
      t.notOk(await d.acceptsJson(checked, text), `${JSON.stringify(schema)} refuses ${text}`)
    }
  }
})
