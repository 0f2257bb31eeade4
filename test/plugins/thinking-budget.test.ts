// Reasoning efforts are thinking budgets: when one is spent the engine closes the think block itself and the
// answer follows. Uses a copy of the default package whose manifest declares a tiny "low" budget
// (splash.json itself is not among the hashed files).
import t from 'tap'
import OpenAI from 'openai'
import {cp, mkdtemp, readFile, rm, writeFile} from 'node:fs/promises'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {root, startServe, type ServerProcess} from '../helpers/cli.js'

let server: ServerProcess
let dir: string
t.before(async () => {
  dir = await mkdtemp(join(tmpdir(), 'splash-budget-'))
  await cp(join(root, 'packages', 'default'), dir, {recursive: true})
  const manifest = JSON.parse(await readFile(join(dir, 'splash.json'), 'utf8'))
  manifest.reasoning = {default: 'medium', efforts: {none: 0, low: 6, medium: 4096}}
  await writeFile(join(dir, 'splash.json'), JSON.stringify(manifest, null, 2))
  server = await startServe(['--model', dir], {SPLASH_DATA_DIR: join(dir, 'data')})
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
  await rm(dir, {recursive: true, force: true})
})

t.test('a spent budget closes the think block and the answer follows', async t => {
  const client = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0})
  const messages = [{role: 'user' as const, content: 'Explain what a Python dictionary is.'}]
  const model = (await client.models.list()).data[0]!.id
  const free = await client.chat.completions.create({model, messages, max_tokens: 300, temperature: 0, reasoning_effort: 'medium'})
  const freeReasoning = free.usage?.completion_tokens_details?.reasoning_tokens ?? 0
  t.ok(freeReasoning > 8, `without a budget the model thinks for ${freeReasoning} tokens`)
  const low = await client.chat.completions.create({model, messages, max_tokens: 300, temperature: 0, reasoning_effort: 'low'})
  const reasoning = low.usage?.completion_tokens_details?.reasoning_tokens ?? 0
  t.ok(reasoning <= 6 + 3, `with a budget of 6 it thinks for ${reasoning} tokens (the closing tokens included)`)
  const m = low.choices[0].message as {content: string | null; reasoning_content?: string}
  t.ok((m.content ?? '').length > 0, 'an answer follows the closed think block')
  t.notMatch(m.content ?? '', /<\/?think>/)
  const none = await client.chat.completions.create({model, messages, max_tokens: 100, temperature: 0, reasoning_effort: 'none'})
  t.equal(none.usage?.completion_tokens_details?.reasoning_tokens, 0, 'effort none: no thinking')
  t.notOk((none.choices[0].message as {reasoning_content?: string}).reasoning_content, 'no reasoning_content')
})
