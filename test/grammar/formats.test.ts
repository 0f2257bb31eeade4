// JSON Schema `format` through the grammar, decided string by string against ajv-formats (the validator the
// structured-output tests hold every output to): every string up to a small length over an alphabet that
// exercises the format, after a few prefixes that reach its later parts. The grammar must accept no string
// ajv refuses (XGrammar's own email, uri and ipv6 did: quoted local parts, hosts without a dot, a scheme with
// nothing after it, IPv4 tails with leading zeros), and it must still take common valid values (XGrammar's own
// uri-reference took no scheme, not even https://example.com/).
import t from 'tap'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {strings} from '../helpers/strings.js'
import {invalidity} from '../helpers/ajv.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

// [format, alphabet, max length, prefixes, values it must accept, values ajv takes that the grammar leaves out,
//  values both refuse (XGrammar's own format took them)]
const CASES: Array<[string, string, number, string[], string[], string[], string[]]> = [
  [
    'email', 'a.@"-1', 5, ['', 'a@b', 'a.b@'],
    ['john.doe@example.com', "o'hara+news@mail.example.org", 'x@a-b.co', 'A_B@EXAMPLE.COM'],
    [],
    ['"a b"@x.com', 'a@x'],
  ],
  [
    'uri', 'a:/?#%1@.', 4, ['', 'a:', 'a://', 'ab:/'],
    ['https://example.com/a/b?c=d&e=f#top', 'mailto:someone@example.com', 'urn:isbn:0451450523', 'http://x:8080/%41', 'file:///tmp/x'],
    ['http://[::1]/'],
    ['a:', 'a:?#', 'a:#x'],
  ],
  [
    'uri-reference', 'a:/?#%1@.', 4, ['', 'a:', '//', '/', 'ab://'],
    ['../a/b?c#d', '#frag', 'https://example.com/', 'a:b', '/abs/path', ''],
    [],
    [],
  ],
  [
    'ipv6', 'a:.1', 5, ['', '::', '1:1:1:1:1:1:', '1::'],
    ['::1', '::', '2001:db8::8a2e:370:7334', 'fe80:0:0:0:0:0:0:1', '1:2:3:4:5:6:7::'],
    ['::ffff:1.2.3.4'],
    ['::ffff:1.2.3.04'],
  ],
  [
    'uuid', 'a0-:', 5, ['', '12345678-', '12345678-1234-1234-1234-12345678'],
    ['123e4567-e89b-12d3-a456-426614174000', 'ABCDEF01-2345-6789-ABCD-EF0123456789'],
    ['urn:uuid:123e4567-e89b-12d3-a456-426614174000'],
    [],
  ],
  ['duration', 'P1YMDTHSW', 4, ['', 'P', 'PT', 'P1Y'], ['P1Y2M3DT4H5M6S', 'PT0S', 'P3W', 'P1D'], [], []],
]

t.test('formats: the grammar accepts no string ajv-formats refuses, and takes common values', async t => {
  const d = await decider(DEFAULT)
  for (const [format, alphabet, max, prefixes, valid, left, refused] of CASES) {
    const schema = {type: 'string', format}
    const checked = enforceableSchema(schema, 'x')
    const ajvTakes = (s: string) => invalidity(schema, JSON.stringify(s)) === undefined
    let wider = 0
    let n = 0
    const examples: string[] = []
    for (const p of prefixes) {
      for (const rest of strings(alphabet, max)) {
        const s = p + rest
        n++
        if ((await d.acceptsJson(checked, JSON.stringify(s))) && !ajvTakes(s)) {
          wider++
          if (examples.length < 5) examples.push(s)
        }
      }
    }
    t.equal(wider, 0, `${format}: nothing ajv refuses (${n} strings)${examples.length ? `: ${JSON.stringify(examples)}` : ''}`)
    for (const s of valid) {
      t.ok(ajvTakes(s), `${format}: ajv takes ${JSON.stringify(s)}`)
      t.ok(await d.acceptsJson(checked, JSON.stringify(s)), `${format}: the grammar takes ${JSON.stringify(s)}`)
    }
    for (const s of left) {
      t.ok(ajvTakes(s), `${format}: ajv takes ${JSON.stringify(s)}`)
      t.notOk(await d.acceptsJson(checked, JSON.stringify(s)), `${format}: the grammar leaves out ${JSON.stringify(s)} (a subset)`)
    }
    for (const s of refused) {
      t.notOk(ajvTakes(s), `${format}: ajv refuses ${JSON.stringify(s)}`)
      t.notOk(await d.acceptsJson(checked, JSON.stringify(s)), `${format}: the grammar refuses ${JSON.stringify(s)}`)
    }
  }
})

