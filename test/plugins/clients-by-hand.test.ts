// What a client configured by hand meets on every API (Chat Completions, Responses, Messages), streaming and not:
// `model` may be left out, must otherwise name the served package (a 404 naming the served id), a prompt longer
// than the window gets the API's own context-length error with the limit, and an image sent to a package without
// a vision encoder gets a 400 that says so and how to serve one that has it. The real server on a tiny package.
import t from 'tap'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'

let server: ServerProcess
let modelId: string
let window: number

t.before(async () => {
  server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4')], {SPLASH_API_KEY: ''})
  const list = (await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string; context_length: number; input_modalities: string[]}>}
  modelId = list.data[0].id
  window = list.data[0].context_length
  t.same(list.data[0].input_modalities, ['text'], '/v1/models says the package takes text only')
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

type Api = 'chat' | 'responses' | 'messages'
const LONG = 'word '.repeat(6000)

function body(api: Api, opts: {model?: string; text?: string; image?: boolean; stream?: boolean}): Record<string, unknown> {
  const text = opts.text ?? 'hi'
  const model = opts.model === undefined ? {} : {model: opts.model}
  const stream = opts.stream ? {stream: true} : {}
  if (api === 'chat') {
    const content = opts.image ? [{type: 'image_url', image_url: {url: 'data:image/png;base64,iVBORw0KGgo='}}] : text
    return {...model, ...stream, max_tokens: 2, messages: [{role: 'user', content}]}
  }
  if (api === 'responses') {
    const content = opts.image ? [{type: 'input_image', image_url: 'data:image/png;base64,iVBORw0KGgo=', detail: 'auto'}] : text
    return {...model, ...stream, max_output_tokens: 16, input: [{role: 'user', content}]}
  }
  const content = opts.image ? [{type: 'image', source: {type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo='}}] : text
  return {...model, ...stream, max_tokens: 2, messages: [{role: 'user', content}]}
}

const PATH: Record<Api, string> = {chat: '/v1/chat/completions', responses: '/v1/responses', messages: '/v1/messages'}

async function post(api: Api, b: Record<string, unknown>): Promise<{status: number; json: any; text: string}> {
  const res = await fetch(`${server.url}${PATH[api]}`, {method: 'POST', headers: {'content-type': 'application/json', 'anthropic-version': '2023-06-01'}, body: JSON.stringify(b)})
  const text = await res.text()
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  return {status: res.status, json, text}
}

for (const api of ['chat', 'responses', 'messages'] as const) {
  t.test(`${api}: model left out or matching is served; another one is a 404 naming the served id`, async t => {
    for (const model of [undefined, modelId]) {
      for (const stream of [false, true]) {
        const r = await post(api, body(api, {model, stream}))
        t.equal(r.status, 200, `model ${model ?? '(none)'}, stream ${stream}: ${r.text.slice(0, 300)}`)
      }
    }
    for (const stream of [false, true]) {
      const r = await post(api, body(api, {model: 'gpt-4o', stream}))
      t.equal(r.status, 404, `stream ${stream}`)
      const message = api === 'messages' ? r.json.error.message : r.json.error.message
      t.equal(message, `The model "gpt-4o" does not exist; this server serves "${modelId}"`)
      if (api === 'messages') t.equal(r.json.error.type, 'not_found_error')
      else t.equal(r.json.error.code, 'model_not_found')
    }
  })

  t.test(`${api}: a prompt longer than the window gets the API's own context-length error, streaming and not`, async t => {
    for (const stream of [false, true]) {
      const r = await post(api, body(api, {model: modelId, text: LONG, stream}))
      const limit = new RegExp(`^prompt is too long: \\d+ tokens > ${window} maximum$`)
      if (api === 'responses' && stream) {
        // Codex reads a stream's failure from response.failed, which carries the code
        t.equal(r.status, 200)
        const failed = /event: response\.failed\ndata: (.+)\n/.exec(r.text)
        t.ok(failed, `a response.failed event: ${r.text.slice(0, 300)}`)
        const error = JSON.parse(failed![1]).response.error
        t.equal(error.code, 'context_length_exceeded')
        t.match(error.message, limit)
        continue
      }
      t.equal(r.status, 400, `stream ${stream}: ${r.text.slice(0, 300)}`)
      if (api === 'messages') {
        t.equal(r.json.type, 'error')
        t.equal(r.json.error.type, 'invalid_request_error')
        t.match(r.json.error.message, limit)
      } else {
        t.equal(r.json.error.code, 'context_length_exceeded')
        t.equal(r.json.error.type, 'invalid_request_error')
        t.match(r.json.error.message, limit)
      }
    }
  })

  t.test(`${api}: an image to a package without a vision encoder is a 400 that says how to serve one`, async t => {
    for (const stream of [false, true]) {
      const r = await post(api, body(api, {model: modelId, image: true, stream}))
      t.equal(r.status, 400, `stream ${stream}: ${r.text.slice(0, 300)}`)
      const message = r.json.error.message as string
      t.match(message, /: this package has no vision encoder, so it does not accept images; to send images, serve a package that has one \(`splash serve --model <package>`, whose splash.json has a "vision" tower\)$/)
    }
  })
}
