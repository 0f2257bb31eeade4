// Speculative decoding through the HTTP server: greedy chat completions from `splash serve` with the
// draft equal those with SPLASH_DRAFT=off (default package and a synthetic one), and /metrics reports
// the acceptance length.
import t from 'tap'
import {readFileSync} from 'node:fs'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

const DEFAULT = new URL('../../packages/default/', import.meta.url).pathname
const PROMPTS = ['Write a short story about a cat.', 'What is the capital of France?', 'List three uses of Python.']

async function completions(server: ServerProcess): Promise<string[]> {
  return Promise.all(
    PROMPTS.map(async content => {
      const r = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: {'content-type': 'application/json'},
        body: JSON.stringify({messages: [{role: 'user', content}], max_tokens: 48, temperature: 0, reasoning_effort: 'none'}),
      })
      const j = await r.json()
      return JSON.stringify(j.choices[0].message) + JSON.stringify(j.usage.completion_tokens)
    }),
  )
}

async function serve(model: string, draft: 'on' | 'off'): Promise<ServerProcess> {
  return startServe(['--model', model, '--no-webui'], {SPLASH_DRAFT: draft})
}

for (const [name, model] of [
  ['default package', async () => DEFAULT],
  ['synthetic tiny-hybrid', async () => synthFixture('tiny-hybrid', 'q4')],
] as const) {
  t.test(`${name}: greedy over HTTP with the draft equals SPLASH_DRAFT=off`, async t => {
    const dir = await model()
    const off = await serve(dir, 'off')
    const a = await completions(off)
    const offMetrics = await (await fetch(`${off.url}/metrics`)).text()
    off.child.kill('SIGTERM')
    await off.exited
    t.match(offMetrics, /splash_spec_verify_passes_total 0/)
    const on = await serve(dir, 'on')
    const b = await completions(on)
    const metrics = await (await fetch(`${on.url}/metrics`)).text()
    on.child.kill('SIGTERM')
    await on.exited
    t.same(b, a)
    const passes = Number(/^splash_spec_verify_passes_total (\d+)/m.exec(metrics)?.[1])
    t.ok(passes > 0, `${passes} verify passes`)
    t.match(metrics, /splash_spec_acceptance_length_bucket\{le="16"\} \d+/)
  })
}

t.test('chat timings report the draft (llama.cpp-style fields) when it is used', async t => {
  const server = await startServe(['--model', DEFAULT, '--no-webui'], {SPLASH_DRAFT: 'on', SPLASH_DRAFT_FIXED: '1'})
  t.teardown(async () => {
    server.child.kill('SIGTERM')
    await server.exited
  })
  const r = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({messages: [{role: 'user', content: 'Translate cat into Spanish.'}], max_tokens: 60, temperature: 0}),
  })
  const timings = (await r.json()).timings
  t.ok(timings.draft_n > 0, `draft_n ${timings.draft_n}`)
  t.ok(timings.draft_n_accepted >= 0 && timings.draft_n_accepted <= timings.draft_n)
  t.ok(timings.draft_acceptance_length >= 1, `acceptance length ${timings.draft_acceptance_length}`)
})

// Image prompts speculate too: the verify rows carry the target's M-RoPE positions (index + rope delta), so greedy
// output with the draft (forced on every step) equals SPLASH_DRAFT=off; a replay goes through the prefix cache.
t.test('synthetic tiny-vl: greedy image requests with the draft equal SPLASH_DRAFT=off', async t => {
  const dir = await synthFixture('tiny-vl', 'q4')
  const fixture = new URL('../fixtures/reference/qwen3_5-vl-image/', import.meta.url).pathname
  const png = (f: string) => `data:image/png;base64,${readFileSync(fixture + f).toString('base64')}`
  const ask = (server: ServerProcess) =>
    Promise.all(
      [
        [{type: 'text', text: 'Describe this picture in detail.'}, {type: 'image_url', image_url: {url: png('image-b.png')}}],
        [{type: 'image_url', image_url: {url: png('image-a.png')}}, {type: 'text', text: 'and'}, {type: 'image_url', image_url: {url: png('image-b.png')}}, {type: 'text', text: 'Compare them.'}],
      ].map(async content => {
        const body = {messages: [{role: 'user', content}], max_tokens: 40, temperature: 0, reasoning_effort: 'none', ignore_eos: true}
        const once = async () => {
          const r = await fetch(`${server.url}/v1/chat/completions`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body)})
          const j = await r.json()
          return JSON.stringify(j.choices[0].message) + JSON.stringify(j.usage.completion_tokens)
        }
        return [await once(), await once()] // the second is served from the prefix cache
      }),
    )
  const off = await startServe(['--model', dir, '--no-webui'], {SPLASH_DRAFT: 'off'})
  const a = await ask(off)
  off.child.kill('SIGTERM')
  await off.exited
  const on = await startServe(['--model', dir, '--no-webui'], {SPLASH_DRAFT: 'on', SPLASH_DRAFT_FIXED: '1'})
  const b = await ask(on)
  const metrics = await (await fetch(`${on.url}/metrics`)).text()
  on.child.kill('SIGTERM')
  await on.exited
  t.same(b, a, 'the same answers, first asked and replayed')
  t.equal(a[0][1], a[0][0], 'a replay answers as the first request')
  const passes = Number(/^splash_spec_verify_passes_total (\d+)/m.exec(metrics)?.[1])
  // every decode step of the 4 requests is a verify pass committing at most a block (16 tokens)
  t.ok(passes >= (4 * 39) / 16, `${passes} verify passes for the image requests`)
  const cached = Number(/^splash_prefix_cache_reused_tokens_total (\d+)/m.exec(metrics)?.[1] ?? 0)
  t.ok(cached > 0, `the replays restored ${cached} tokens`)
})
