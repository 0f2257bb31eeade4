// JSON Schema patterns narrowed to what a JSON string holds raw (json-pattern.ts): XGrammar wrote a pattern's
// matches into the string unescaped, so `^.*$` let a raw quote end the string early and `\s` wrote a raw line break.
// Decided through the real grammar: no text it accepts is invalid JSON or outside the pattern; the safe part of
// each pattern is still accepted; atoms that match only escaped characters are a 400.
import t from 'tap'
import {jsonSafePattern} from '../../src/grammar/json/json-pattern.js'
import {enforceableSchema} from '../../src/grammar/schema-policy.js'
import {decider} from '../helpers/grammar-accepts.js'
import {invalidity} from '../helpers/ajv.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
const refuse = (why: string): never => {
  throw new Error(why)
}

t.test('the rewrite: structure kept, escaped characters taken out', async t => {
  const REWRITES: Array<[string, string]> = [
    ['^[a-c]{2,4}$', '^[a-c]{2,4}$'],
    ['^(ab|c)*\\.x$', '^(ab|c)*\\.x$'],
    ['^.*$', '^[^\\x00-\\x1F"\\\\]*$'],
    ['^[^,]+$', '^[^\\x00-\\x1F",\\\\]+$'],
    ['^\\s\\d$', '^[ ][0-9]$'],
    ['^[ -~]$', '^[ -!#-\\[\\]_-~^]$'],
    // JSON Schema's patterns match anywhere: open sides get any safe text, each top-level alternative its own
    ['^https?://', '^https?://[^\\x00-\\x1F"\\\\]*$'],
    ['^a|b$', '^(a[^\\x00-\\x1F"\\\\]*|[^\\x00-\\x1F"\\\\]*b)$'],
    // empty alternatives (an abort before), a caret in a class (matched nothing), groups
    ['^(|a)(b|)()$', '^(a{0}|a)(b|a{0})(a{0})$'],
    ['^[a^]$', '^[a^]$'],
    ['^[\\^]$', '^\\^$'],
    ['^(?:ab)+$', '^(?:ab)+$'],
    // the space as itself: XGrammar read "\x20A" as U+020A
    ['^[a-zA-Z ]+$', '^[ A-Za-z]+$'],
    ['^a\\x20b\\x7Fc$', '^a b[\\x7F]c$'],
    // non-ASCII members one by one beside the ASCII ones
    ['^[a-zé]$', '^([a-z]|é)$'],
    ['^[α-γ]$', '^(α|β|γ)$'],
  ]
  for (const [pattern, written] of REWRITES) t.equal(jsonSafePattern(pattern, refuse), written, pattern)
  for (const [p, why] of [['^a{,2}$', /not a valid regular expression/], ['a^b', /anchor "\^"/], ['(a$)', /anchor "\$"/], ['^(?=a)', /lookaround/], ['(?<n>a)', /lookaround/]] as const) {
    t.throws(() => jsonSafePattern(p, refuse), {message: why}, p)
  }
  // bounded repetitions of any atom, those that match multi-byte characters included (session 22: the UTF-8 guard
  // keeps such characters whole; patterns.test.ts decides texts)
  for (const p of ['^.{2}$', '^[^a]{1,3}$', '^(a|\\W){2}$', '^((.)b){2}$', 'x\\D{2}', '\\d{3}', '^(ab){2}[^a]+$', '^[a-z]{2}\\.[^.]*$', '(|a){2}']) {
    t.doesNotThrow(() => jsonSafePattern(p, refuse), p)
  }
  // a raw < outside "(?<" is a literal: refused where the caller takes < out (the XML tool-call form)
  t.throws(() => jsonSafePattern('^a<b$', refuse, [[0x3c, 0x3c]]), {message: /U\+003C/})
  for (const [p, why] of [['^[\\u4e00-\\u9fff]+$', /more than 256 non-ASCII members/], ['^"$', /quote/], ['^a\\\\b$', /U\+005C/], ['^[\\n\\t]$', /only matches/], ['^a\\nb$', /U\+000A/], ['^\\S+$', /\\S/], ['^[^é]$', /non-ASCII/]] as const) {
    t.throws(() => jsonSafePattern(p, refuse), {message: why}, p)
  }
})

t.test('decided by the grammar: nothing invalid, the safe strings still taken', async t => {
  const d = await decider(DEFAULT)
  const texts = ['x"y', 'x\\y', '\u0001', 'a\nb', 'a\tb', 'plain', 'a b', 'x,y', '"', '\\', 'é', '']
  for (const pattern of ['^[^a]*$', '^.*$', '^\\s*$', '^[^,]+$', '^[ -~]*$', '^\\D*$', '^\\W*$', '.+']) {
    const schema = {type: 'string', pattern}
    const checked = enforceableSchema(schema, 'x')
    for (const s of texts) {
      const text = JSON.stringify(s)
      const valid = invalidity(schema, text) === undefined
      const safe = !/["\\\u0000-\u001f]/.test(s)
      const accepted = await d.acceptsJson(checked, text)
      if (accepted) t.ok(valid, `${pattern} ${text}: accepted, so valid`)
      if (valid && safe) t.ok(accepted, `${pattern} ${text}: valid without escaped characters, so accepted`)
      if (!safe) t.notOk(accepted, `${pattern} ${text}: escaped characters are left out`)
      // the raw forms XGrammar wrote before: never
      if (s.includes('"') || /[\u0000-\u001f]/.test(s)) t.notOk(await d.acceptsJson(checked, `"${s}"`), `${pattern}: raw ${JSON.stringify(s)}`)
    }
  }
  // unanchored sides ("^https?://" took "https://" alone), classes with a space or a caret or non-ASCII members
  // (XGrammar aborted on "[a-zA-Z ]", took "ÿ" for "[α-ω]", refused "é" for "[à-ÿ]" and "a" for "[a^]")
  const wide = ['Ab c', 'a b', '1 2', 'AB', 'é', 'ÿ', 'Ā', 'αβ', '日', 'a\u007fb', '', 'https://', 'https://x.com', 'http:/', 'xab', 'ba', '^', 'a^']
  for (const pattern of ['^https?://', 'a', '^a|b$', 'b$', '(|a)b', '^[a^]+$', '^[\\^]$', '^[a-zA-Z ]+$', '^[ 0-9]+$', '^a b$', '^[α-ω]+$', '^[à-ÿ]+$', '^[a-zé ]+$', '^[日本]$', '^a\\x7Fb$', '^[^ !"#0]+$']) {
    const schema = {type: 'string', pattern}
    const checked = enforceableSchema(schema, 'x')
    for (const s of wide) {
      const text = JSON.stringify(s)
      const valid = invalidity(schema, text) === undefined
      t.equal(await d.acceptsJson(checked, text), valid, `${pattern} ${text}: accepted exactly when valid`)
    }
  }
  // patternProperties keys are JSON strings too
  const keys = {type: 'object', patternProperties: {'.+': {type: 'integer'}}}
  t.notOk(await d.acceptsJson(enforceableSchema(keys, 'x'), '{"a"b": 1}'))
  t.ok(await d.acceptsJson(enforceableSchema(keys, 'x'), '{"ab": 1}'))
})
