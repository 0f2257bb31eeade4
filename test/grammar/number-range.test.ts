// Bounded numbers (XGrammar bounds no number at all): the range expression of number-range.ts matches exactly the
// decimals (no exponent, at most fractionDigits() fraction digits) whose exact value lies in the range, with
// inclusive and exclusive sides, checked string by string around the bounds of 400 random ranges; the only
// decimals it leaves out inside a range are "-0…" forms when the range starts at 0. Compiled for a real
// vocabulary, a bounded number accepts its bounds (inclusive) and refuses its neighbours; a bounded number XGrammar
// would be left to bound is a 400.
import t from 'tap'
import {fractionDigits, numberRangeEbnf, plainDecimal, type Bound} from '../../src/grammar/json/number-range.js'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {synthFixture} from '../helpers/packages.js'
import {decider} from '../helpers/grammar-accepts.js'
import {seeded} from '../helpers/grammar-walk.js'

/** The expression as an anchored RegExp (literals of digits, "-" and ".", classes, ?, {m,n}, | and groups). */
function asRegExp(ebnf: string): RegExp {
  const body = ebnf.replace(/""/g, '').replace(/"(-|\.|[0-9]+)"/g, (_, x: string) => (x === '.' ? '\\.' : x)).replace(/\s+/g, '')
  if (body.includes('"')) throw new Error(`an unexpected literal in ${ebnf}`)
  return new RegExp(`^(?:${body.replace(/\((?!\?)/g, '(?:')})$`)
}

/** A decimal string's exact value, scaled by 10^40 (no exponent). */
function scaled(s: string): bigint {
  const neg = s.startsWith('-')
  const [i, f = ''] = (neg ? s.slice(1) : s).split('.')
  const v = BigInt(i! + f.padEnd(40, '0'))
  return neg ? -v : v
}

/** A double as a plain decimal string. */
function plain(x: number): string {
  const [i, f] = plainDecimal(Math.abs(x))
  return (x < 0 ? '-' : '') + i.toString() + (f ? `.${f}` : '')
}

t.test('plain decimals of doubles', async t => {
  t.same(plainDecimal(0), [0n, ''])
  t.same(plainDecimal(0.1), [0n, '1'])
  t.same(plainDecimal(1e-7), [0n, '0000001'])
  t.same(plainDecimal(123.456), [123n, '456'])
  t.same(plainDecimal(1e21), [10n ** 21n, ''])
  t.same(plainDecimal(Number.MAX_SAFE_INTEGER), [BigInt(Number.MAX_SAFE_INTEGER), ''])
})

