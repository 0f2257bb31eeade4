// /tokenize, /detokenize, /apply-template on the real server: the prompt exactly as generation sees it.
import t from 'tap'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

let server: ServerProcess
t.before(async () => {
  server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4')])
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

async function post(path: string, body: unknown) {
  const r = await fetch(`${server.url}${path}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body)})
  return {status: r.status, json: await r.json()}
}

const messages = [
  {role: 'system', content: 'Be brief.'},
  {role: 'user', content: 'What is 2+2?'},
]

t.test('tokenize and detokenize round trip', async t => {
  const r = await post('/tokenize', {prompt: 'héllo wörld 🙂'})
  t.equal(r.status, 200)
  t.equal(r.json.count, r.json.tokens.length)
  t.ok(r.json.max_model_len > 0)
  const d = await post('/detokenize', {tokens: r.json.tokens})
  t.equal(d.json.prompt, 'héllo wörld 🙂')
  const pieces = await post('/tokenize', {prompt: 'ab', with_pieces: true})
  t.match(pieces.json.tokens[0], {id: Number, piece: String})
})

t.test('apply-template: reasoning on by default, off with effort none', async t => {
  const on = await post('/apply-template', {messages})
  t.equal(on.status, 200)
  t.match(on.json.prompt, /<\|im_start\|>system\nBe brief\.<\|im_end\|>\n<\|im_start\|>user\nWhat is 2\+2\?<\|im_end\|>\n<\|im_start\|>assistant\n<think>\n$/)
  const off = await post('/apply-template', {messages, reasoning_effort: 'none'})
  t.match(off.json.prompt, /<\|im_start\|>assistant\n<think>\n\n<\/think>\n\n$/)
})

t.test('tokenize(messages) counts what a chat request is charged', async t => {
  const tok = await post('/tokenize', {messages})
  const chat = await post('/v1/chat/completions', {messages, max_tokens: 1})
  t.equal(tok.json.count, chat.json.usage.prompt_tokens)
})

t.test('bad input', async t => {
  t.equal((await post('/tokenize', {})).status, 400)
  t.equal((await post('/detokenize', {tokens: [99999999]})).status, 400)
  t.equal((await post('/apply-template', {messages: []})).status, 400)
})

t.test('/v1/models lists the reasoning efforts the package offers', async t => {
  const r = await (await fetch(`${server.url}/v1/models`)).json()
  t.ok(Array.isArray(r.data[0].reasoning_efforts))
  t.ok(r.data[0].reasoning_efforts.includes('none'))
  t.type(r.data[0].reasoning_effort_default, 'string')
})
