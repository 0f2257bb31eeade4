// The package tokenizer: loads tokenizer.json + config from a folder, encodes without adding specials,
// decodes exactly, names special ids, and streams detokenization equal to decode.
import t from 'tap'
import {join} from 'node:path'
import {QwenTokenizer} from '../../../models/qwen3_5/tokenizer.js'
import {SPECIAL_TOKENS, writeTinyTokenizer} from '../helpers/tiny-tokenizer.js'

const dir = writeTinyTokenizer()
const tokenizer = await QwenTokenizer.load(join(dir, 'tokenizer.json'))

t.test('loads the tokenizer and its config from the package folder', async t => {
  t.same(tokenizer.source, {tokenizerPath: join(dir, 'tokenizer.json'), configPath: join(dir, 'tokenizer_config.json')})
  const noConfig = await QwenTokenizer.load(join(dir, 'tokenizer.json'), join(dir, 'missing.json'))
  t.equal(noConfig.source?.configPath, undefined)
  t.same(noConfig.encode('the cat'), tokenizer.encode('the cat'))
})

t.test('special tokens by name', async t => {
  const ids = SPECIAL_TOKENS.map(s => tokenizer.tokenId(s))
  t.ok(ids.every(id => typeof id === 'number'))
  t.equal(new Set(ids).size, SPECIAL_TOKENS.length)
  t.equal(tokenizer.tokenId('<nope>'), undefined)
  t.equal(tokenizer.addedToken('<think>')?.special, false)
  t.equal(tokenizer.addedToken('<|im_end|>')?.special, true)
  t.ok(tokenizer.vocabSize > 256 + SPECIAL_TOKENS.length)
})

t.test('encode adds nothing; decode is exact; specials can be skipped', async t => {
  const text = '<|im_start|>user\nhi 你好 😀<|im_end|>\n'
  const ids = tokenizer.encode(text)
  t.equal(ids[0], tokenizer.tokenId('<|im_start|>'))
  t.equal(tokenizer.decode(ids), text)
  t.equal(tokenizer.decode(ids, {skipSpecialTokens: true}), 'user\nhi 你好 😀\n')
  t.equal(tokenizer.decode([]), '')
  t.equal(tokenizer.decode(tokenizer.encode('a . b , c')), 'a . b , c', 'no clean-up of spaces')
})

t.test('the streaming detokenizer matches decode', async t => {
  const ids = tokenizer.encode('<think>\n好 😀</think>\n\nok')
  const d = tokenizer.detokenizer()
  t.equal(ids.map(id => d.push(id)).join('') + d.flush(), tokenizer.decode(ids))
})

t.test('named special ids', async t => {
  const ids = tokenizer.specialIds()
  t.equal(ids.imEnd, tokenizer.tokenId('<|im_end|>'))
  t.equal(ids.thinkEnd, tokenizer.tokenId('</think>'))
  t.equal(Object.keys(ids).length, SPECIAL_TOKENS.length)
})
