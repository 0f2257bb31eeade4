// The fail-closed policy: every keyword the grammar engine cannot enforce is a 400 that names it; the
// rewrites (integer bounds, string lengths, formats as patterns) keep the schema's meaning or narrow it.
import t from 'tap'
import {enforceableSchema, MAX_NESTING, MAX_SUBSCHEMAS, subschemaCount} from '../../src/grammar/schema-policy.js'
import {SplashError} from '../../src/errors.js'
import {SCHEMAS, UNSUPPORTED} from '../helpers/schemas.js'

t.test('unsupported keywords are refused with a 400 naming them', async t => {
  for (const {schema, keyword} of UNSUPPORTED) {
    try {
      enforceableSchema(schema, 'response_format')
      t.fail(`${JSON.stringify(schema)} was accepted`)
    } catch (e) {
      t.ok(e instanceof SplashError, keyword)
      const err = e as SplashError
      t.equal(err.status, 400)
      t.equal(err.code, 'unsupported_schema')
      t.match(err.message, `"${keyword}"`, `${JSON.stringify(schema)} names ${keyword}`)
    }
  }
})

t.test('nested unsupported keywords are found with their path', async t => {
  t.throws(() => enforceableSchema({type: 'object', properties: {a: {type: 'array', items: {type: 'integer', multipleOf: 2}}}}, 'x'), {
    message: /"multipleOf" at \/properties\/a\/items/,
  })
  t.throws(() => enforceableSchema({$defs: {d: {not: {}}}, $ref: '#/$defs/d'}, 'x'), {message: /"not" at \/\$defs\/d/})
  t.throws(() => enforceableSchema({anyOf: [{type: 'string'}, {type: ['number', 'integer'], maximum: 3}]}, 'x'), {message: /"maximum" at \/anyOf\/1/})
})

t.test('every test schema is accepted', async t => {
  for (const c of SCHEMAS) t.doesNotThrow(() => enforceableSchema(c.schema, 'x'), c.name)
  t.throws(() => enforceableSchema('object', 'x'), {message: /./, status: 400})
  t.equal(enforceableSchema(true, 'x'), true)
})

t.test('rewrites', async t => {
  t.same(enforceableSchema({type: 'integer', exclusiveMinimum: 0, exclusiveMaximum: 10}, 'x'), {type: 'integer', minimum: 1, maximum: 9})
  t.same(enforceableSchema({type: 'integer', minimum: 5}, 'x'), {type: 'integer', minimum: 5, maximum: Number.MAX_SAFE_INTEGER})
  t.same(enforceableSchema({type: 'integer', maximum: 2.5}, 'x'), {type: 'integer', minimum: -Number.MAX_SAFE_INTEGER, maximum: 2})
  // numbers keep their exclusive bounds (the tighter of each side), a missing side becomes ±(2^53−1)
  t.same(enforceableSchema({type: 'number', minimum: 0, exclusiveMaximum: 1.5}, 'x'), {type: 'number', minimum: 0, exclusiveMaximum: 1.5})
  t.same(enforceableSchema({type: 'number', minimum: 2, exclusiveMinimum: 2}, 'x'), {type: 'number', exclusiveMinimum: 2, maximum: Number.MAX_SAFE_INTEGER})
  t.same(enforceableSchema({type: ['number', 'null'], maximum: 0.25}, 'x'), {type: ['number', 'null'], minimum: -Number.MAX_SAFE_INTEGER, maximum: 0.25})
  // string lengths stay for json-ebnf.ts (string-length.ts); a zero minimum says nothing; on non-strings they go
  t.same(enforceableSchema({type: 'string', minLength: 1, maxLength: 4}, 'x'), {type: 'string', minLength: 1, maxLength: 4})
  t.same(enforceableSchema({type: 'string', minLength: 0, maxLength: 4}, 'x'), {type: 'string', maxLength: 4})
  t.same(enforceableSchema({type: 'string', minLength: 0}, 'x'), {type: 'string'})
  t.same(enforceableSchema({type: 'integer', minimum: 0, maximum: 3, maxLength: 2}, 'x'), {type: 'integer', minimum: 0, maximum: 3})
  // uniqueItems: false constrains nothing (true is a 400, in UNSUPPORTED)
  t.same(enforceableSchema({type: 'array', items: {type: 'integer'}, uniqueItems: false}, 'x'), {type: 'array', items: {type: 'integer'}})
  const date = enforceableSchema({type: 'string', format: 'date'}, 'x') as {pattern: string; format?: string}
  t.equal(date.format, undefined)
  const re = new RegExp(date.pattern)
  for (const ok of ['2024-01-31', '2023-04-30', '1999-12-28', '2000-02-28']) t.match(ok, re)
  for (const bad of ['2024-11-31', '2024-02-30', '2024-13-01', '2024-00-10', '24-01-01']) t.notMatch(bad, re)
  const time = new RegExp((enforceableSchema({type: 'string', format: 'time'}, 'x') as {pattern: string}).pattern)
  for (const ok of ['23:59:59Z', '00:00:00.5+01:00']) t.match(ok, time)
  for (const bad of ['24:00:00Z', '12:60:00Z', '12:00:00']) t.notMatch(bad, time)
  const ip = new RegExp((enforceableSchema({type: 'string', format: 'ipv4'}, 'x') as {pattern: string}).pattern)
  t.match('192.168.0.255', ip)
  for (const bad of ['256.1.1.1', '01.2.3.4', '1.2.3']) t.notMatch(bad, ip)
  // the input is not changed
  const input = {type: 'integer', exclusiveMinimum: 1}
  enforceableSchema(input, 'x')
  t.same(input, {type: 'integer', exclusiveMinimum: 1})
})

