// The span (shortest, longest match) of patterns as the policy writes them, against JavaScript's RegExp over every
// string up to a length: no matching string is shorter or longer than the span says, and the bounds within reach
// are met. Then the lengths beside a pattern or format that the policy keeps (implied) or refuses.
import t from 'tap'
import {patternSpan} from '../../src/grammar/text/pattern-span.js'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {strings} from '../helpers/strings.js'

// [pattern as written by the user, alphabet, longest string tried]
const CASES: Array<[string, string, number]> = [
  ['^[A-Z]{3}$', 'AB1', 5],
  ['^(ab|c){1,3}$', 'abc', 7],
  ['^a.c$', 'acé', 4],
  ['^[a-zé]{2}$', 'aé1', 3],
  ['^\\d{3}-\\d{2}$', '1-', 7],
  ['^x?(yz)*w{0,2}$', 'xyzw', 6],
  ['^(a|)b$', 'ab', 3],
  ['^(a{2}|b){2}$', 'ab', 5],
  ['abc', 'abc', 5],
  ['^a|bc$', 'abc', 4],
]

t.test('spans agree with RegExp', async t => {
  for (const [pattern, alphabet, longest] of CASES) {
    const written = (enforceableSchema({type: 'string', pattern}, 'x') as {pattern: string}).pattern
    const span = patternSpan(written)
    if (!span) {
      t.fail(`${pattern}: no span for ${written}`)
      continue
    }
    const re = new RegExp(pattern, 'u')
    let shortest = Infinity
    let tallest = -1
    for (const s of strings(alphabet, longest)) {
      if (!re.test(s)) continue
      const n = [...s].length
      shortest = Math.min(shortest, n)
      tallest = Math.max(tallest, n)
    }
    t.equal(shortest, span.min, `${pattern}: shortest`)
    if (span.max <= longest) t.equal(tallest, span.max, `${pattern}: longest`)
    else t.equal(tallest, longest, `${pattern}: unbounded (${span.max})`)
  }
  t.equal(patternSpan('abc'), undefined, 'unanchored text is not read')
})

t.test('lengths beside a pattern or format', async t => {
  const kept: Array<[Record<string, unknown>, Record<string, unknown>]> = [
    [{type: 'string', format: 'uri', minLength: 1}, {type: 'string'}], // Pydantic's AnyUrl
    [{type: 'string', format: 'date', minLength: 10, maxLength: 10}, {type: 'string'}],
    [{type: 'string', format: 'uuid', minLength: 36, maxLength: 36}, {type: 'string', format: 'uuid'}],
    [{type: 'string', pattern: '^[A-Z]{3}$', minLength: 3, maxLength: 3}, {type: 'string', pattern: '^[A-Z]{3}$'}],
    [{type: 'string', format: 'ipv4', maxLength: 15}, {type: 'string'}],
  ]
  for (const [schema, shape] of kept) {
    const out = enforceableSchema(schema, 'x') as Record<string, unknown>
    t.notOk('minLength' in out || 'maxLength' in out, `${JSON.stringify(schema)}: lengths implied`)
    t.equal(out.type, shape.type)
    if (shape.format) t.equal(out.format, shape.format)
    else t.type(out.pattern, 'string')
  }
  for (const schema of [
    {type: 'string', format: 'uri', minLength: 1, maxLength: 2083}, // Pydantic's HttpUrl: the URI is unbounded
    {type: 'string', format: 'email', maxLength: 254},
    {type: 'string', format: 'date', maxLength: 9},
    {type: 'string', format: 'duration', minLength: 3},
    {type: 'string', pattern: '^a+$', minLength: 2},
  ]) {
    t.throws(() => enforceableSchema(schema, 'x'), {message: /supported only where the pattern or format implies them/, status: 400}, JSON.stringify(schema))
  }
})
