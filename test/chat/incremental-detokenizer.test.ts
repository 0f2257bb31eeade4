// Streaming detokenization equals the full decode, never splits a character, and emits specials as text.
import t from 'tap'
import {Tokenizer} from '@huggingface/tokenizers'
import {IncrementalDetokenizer, TokenByteTable} from '../../src/chat/incremental-detokenizer.js'
import {TINY_TOKENIZER_CONFIG, tinyTokenizerJson} from '../models/helpers/tiny-tokenizer.js'
import {idSplits} from '../models/helpers/splits.js'

const json = tinyTokenizerJson()
const tokenizer = new Tokenizer(json, TINY_TOKENIZER_CONFIG)
const table = TokenByteTable.fromTokenizerJson(json as never)
const encode = (s: string): number[] => tokenizer.encode(s, {add_special_tokens: false}).ids
const decode = (ids: number[]) =>
  ids.length === 0 ? '' : tokenizer.decode(ids, {skip_special_tokens: false, clean_up_tokenization_spaces: false})

const samples = [
  'plain ASCII: the cat is on the mat.',
  '中文：你好，世界！你好你好',
  'emoji 😀😀 and flags 🇨🇭 and skin 👍🏽 mixed é è ü',
  '<|im_start|>assistant\n<think>\n好的 😀</think>\n\n<tool_call>\n<function=f>\n</function>\n</tool_call><|im_end|>',
  'code:\n\tconst x = "ä";\n  return x // 完了 ✅\n\n',
]

t.test('concatenated pushes equal the full decode, for any grouping of ids', async t => {
  for (const text of samples) {
    const ids = encode(text)
    t.equal(decode(ids), text, 'the tokenizer round-trips')
    const bad: number[][][] = []
    for (const groups of idSplits(ids, 50, 3)) {
      const d = new IncrementalDetokenizer(table)
      let out = ''
      for (const group of groups) {
        const piece = d.pushAll(group)
        if (/[\ud800-\udbff]$/.test(piece) || piece.includes('\ufffd')) bad.push(groups)
        out += piece
      }
      out += d.flush()
      if (out !== text) bad.push(groups)
    }
    t.same(bad, [], JSON.stringify(text))
  }
})

t.test('a character split across tokens appears only when complete', async t => {
  const ids = encode('😀')
  t.ok(ids.length > 1, 'the emoji spans several tokens in the tiny vocabulary')
  const d = new IncrementalDetokenizer(table)
  const pieces = ids.map(id => d.push(id))
  t.same(pieces.slice(0, -1).every(p => p === ''), true)
  t.equal(pieces.at(-1), '😀')
})

t.test('invalid or unfinished bytes decode as the full decode does (U+FFFD)', async t => {
  const ids = encode('😀').slice(0, 1)
  const special = tokenizer.token_to_id('<|im_end|>')!
  for (const seq of [ids, [...ids, special], [...encode('a'), ...ids, ...encode('b')]]) {
    const d = new IncrementalDetokenizer(table)
    t.equal(d.pushAll(seq) + d.flush(), decode(seq))
  }
})

t.test('skipIds produce no text', async t => {
  const end = tokenizer.token_to_id('<|im_end|>')!
  const d = new IncrementalDetokenizer(table, {skipIds: [end]})
  t.equal(d.pushAll([...encode('hi'), end]) + d.flush(), 'hi')
})

t.test('refuses a tokenizer whose decoder is not byte-level', async t => {
  t.throws(() => TokenByteTable.fromTokenizerJson({model: {vocab: {}}, decoder: {type: 'Metaspace'}}))
})