t.test('oneOf is accepted only when its branches cannot overlap', async t => {
  t.doesNotThrow(() => enforceableSchema({oneOf: [{type: 'string'}, {type: 'boolean'}]}, 'x'))
  t.doesNotThrow(() => enforceableSchema({oneOf: [{const: 'a'}, {const: 'b'}]}, 'x'))
  t.doesNotThrow(() =>
    enforceableSchema({oneOf: [{type: 'object', properties: {k: {const: 1}}, required: ['k']}, {type: 'object', properties: {k: {const: 2}}, required: ['k']}]}, 'x'),
  )
  t.throws(() => enforceableSchema({oneOf: [{type: 'object'}, {type: 'object', required: ['a']}]}, 'x'), {message: /"oneOf"/})
  t.throws(() => enforceableSchema({oneOf: [{enum: ['a', 'b']}, {enum: ['b', 'c']}]}, 'x'), {message: /"oneOf"/})
})

// XGrammar recurses on nesting and traps past its wasm stack (objects ~55 deep here), which left its instance unable
// to compile anything again: deep schemas and patterns are refused before they reach it.
t.test('nesting deeper than MAX_NESTING is refused', async t => {
  const nest = (depth: number, wrap: (s: unknown) => unknown) => {
    let s: unknown = {type: 'integer'}
    for (let i = 0; i < depth; i++) s = wrap(s)
    return s
  }
  const wraps: Array<[string, (s: unknown) => unknown]> = [
    ['properties', s => ({type: 'object', properties: {k: s}})],
    ['items', s => ({type: 'array', items: s})],
    ['anyOf', s => ({anyOf: [s, {type: 'null'}]})],
    ['additionalProperties', s => ({type: 'object', additionalProperties: s})],
  ]
  for (const [keyword, wrap] of wraps) {
    t.doesNotThrow(() => enforceableSchema(nest(MAX_NESTING, wrap), 'x'), `${keyword}: ${MAX_NESTING} levels`)
    t.throws(() => enforceableSchema(nest(MAX_NESTING + 1, wrap), 'x'), {status: 400, param: keyword, message: /nested more than/}, `${keyword}: one more`)
  }
  t.throws(() => enforceableSchema(nest(100000, wrap => ({type: 'array', items: wrap})), 'x'), {message: /nested more than/, status: 400}, 'very deep: a 400, not a stack overflow')
  const groups = (n: number) => ({type: 'string', pattern: `^${'('.repeat(n)}a${')'.repeat(n)}$`})
  t.doesNotThrow(() => enforceableSchema(groups(MAX_NESTING), 'x'))
  t.throws(() => enforceableSchema(groups(MAX_NESTING + 1), 'x'), {message: /groups nested/, status: 400, param: 'pattern'})
  t.doesNotThrow(() => enforceableSchema({type: 'string', pattern: `^[${'('.repeat(40)}]\\(\\(a$`}, 'x'), 'parentheses in classes and escaped ones do not nest')
})

t.test('more than MAX_SUBSCHEMAS subschemas are refused; subschemaCount counts what the limit bounds', async t => {
  const props = (n: number) => ({type: 'object', properties: Object.fromEntries(Array.from({length: n}, (_, i) => [`p${i}`, {type: 'integer'}]))})
  const ok = enforceableSchema(props(MAX_SUBSCHEMAS), 'x')
  t.equal(subschemaCount(ok), MAX_SUBSCHEMAS)
  t.throws(() => enforceableSchema(props(MAX_SUBSCHEMAS + 1), 'x'), {message: /more than 512 subschemas/, status: 400, param: 'properties'})
  const mixed = {
    type: 'object',
    properties: {a: {type: 'array', items: {anyOf: [{type: 'string'}, {type: 'null'}]}}, b: {type: 'array', prefixItems: [{type: 'integer'}, true]}},
    $defs: {d: {type: 'object', additionalProperties: {type: 'integer'}}},
  }
  // a, its items, the two branches, b, its one schema prefix item, d, d's additionalProperties
  t.equal(subschemaCount(enforceableSchema(mixed, 'x')), 8)
})