t.test('formats the engine gets wrong are rewritten as patterns', async t => {
  for (const format of ['email', 'uri', 'uri-reference', 'ipv6']) {
    const out = enforceableSchema({type: 'string', format}, 'x') as {format?: string; pattern?: string}
    t.equal(out.format, undefined, `${format}: no native format`)
    t.type(out.pattern, 'string', `${format}: a pattern`)
  }
  t.throws(() => enforceableSchema({type: 'string', format: 'email', pattern: '^a'}, 'x'), {message: /"format"/})
})

// OpenAPI's formats, common in generated tool schemas: int32 / int64 hold the value to an integer (int32 to its range
// too), float / double / password / binary constrain nothing, byte is base64 (ajv-formats' meaning for each).
t.test('OpenAPI formats', async t => {
  const d = await decider(DEFAULT)
  const cases: Array<[Record<string, unknown>, string[], string[]]> = [
    [{type: 'integer', format: 'int32'}, ['5', '2147483647', '-2147483648'], ['2147483648', '-2147483649']],
    [{type: 'number', format: 'int32', minimum: 0}, ['5'], ['5.5', '-1']],
    [{type: ['integer', 'null'], format: 'int32'}, ['null', '3'], ['3000000000']],
    [{type: 'integer', format: 'int64'}, ['12345678901234567'], ['1.5']],
    [{type: 'number', format: 'int64'}, ['7'], ['7.5']],
    [{type: 'number', format: 'double'}, ['1.5', '-2e10'], ['"1"']],
    [{type: 'number', format: 'float'}, ['0.25'], []],
    [{type: 'string', format: 'password'}, ['"hunter2"'], []],
    [{type: 'string', format: 'binary'}, ['"x"'], []],
    [{type: 'string', format: 'byte'}, ['"QUJD"', '"QUI="', '"QU=="', '""'], ['"Q"', '"QUJ"', '"Q=U="']],
  ]
  for (const [schema, good, bad] of cases) {
    const checked = enforceableSchema(schema, 'x')
    t.notOk('format' in (checked as object) && (checked as {format?: string}).format !== undefined, `${JSON.stringify(schema)}: the format is rewritten`)
    for (const text of good) {
      t.equal(invalidity(schema, text), undefined, `ajv takes ${text}`)
      t.ok(await d.acceptsJson(checked, text), `${JSON.stringify(schema)} takes ${text}`)
    }
    for (const text of bad) {
      t.not(invalidity(schema, text), undefined, `ajv refuses ${text}`)
      t.notOk(await d.acceptsJson(checked, text), `${JSON.stringify(schema)} refuses ${text}`)
    }
  }
})

t.test("Pydantic's shapes compile and hold", async t => {
  const d = await decider(DEFAULT)
  const schema = {
    type: 'object',
    properties: {
      pet: {allOf: [{$ref: '#/$defs/Pet'}], description: 'the pet'},
      shape: {oneOf: [{$ref: '#/$defs/Circle'}, {$ref: '#/$defs/Square'}], discriminator: {propertyName: 'kind', mapping: {circle: '#/$defs/Circle', square: '#/$defs/Square'}}},
    },
    required: ['pet', 'shape'],
    $defs: {
      Pet: {type: 'object', properties: {name: {type: 'string', maxLength: 5}}, required: ['name']},
      Circle: {type: 'object', properties: {kind: {const: 'circle'}, r: {type: 'integer', minimum: 0, maximum: 9}}, required: ['kind', 'r']},
      Square: {type: 'object', properties: {kind: {const: 'square'}, side: {type: 'integer', minimum: 0, maximum: 9}}, required: ['kind', 'side']},
    },
  }
  const checked = enforceableSchema(schema, 'x')
  const good = '{"pet": {"name": "Rex"}, "shape": {"kind": "square", "side": 3}}'
  t.equal(invalidity(schema, good), undefined)
  t.ok(await d.acceptsJson(checked, good))
  t.notOk(await d.acceptsJson(checked, '{"pet": {"name": "Rex"}, "shape": {"kind": "square", "r": 3}}'))
})
