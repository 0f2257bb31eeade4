// Lark grammars converted to XGrammar EBNF and run through XGrammar's own string matcher: Codex's
// apply_patch grammar accepts patches and rejects near misses, in both spellings (raw, and inside a JSON
// string); every supported construct means what Lark means; what cannot be enforced is refused by name.
import t from 'tap'
import {larkGrammar} from '../../src/grammar/text/lark.js'
import {GrammarRefusal, toEbnf} from '../../src/grammar/text/text-grammar.js'
import {toolInputEbnf} from '../../src/grammar/tool-input.js'
import {SplashError} from '../../src/errors.js'
import {xgrammar} from '../../src/grammar/xgrammar.js'
import {APPLY_PATCH_LARK} from '../helpers/grammars.js'


/** Whether XGrammar accepts `text` under the converted grammar (raw or JSON spelling). */
async function accepts(lark: string, text: string, spelling: 'raw' | 'json' = 'raw'): Promise<boolean> {
  const xg = xgrammar()
  const g = await xg.Grammar.fromEBNF(toEbnf(larkGrammar(lark), spelling))
  try {
    return await xg.Testings.isGrammarAcceptString(g, spelling === 'raw' ? text : JSON.stringify(text).slice(1, -1))
  } finally {
    g.dispose()
  }
}

function refusal(lark: string): string {
  try {
    toEbnf(larkGrammar(lark), 'raw')
  } catch (e) {
    if (e instanceof GrammarRefusal) return e.construct
    throw e
  }
  return 'accepted'
}

const VALID = [
  '*** Begin Patch\n*** Add File: hello.txt\n+Hello world\n*** End Patch\n',
  '*** Begin Patch\n*** Add File: a b/c.txt\n+\n+é ü 漢字 "quoted" \\ back\n*** End Patch',
  '*** Begin Patch\n*** Update File: src/app.py\n*** Move to: src/main.py\n@@ def greet():\n-print("Hi")\n+print("Hello, world!")\n \n*** End of File\n*** Delete File: obsolete.txt\n*** End Patch\n',
  '*** Begin Patch\n*** Update File: x\n*** End Patch\n',
  '*** Begin Patch\n*** Update File: x\n@@\n+\t tab\n*** End Patch\n',
]
const INVALID = [
  '*** Begin Patch\n*** End Patch\n', // no hunk
  '*** Begin Patch\n*** Add File: a\n*** End Patch\n', // an added file needs lines
  '*** Begin Patch\n*** Add File: a\nno plus\n*** End Patch\n',
  '*** Begin Patch\n*** Add File: \n+x\n*** End Patch\n', // empty file name
  '*** Begin Patch\n*** Update File: x\n@@\n*context without prefix\n*** End Patch\n',
  '*** Begin Patch\n*** Delete File: a\n*** End Patch\n\n', // one LF at most after the end
  '*** Begin Patch\r\n*** Delete File: a\n*** End Patch\n',
  '*** Begin Patch\n*** Delete File: a\n*** End Patch\nmore',
]

t.test("Codex's apply_patch grammar: valid patches accepted, near misses refused, in both spellings", async t => {
  for (const spelling of ['raw', 'json'] as const) {
    for (const p of VALID) t.ok(await accepts(APPLY_PATCH_LARK, p, spelling), `${spelling} accepts ${JSON.stringify(p)}`)
    for (const p of INVALID) t.notOk(await accepts(APPLY_PATCH_LARK, p, spelling), `${spelling} refuses ${JSON.stringify(p)}`)
  }
  // JSON spelling: the raw newline (unescaped) is not a JSON string's content
  const xg = xgrammar()
  const g = await xg.Grammar.fromEBNF(toEbnf(larkGrammar(APPLY_PATCH_LARK), 'json'))
  t.notOk(await xg.Testings.isGrammarAcceptString(g, VALID[0]!), 'raw newlines are not JSON string content')
  g.dispose()
})

t.test('the tool input compiles with the real vocabulary', async t => {
  const ebnf = toolInputEbnf('apply_patch', {syntax: 'lark', definition: APPLY_PATCH_LARK, param: 'tools[0].format'})
  const xg = xgrammar()
  for (const e of [ebnf.raw, ebnf.json]) {
    const g = await xg.Grammar.fromEBNF(e)
    t.ok(g.toString().includes('root'), 'XGrammar parses it')
    g.dispose()
  }
})

