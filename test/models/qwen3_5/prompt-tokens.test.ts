// Per-turn prompt token cache: ids equal tokenizing the whole prompt, only new turns are tokenized,
// and the worker path gives the same ids.
import t from 'tap'
import {join} from 'node:path'
import {ChatTemplate, type ChatMessage} from '../../../models/qwen3_5/template.js'
import {QwenTokenizer} from '../../../models/qwen3_5/tokenizer.js'
import {PromptTokenizer} from '../../../models/qwen3_5/prompt-tokens.js'
import {writeTinyTokenizer} from '../helpers/tiny-tokenizer.js'
import {rng} from '../helpers/splits.js'

const dir = writeTinyTokenizer()
const tokenizer = await QwenTokenizer.load(join(dir, 'tokenizer.json'))
const template = await ChatTemplate.load(new URL('../../../models/qwen3_5/chat_template.jinja', import.meta.url).pathname)

const words = ['the', ' cat', ' 你好', ' 😀', '\n', '  ', '\n\n', ' <|im_start|>', ' code()', ' é', ' tool', '\t']
function conversation(turns: number, seed: number): ChatMessage[] {
  const random = rng(seed)
  const text = () => Array.from({length: 1 + Math.floor(random() * 30)}, () => words[Math.floor(random() * words.length)]).join('')
  const out: ChatMessage[] = [{role: 'system', content: text()}]
  for (let i = 0; i < turns; i++) {
    out.push({role: 'user', content: text()})
    out.push({role: 'assistant', content: text(), reasoning_content: text()})
  }
  return out
}

t.test('ids equal the whole-prompt encode; a resent conversation tokenizes only its new turn', async t => {
  for (let seed = 1; seed <= 20; seed++) {
    const cache = new PromptTokenizer(tokenizer, {workers: 0})
    const messages = conversation(6, seed)
    const prompt = template.render(messages)
    t.same(cache.segments(prompt).join(''), prompt)
    const ids = cache.encode(prompt)
    if (JSON.stringify(ids) !== JSON.stringify(tokenizer.encode(prompt))) t.fail(`seed ${seed}: ids differ`)
    messages.push({role: 'user', content: 'and one more question ' + seed})
    const next = template.render(messages)
    const ids2 = cache.encode(next)
    if (JSON.stringify(ids2) !== JSON.stringify(tokenizer.encode(next))) t.fail(`seed ${seed}: ids differ after a new turn`)
    // The old generation prompt is gone, the last assistant turn changed its think block, and the new user
    // turn and generation prompt follow: everything before them comes from the cache.
    t.ok(cache.last.cachedSegments >= cache.last.segments - 3, `seed ${seed}: ${JSON.stringify(cache.last)}`)
  }
})

t.test('without a usable boundary token the prompt is one segment', async t => {
  const cache = new PromptTokenizer(tokenizer, {boundary: '<no such token>', workers: 0})
  t.same(cache.segments('a<|im_start|>b'), ['a<|im_start|>b'])
  t.same(cache.encode('a<|im_start|>b'), tokenizer.encode('a<|im_start|>b'))
})

t.test('encodeAsync tokenizes large uncached text on worker threads, with the same ids', async t => {
  const cache = new PromptTokenizer(tokenizer, {workerThreshold: 0, workers: 2})
  t.teardown(() => cache.close())
  const prompt = template.render(conversation(10, 99))
  const ids = await cache.encodeAsync(prompt)
  t.same(ids, tokenizer.encode(prompt))
  t.equal(cache.last.cachedSegments, 0)
  const again = await cache.encodeAsync(prompt)
  t.same(again, ids)
  t.equal(cache.last.cachedSegments, cache.last.segments)
})
