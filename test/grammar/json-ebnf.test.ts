// Numbers without bounds (json-ebnf.ts): Splash writes them with limited digits in place of XGrammar's unbounded
// rules, so a model that loops on digits cannot write a value JSON.parse reads as Infinity (which no JSON Schema
// validator takes). Compiled for a real vocabulary: the limits hold in typed fields, in untyped values and in
// json_object; a node with other keywords keeps XGrammar's own rule.
import t from 'tap'
import {jsonSchemaEbnf, UNBOUNDED_INTEGER_EBNF, UNBOUNDED_NUMBER_EBNF} from '../../src/grammar/json-ebnf.js'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {invalidity} from '../helpers/ajv.js'
import {synthFixture} from '../helpers/packages.js'

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