t.test('constructs mean what Lark means', async t => {
  const cases: Array<[string, string[], string[]]> = [
    // aliases, ?inline and !keep rules, priorities, comments of both kinds, continuation lines
    ['?start: a "x" -> alias\n  | b\n!a.2: "a" // comment\nb: "b"', ['ax', 'b'], ['a', 'bx']],
    ['start: "a" ["b"] "c"?', ['a', 'ab', 'abc', 'ac'], ['abb', 'c']],
    ['start: "a"~3', ['aaa'], ['aa', 'aaaa']],
    ['start: ("a" | "b")~1..2', ['a', 'ab', 'bb'], ['', 'aba']],
    ['start: LETTER+\nLETTER: "a".."c"', ['abc', 'cab'], ['abd', '']],
    ['start: "Select"i " " X\nX: /[0-9]{2,}/', ['select 12', 'SELECT 123', 'sElEcT 00'], ['select 1', 'selec 12']],
    ['start: INT | SIGNED_NUMBER | ESCAPED_STRING\n%import common (INT, SIGNED_NUMBER, ESCAPED_STRING)', ['12', '-1.5e3', '"a\\"b"', '""'], ['"a"b"', '1.e', 'x', '"a\nb"']],
    ['start: N\n%import common.NUMBER -> N', ['1.5', '3'], ['a']],
    ['start: CNAME "=" WORD\n%import common.CNAME\n%import common.WORD', ['_a1=abc'], ['1a=abc', 'a=b1']],
    ['start: C_COMMENT\n%import common.C_COMMENT', ['/* a */', '/** x **/', '/**/'], ['/* a */ b */', '/* a']],
    ['start: "a" "b" "c"\n%ignore " "\n%ignore /\\t/', ['abc', ' a b\tc ', 'a  b c'], ['a b x']],
    ['start: item ("," item)*\nitem: WORD\n%import common.WORD\n%import common.WS\n%ignore WS', ['a,b', 'a , b\n, c '], ['a b', 'a,,b']],
    ['start: /[^a-z]+/', ['ÉÀ', '12 !'], ['a', '']],
    ['start: /[αβγ]+x/', ['αβx', 'γx'], ['δx', 'x']],
    ['start: /a.c/s', ['abc', 'a\nc', 'aéc'], ['ac']],
    ['start: /a.c/', ['abc', 'aéc'], ['a\nc']],
    ['start: /\\d+\\s\\w+/', ['12 ab_9', '1\tx'], ['a b', '12  x']],
    ['start: /(?:ab|c)+(?P<n>d)?/', ['abc', 'cabd'], ['abcdd', 'd']],
    ['start: /\\x41\\u00e9\\//', ['Aé/'], ['A/']],
    ['start: "tab\\there" "\\u00e9"', ['tab\there\u00e9'], ['tab\\there\u00e9']],
    ['start: a\na: "(" a ")" | ""', ['', '(())'], ['(()']],
    ['start: a\na: a "x" | "x"', ['x', 'xxx'], ['']],
    ['start: /(a{2}){2}b{1,3}/', ['aaaab', 'aaaabbb'], ['aaab', 'aaaabbbb']],
  ]
  for (const [lark, yes, no] of cases) {
    for (const s of yes) t.ok(await accepts(lark, s), `${JSON.stringify(lark)} accepts ${JSON.stringify(s)}`)
    for (const s of no) t.notOk(await accepts(lark, s), `${JSON.stringify(lark)} refuses ${JSON.stringify(s)}`)
    // the JSON spelling holds the same language
    for (const s of yes) t.ok(await accepts(lark, s, 'json'), `${JSON.stringify(lark)} (json) accepts ${JSON.stringify(s)}`)
    for (const s of no) t.notOk(await accepts(lark, s, 'json'), `${JSON.stringify(lark)} (json) refuses ${JSON.stringify(s)}`)
  }
})

t.test('what cannot be enforced is refused by name', async t => {
  const cases: Array<[string, RegExp]> = [
    ['start: x{"a"}\nx{p}: p', /template/],
    ['start: "a"\n%declare B', /%declare/],
    ['start: "a"\n%override a: "b"', /%override/],
    ['start: X\n%import other.X', /%import of "other.X"/],
    ['start: X\n%import common.NOPE -> X', /no such common terminal/],
    ['start: b', /undefined rule "b"/],
    ['start: B', /undefined terminal "B"/],
    ['a: "x"', /without a "start" rule/],
    ['start: "a"\nstart: "b"', /defined twice/],
    ['start: /a/i', /regex flag "i"/],
    ['start: "é"i', /non-ASCII letter/],
    ['start: /^a/', /anchor/],
    ['start: /(?!a)b/', /lookahead/],
    ['start: /(?<=a)b/', /lookbehind/],
    ['start: /(a)\\1/', /backreference/],
    ['start: /a*?/', /lazy quantifier/],
    ['start: /a++/', /possessive/],
    ['start: /\\bword/', /assertion "\\b"/],
    ['start: /\\S+/', /\\S/],
    ['start: /[^\\s]/', /negated class/],
    ['start: /[^é]/', /excludes non-ASCII/],
    ['start: /[\\u0100-\\u04ff]/', /more than 256 non-ASCII/],
    ['start: /(?i)a/', /inline flags/],
    ['start: /a{3,2}/', /repetition/],
    ['start: "a" ~ 3..2', /repetition/],
    ['start: "ab".."c"', /one-character strings/],
    ['start: "a', /unterminated string/],
    ['start: /(a/', /unclosed/],
    ['start "a"', /where ":" was expected/],
    ['start: /(a{0,100}){0,100}/', /bounded repetition of 10000/],
    ['start: ("a"~50)~30', /bounded repetition of 1500/],
    // nesting past MAX_GROUP_NESTING (the parsers and the EBNF writer recurse on it: 5000 levels overflowed the stack)
    [`start: ${'('.repeat(65)}"a"${')'.repeat(65)}`, /nested more than 64/],
    [`start: ${'['.repeat(5000)}"a"${']'.repeat(5000)}`, /nested more than 64/],
    [`start: /${'('.repeat(100000)}a${')'.repeat(100000)}/`, /nested more than 64/],
  ]
  t.doesNotThrow(() => larkGrammar(`start: ${'('.repeat(64)}"a"${')'.repeat(64)} /${'(?:'.repeat(64)}b${')'.repeat(64)}/`), '64 levels')
  for (const [lark, why] of cases) t.match(refusal(lark), why, lark)
  // through the tool entry point: a 400 that names the construct and the request field
  try {
    toolInputEbnf('apply_patch', {syntax: 'lark', definition: 'start: /(?=x)/', param: 'tools[1].format'})
    t.fail('accepted')
  } catch (e) {
    t.ok(e instanceof SplashError)
    t.match(e, {status: 400, code: 'unsupported_grammar', param: 'tools[1].format', message: /Tool "apply_patch": its lark grammar uses a lookahead/})
  }
})
