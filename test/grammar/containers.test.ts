// Bounds over members the schema leaves free: XGrammar aborted on `{type: "array", minItems: 1}` (also beside
// `prefixItems`) and `{type: "object", minProperties: 1}`, so common schemas came back as a 400, and with an upper
// bound alone it took no member (`{type: "array", maxItems: 5}` only `[]`). The policy now says `items: true` /
// `additionalProperties: true` there (openContainers in schema-policy.ts); decided text by text through the real
// grammar against ajv. Counts past what any output holds: a maximum goes, a minimum is a 400.
import t from 'tap'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {invalidity} from '../helpers/ajv.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

const TEXTS = ['[]', '[1]', '[1, "x"]', '[1, "x", {}]', '[1, 2, 3, 4]', '{}', '{"a": 1}', '{"a": 1, "b": [2]}', '{"a": 1, "b": 2, "c": 3}', '1', 'null']

t.test('arrays and objects with bounds and free members compile and take exactly the valid texts', async t => {
  const d = await decider(DEFAULT)
  const schemas = [
    {type: 'array', minItems: 1},
    {type: 'array', minItems: 3},
    {type: 'array', minItems: 2, maxItems: 3},
    {type: 'array', minItems: 2, prefixItems: [{type: 'integer'}]},
    {type: 'object', minProperties: 1},
    {type: 'object', minProperties: 2, maxProperties: 2},
    {type: ['array', 'object'], minItems: 1, minProperties: 1},
    {type: 'array', maxItems: 2},
    {type: 'array', minItems: 1, maxItems: 3, prefixItems: [{type: 'integer'}]},
    {type: 'object', maxProperties: 2},
    {type: 'array', maxItems: Number.MAX_SAFE_INTEGER},
    {type: 'object', maxProperties: 2 ** 31},
  ]
  for (const schema of schemas) {
    const checked = enforceableSchema(schema, 'x')
    for (const text of TEXTS) {
      const valid = invalidity(schema, text) === undefined
      t.equal(await d.acceptsJson(checked, text), valid, `${JSON.stringify(schema)} ${text}`)
    }
  }
  // what is said explicitly stays as given
  t.same(enforceableSchema({type: 'array', minItems: 1, items: {type: 'integer'}}, 'x'), {type: 'array', minItems: 1, items: {type: 'integer'}})
  t.same(enforceableSchema({type: 'object', minProperties: 1, additionalProperties: false}, 'x'), {type: 'object', minProperties: 1, additionalProperties: false})
})

t.test('counts: integers, in order, and none past what any output holds', async t => {
  for (const [schema, keyword] of [
    [{type: 'array', minItems: 2 ** 31 - 1}, 'minItems'],
    [{type: 'object', minProperties: 1e13}, 'minProperties'],
    [{type: 'array', minItems: 3, maxItems: 2}, 'minItems'],
    [{type: 'array', maxItems: 1.5}, 'maxItems'],
    [{type: 'object', maxProperties: -1}, 'maxProperties'],
    [{type: 'string', minLength: 1e13}, 'minLength'],
  ] as const) {
    t.throws(() => enforceableSchema(schema, 'x'), {status: 400, message: new RegExp(`"${keyword}"`)}, JSON.stringify(schema))
  }
  t.same(enforceableSchema({type: 'string', maxLength: Number.MAX_SAFE_INTEGER}, 'x'), {type: 'string'})
  t.same(enforceableSchema({type: 'array', maxItems: 2 ** 31 - 1}, 'x'), {type: 'array'})
  t.same(enforceableSchema({type: 'array', maxItems: 2 ** 31 - 2}, 'x'), {type: 'array', maxItems: 2 ** 31 - 2, items: true})
})
