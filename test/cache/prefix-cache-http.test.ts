// The prefix cache seen by clients of `splash serve` on the default package: an agent-style conversation
// (the whole history resent every turn) reports the reused prompt tokens in every API's usage through the
// official SDKs, a resent turn gives the same answer as the first time, /metrics counts hits and reused
// tokens, a full queue answers 503 with Retry-After in the API's own error shape, and a restarted server finds
// the conversation in the cache's disk tier.
import t from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import {startServe} from '../helpers/cli.js'
import {mkdtempSync, readdirSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname

t.test('cached prompt tokens in Chat Completions, Responses and Messages usage', async t => {
  const server = await startServe(['--model', DEFAULT, '--no-webui'])
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  const openai = new OpenAI({baseURL: `${server.url}/v1`, apiKey: 'none'})
  const anthropic = new Anthropic({baseURL: server.url, apiKey: 'none'})
  const system = 'You are a careful coding assistant. '.repeat(40)

  // Chat Completions: turn 1, then turn 2 with turn 1's answer in the history
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    {role: 'system', content: system},
    {role: 'user', content: 'Write a Python function that reverses a string.'},
  ]
  const first = await openai.chat.completions.create({model: 'splash/default', messages, max_tokens: 32, temperature: 0})
  t.equal(first.usage?.prompt_tokens_details?.cached_tokens, 0, 'a new conversation reuses nothing')
  const replay = await openai.chat.completions.create({model: 'splash/default', messages, max_tokens: 32, temperature: 0})
  t.equal(replay.usage?.prompt_tokens_details?.cached_tokens, first.usage!.prompt_tokens - 1, 'a resent prompt reuses all but its last token')
  t.same(replay.choices[0].message, first.choices[0].message, 'and gives the same answer')
  messages.push(first.choices[0].message as OpenAI.Chat.ChatCompletionMessageParam, {role: 'user', content: 'Now in JavaScript.'})
  const second = await openai.chat.completions.create({model: 'splash/default', messages, max_tokens: 16, temperature: 0})
  const cached2 = second.usage?.prompt_tokens_details?.cached_tokens ?? 0
  t.ok(cached2 >= first.usage!.prompt_tokens - 8, `turn 2 reuses turn 1's prompt (${cached2} of ${second.usage!.prompt_tokens})`)

  // streaming usage carries it too
  const stream = await openai.chat.completions.create({model: 'splash/default', messages, max_tokens: 8, temperature: 0, stream: true, stream_options: {include_usage: true}})
  let streamed: OpenAI.CompletionUsage | undefined
  for await (const chunk of stream) if (chunk.usage) streamed = chunk.usage
  t.ok((streamed?.prompt_tokens_details?.cached_tokens ?? 0) >= cached2, 'streamed usage reports cached tokens')

  // Responses
  const input = [{role: 'user' as const, content: system + ' Explain what a hash map is.'}]
  await openai.responses.create({model: 'splash/default', input, max_output_tokens: 16, temperature: 0})
  const r2 = await openai.responses.create({model: 'splash/default', input, max_output_tokens: 16, temperature: 0})
  t.ok((r2.usage?.input_tokens_details?.cached_tokens ?? 0) > 0, `Responses: input_tokens_details.cached_tokens ${r2.usage?.input_tokens_details?.cached_tokens}`)

  // Anthropic Messages: input_tokens excludes cache reads
  const body = {model: 'splash/default', max_tokens: 16, system, messages: [{role: 'user' as const, content: 'What does git rebase do?'}]}
  const m1 = await anthropic.messages.create(body)
  const m2 = await anthropic.messages.create(body)
  // the system turn is already cached from the chat requests above (a prefix anchor at the next turn's start)
  const read1 = m1.usage.cache_read_input_tokens ?? 0
  const read2 = m2.usage.cache_read_input_tokens ?? 0
  t.ok(read2 > read1, `cache_read_input_tokens ${read1}, then ${read2}`)
  t.equal(m2.usage.input_tokens + read2, m1.usage.input_tokens + read1, 'input + cache reads = the whole prompt')
  t.equal(m2.usage.input_tokens, 1, 'a resent prompt computes one token')

  const metrics = await (await fetch(`${server.url}/metrics`)).text()
  const hits = Number(/^splash_prefix_cache_hits_total (\d+)/m.exec(metrics)?.[1])
  t.ok(hits >= 4, `cache hits in /metrics (${hits})`)
  t.match(metrics, /splash_prefix_cache_bytes [1-9]\d*/)
  t.match(metrics, /splash_prefix_cache_reused_tokens_total [1-9]\d*/)
})