// XGrammar let declared names through its other branches ({"a": "x"} for an integer `a` beside additionalProperties)
// and ignored required names that properties do not declare ({} for required ["b"]).
t.test('object keys: required names declared, declared names kept out of the other branches', async t => {
  t.same(enforceableSchema({type: 'object', properties: {a: {type: 'integer'}}, additionalProperties: {type: 'string'}}, 'x'), {
    type: 'object',
    properties: {a: {type: 'integer'}},
    additionalProperties: false,
  })
  t.same(enforceableSchema({type: 'object', required: ['b']}, 'x'), {type: 'object', required: ['b'], properties: {b: {}}, additionalProperties: false})
  t.same(enforceableSchema({type: 'object', properties: {a: {type: 'integer'}}, required: ['a', 'b'], additionalProperties: {type: 'string'}}, 'x'), {
    type: 'object',
    properties: {a: {type: 'integer'}, b: {type: 'string'}},
    required: ['a', 'b'],
    additionalProperties: false,
  })
  // a required name a pattern matches is declared with that pattern's schema; beside declared names the patterns
  // go (XGrammar dropped `required` next to patternProperties)
  t.same(enforceableSchema({type: 'object', patternProperties: {'^x': {type: 'integer'}}, required: ['x1']}, 'x'), {
    type: 'object',
    required: ['x1'],
    properties: {x1: {type: 'integer'}},
    additionalProperties: false,
  })
  // (keys starting with x: the rest of the key is left open, as JSON Schema reads "^x")
  t.same(enforceableSchema({type: 'object', patternProperties: {'^x': {type: 'integer'}}}, 'x'), {type: 'object', patternProperties: {'^x[^\\x00-\\x1F"\\\\]*$': {type: 'integer'}}, additionalProperties: false})
  t.same(enforceableSchema({type: 'object', additionalProperties: {type: 'integer'}}, 'x'), {type: 'object', additionalProperties: {type: 'integer'}}, 'a map alone is kept')
  t.throws(() => enforceableSchema({type: 'object', properties: {ab: {type: 'integer'}}, patternProperties: {'^a': {type: 'string'}}}, 'x'), {message: /intersection/, param: 'patternProperties'})
  t.throws(() => enforceableSchema({type: 'object', required: ['z'], additionalProperties: false}, 'x'), {message: /"z" is required/, param: 'required'})
})

t.test("Pydantic's shapes: allOf around one schema, discriminator beside oneOf", async t => {
  t.same(enforceableSchema({allOf: [{$ref: '#/$defs/P'}], description: 'd', $defs: {P: {type: 'integer'}}}, 'x'), {description: 'd', $ref: '#/$defs/P', $defs: {P: {type: 'integer'}}})
  t.doesNotThrow(() => enforceableSchema({oneOf: [{const: 'a'}, {const: 'b'}], discriminator: {propertyName: 't'}}, 'x'))
  t.throws(() => enforceableSchema({allOf: [{type: 'integer'}, {minimum: 1}]}, 'x'), {message: /allOf/})
  t.throws(() => enforceableSchema({type: 'integer', allOf: [{minimum: 1}]}, 'x'), {message: /allOf/}, 'beside other keywords it stays an intersection')
})

t.test('required names that are also Object.prototype names are declared like any other', async t => {
  const out = enforceableSchema({type: 'object', properties: {a: {type: 'integer'}}, required: ['a', 'toString', 'constructor']}, 'x') as {properties: Record<string, unknown>}
  t.same(Object.keys(out.properties), ['a', 'toString', 'constructor'])
  t.same(out.properties.toString, {})
})

t.test('enum and const: numbers past a double are refused (JSON would write them as null), an enum is a non-empty array', async t => {
  for (const schema of [{enum: [1, JSON.parse('1e400')]}, {const: {a: [JSON.parse('-1e400')]}}]) {
    t.throws(() => enforceableSchema(schema, 'x'), {message: /too large for a double/}, JSON.stringify(schema))
  }
  t.throws(() => enforceableSchema({enum: []}, 'x'), {message: /non-empty array/})
  t.throws(() => enforceableSchema({enum: 'a'}, 'x'), {message: /non-empty array/})
  t.doesNotThrow(() => enforceableSchema({enum: [1.5e308, -0, 'x', null]}, 'x'))
})