t.test('the range expression matches exactly the decimals in the range', async t => {
  const rnd = seeded(9)
  const value = (): number => {
    const scale = [1, 10, 100, 0.01, 1000][Math.floor(rnd() * 5)]!
    const v = (rnd() - 0.4) * scale
    const k = rnd()
    return k < 0.2 ? Math.round(v) : k < 0.5 ? Math.round(v * 100) / 100 : Number(v.toPrecision(1 + Math.floor(rnd() * 5)))
  }
  const ranges: Array<[Bound, Bound]> = [
    [{value: 0, strict: false}, {value: 1, strict: false}],
    [{value: -1.5, strict: true}, {value: 2.25, strict: false}],
    [{value: 0, strict: true}, {value: 0.001, strict: true}],
    [{value: -3, strict: false}, {value: -3, strict: false}],
    [{value: 0.1, strict: false}, {value: 0.1000001, strict: true}],
  ]
  while (ranges.length < 400) {
    let a = value()
    let b = value()
    if (a > b) [a, b] = [b, a]
    const lo = {value: a, strict: rnd() < 0.3}
    const hi = {value: b, strict: rnd() < 0.3}
    if (a === b && (lo.strict || hi.strict)) continue
    ranges.push([lo, hi])
  }
  let checked = 0
  for (const [lo, hi] of ranges) {
    const ebnf = numberRangeEbnf(lo, hi)
    if (ebnf === undefined) {
      t.fail(`${JSON.stringify([lo, hi])}: no expression`)
      continue
    }
    const re = asRegExp(ebnf)
    const cap = fractionDigits(lo, hi)
    const L = scaled(plain(lo.value))
    const H = scaled(plain(hi.value))
    const candidates = new Set<string>()
    for (const v of [lo.value, hi.value, 0, (lo.value + hi.value) / 2])
      for (const d of [-1, -0.1, -0.01, -0.001, -1e-6, 0, 1e-6, 0.001, 0.01, 0.1, 1])
        for (const p of [0, 1, 2, 3, 6, cap, cap + 1]) candidates.add(plain(Number((v + d).toFixed(p))))
    for (const c of [...candidates]) {
      candidates.add(c.includes('.') ? `${c}0` : `${c}.0`)
      candidates.add(c.startsWith('-') ? c.slice(1) : `-${c}`)
    }
    for (const s of candidates) {
      if (!/^-?(0|[1-9][0-9]*)(\.[0-9]+)?$/.test(s)) continue
      const v = scaled(s)
      const inside = (lo.strict ? v > L : v >= L) && (hi.strict ? v < H : v <= H) && (s.split('.')[1] ?? '').length <= cap
      const got = re.test(s)
      checked++
      if (got && !inside) t.fail(`${JSON.stringify([lo, hi])}: ${s} accepted`)
      if (!got && inside && !(s.startsWith('-') && v === 0n)) t.fail(`${JSON.stringify([lo, hi])}: ${s} refused`)
      if (got) {
        const parsed = JSON.parse(s) as number
        if (parsed < lo.value || parsed > hi.value) t.fail(`${s} parses outside ${lo.value}..${hi.value}`)
      }
    }
  }
  t.ok(checked > 50000, `${checked} decimals over ${ranges.length} ranges`)
  t.throws(() => numberRangeEbnf({value: 2, strict: false}, {value: 1, strict: false}), RangeError)
})

t.test('compiled for a real vocabulary: bounds accepted, neighbours refused', async t => {
  const {grammars, acceptsJson: accepts} = await decider(await synthFixture('tiny-hybrid', 'q4'))
  const obj = (v: unknown) => ({type: 'object', properties: {v}, required: ['v'], additionalProperties: false})
  const cases: Array<[unknown, string[], string[]]> = [
    [obj({type: 'number', minimum: 0, maximum: 1}), ['0', '1', '0.5', '0.999999', '1.0'], ['1.01', '-0.1', '2', '1e0', '0.00000001']],
    [obj({type: 'number', exclusiveMinimum: -2.5, exclusiveMaximum: 7.25}), ['-2.4', '7.2499', '0', '-2.49'], ['-2.5', '7.25', '7.3', '-3']],
    [obj({type: ['number', 'null'], minimum: 0.5, maximum: 99.75}), ['0.5', '99.75', 'null', '42'], ['0.49', '99.76', '100', '"x"']],
    [obj({type: 'array', items: {type: 'number', minimum: -1, maximum: 1}, maxItems: 2}), ['[-1, 1]', '[0.25]'], ['[1.5]', '[-1.01]']],
  ]
  for (const [schema, good, bad] of cases) {
    const checked = enforceableSchema(schema, 'x')
    for (const v of good) t.ok(await accepts(checked, `{"v": ${v}}`), `${JSON.stringify(schema)} takes ${v}`)
    for (const v of bad) t.notOk(await accepts(checked, `{"v": ${v}}`), `${JSON.stringify(schema)} refuses ${v}`)
  }
  // a bounded number next to keywords that keep it from being replaced whole: a 400, never an unbounded number
  const refused = await grammars.matcher({type: 'json_schema', schema: {type: 'number', minimum: 0, maximum: 1, enum: [0.5, 3]}, param: 'response_format'}).then(
    () => undefined,
    (e: unknown) => e as {status?: number; message?: string},
  )
  t.equal(refused?.status, 400, 'a bounded number next to enum: 400')
  t.match(refused?.message ?? '', /cannot be enforced/)
})