t.test('a full queue answers 503 with Retry-After', async t => {
  // one running request and one waiting slot: a burst of slow requests overflows the queue
  const server = await startServe(['--model', DEFAULT, '--no-webui'], {SPLASH_MAX_RUNNING: '1', SPLASH_MAX_WAITING: '1'})
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  const send = (url: string, body: object) =>
    fetch(`${server.url}${url}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body)})
  const slow = {messages: [{role: 'user', content: 'Count to a thousand.'}], max_tokens: 120, ignore_eos: true, reasoning_effort: 'none'}
  const burst = await Promise.all(Array.from({length: 4}, () => send('/v1/chat/completions', slow)))
  const refused = burst.filter(r => r.status === 503)
  t.ok(refused.length >= 1, `${refused.length} of 4 refused`)
  for (const r of refused) {
    t.ok(Number(r.headers.get('retry-after')) >= 1, 'Retry-After is set')
    const j = await r.json()
    t.equal(j.error.type, 'server_error', 'OpenAI error shape')
  }
  const accepted = burst.filter(r => r.status === 200)
  t.ok(accepted.length >= 1)
  for (const r of accepted) await r.json()
  const a = await send('/v1/messages', {model: 'splash/default', max_tokens: 16, messages: [{role: 'user', content: 'Hi'}]})
  t.ok(a.status === 200 || a.status === 529 || a.status === 503)
  await a.text()
})

t.test('a restarted server resumes an agent conversation from the disk tier', async t => {
  const data = mkdtempSync(join(tmpdir(), 'splash-restart-'))
  t.teardown(() => rmSync(data, {recursive: true, force: true}))
  const system = 'You are a careful coding assistant working in a large repository. '.repeat(30)
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    {role: 'system', content: system},
    {role: 'user', content: 'List three uses of Python.'},
  ]
  const ask = async (url: string) => {
    const openai = new OpenAI({baseURL: `${url}/v1`, apiKey: 'none'})
    return openai.chat.completions.create({model: 'splash/default', messages, max_tokens: 24, temperature: 0})
  }
  const first = await startServe(['--model', DEFAULT, '--no-webui'], {SPLASH_DATA_DIR: data})
  const before = await ask(first.url)
  t.equal(before.usage?.prompt_tokens_details?.cached_tokens, 0, 'a new conversation reuses nothing')
  first.child.kill('SIGTERM')
  t.equal(await first.exited, 0, 'the server stops cleanly, writing its prefix cache')
  t.match(first.output(), /Prefix cache on disk: .*\(0 snapshots/, 'the first start found an empty folder')

  const second = await startServe(['--model', DEFAULT, '--no-webui'], {SPLASH_DATA_DIR: data})
  t.teardown(async () => {
    second.child.kill('SIGTERM')
    await second.exited
  })
  t.match(second.output(), /Prefix cache on disk: .*\([1-9]\d* snapshots/, 'the second start lists what the first kept')
  const again = await ask(second.url)
  t.equal(again.usage?.prompt_tokens_details?.cached_tokens, before.usage!.prompt_tokens - 1, 'the resent prompt is read back from disk')
  t.same(again.choices[0].message, before.choices[0].message, 'and gives the same answer')
  const metrics = await (await fetch(`${second.url}/metrics`)).text()
  t.match(metrics, /splash_prefix_cache_disk_loads [1-9]/, '/metrics counts the read-back')
  t.match(metrics, /splash_prefix_cache_disk_bytes [1-9]\d*/)
  messages.push(before.choices[0].message as OpenAI.Chat.ChatCompletionMessageParam, {role: 'user', content: 'Now three uses of Rust.'})
  const next = await ask(second.url)
  const cached = next.usage?.prompt_tokens_details?.cached_tokens ?? 0
  t.ok(cached >= before.usage!.prompt_tokens - 8, `the next turn resumes from the first one's prompt (${cached} of ${next.usage!.prompt_tokens})`)
})

t.test('an idle server has written its cache: a kill loses nothing', async t => {
  const data = mkdtempSync(join(tmpdir(), 'splash-kill-'))
  t.teardown(() => rmSync(data, {recursive: true, force: true}))
  const messages: OpenAI.Chat.ChatCompletionMessageParam[] = [
    {role: 'system', content: 'You answer questions about build systems. '.repeat(40)},
    {role: 'user', content: 'What does make do?'},
  ]
  const ask = (url: string) => new OpenAI({baseURL: `${url}/v1`, apiKey: 'none'}).chat.completions.create({model: 'splash/default', messages, max_tokens: 16, temperature: 0})
  const first = await startServe(['--model', DEFAULT, '--no-webui'], {SPLASH_DATA_DIR: data})
  const before = await ask(first.url)
  // the server writes its snapshots about two seconds after its last request, one file at a time: wait until there is
  // a file for every snapshot the memory tier holds (/metrics), then kill it
  const snaps = () => readdirSync(join(data, 'prefix-cache'), {recursive: true}).filter(f => String(f).endsWith('.snap')).length
  const held = async () => Number(/^splash_prefix_cache_snapshots (\d+)/m.exec(await (await fetch(`${first.url}/metrics`)).text())?.[1])
  const deadline = Date.now() + 30_000
  let want = await held()
  while (snaps() < want && Date.now() < deadline) {
    await new Promise(r => setTimeout(r, 200))
    want = await held() // the finished request's own snapshot lands just after its answer
  }
  t.ok(want > 0 && snaps() >= want, `${snaps()} snapshot files written while idle, for the ${want} snapshots held`)
  first.child.kill('SIGKILL')
  await first.exited
  const second = await startServe(['--model', DEFAULT, '--no-webui'], {SPLASH_DATA_DIR: data})
  t.teardown(async () => {
    second.child.kill('SIGTERM')
    await second.exited
  })
  const again = await ask(second.url)
  t.equal(again.usage?.prompt_tokens_details?.cached_tokens, before.usage!.prompt_tokens - 1, 'the prompt is read back after the kill')
  t.same(again.choices[0].message, before.choices[0].message, 'and gives the same answer')
})
