// How bodies are read (src/server/body.ts) and how 5xx are reported (error-shapes.ts), on the app alone: JSON only,
// in its declared charset, nested at most MAX_BODY_DEPTH levels, text within MAX_PROMPT_CHARS; every 5xx logged at
// the default level with its request id and cause, and counted by route.
import t from 'tap'
import http from 'node:http'
import type {AddressInfo} from 'node:net'
import {buildApp} from '../../src/server/app.js'
import {MAX_BODY_DEPTH, MAX_PROMPT_CHARS, bodyCharset, jsonDepth, textChars} from '../../src/server/body.js'
import {errors} from '../../src/errors.js'

const host = {host: 'localhost'}

async function echoApp(lines: string[] = []) {
  const app = await buildApp({logStream: {write: line => void lines.push(line)}})
  app.post('/v1/test/echo', async request => ({body: request.body}))
  app.post('/v1/messages/test/echo', async request => ({body: request.body}))
  app.get('/v1/test/crash', async () => {
    throw new TypeError('secret cause of the crash')
  })
  app.get('/v1/test/busy', async () => {
    throw errors.overloaded(2)
  })
  app.get('/v1/test/bad', async () => {
    throw errors.invalidRequest('temperature must be at most 2', 'temperature')
  })
  return app
}

t.test('a body that is not JSON, or has no Content-Type, is a 415 naming the header to send', async t => {
  const app = await echoApp()
  t.teardown(() => app.close())
  for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
    const r = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': type}, payload: '{"a":1}'})
    t.equal(r.statusCode, 415, type)
    t.equal(r.json().error.code, 'unsupported_media_type')
    t.match(r.json().error.message, /Content-Type: application\/json/)
  }
  // in the Anthropic shape under /v1/messages
  const a = await app.inject({method: 'POST', url: '/v1/messages/test/echo', headers: {...host, 'content-type': 'text/plain'}, payload: '{}'})
  t.equal(a.statusCode, 415)
  t.equal(a.json().type, 'error')
  t.equal(a.json().error.type, 'invalid_request_error')

  // no Content-Type at all, over a real socket (inject adds one)
  await app.listen({host: '127.0.0.1', port: 0})
  const port = (app.server.address() as AddressInfo).port
  const res = await new Promise<{status: number; body: string}>((resolve, reject) => {
    const req = http.request({host: '127.0.0.1', port, method: 'POST', path: '/v1/test/echo', headers: {'content-length': '7'}}, r => {
      let body = ''
      r.on('data', d => (body += d))
      r.on('end', () => resolve({status: r.statusCode ?? 0, body}))
    })
    req.on('error', reject)
    req.end('{"a":1}')
  })
  t.equal(res.status, 415)
  t.match(JSON.parse(res.body).error.message, /no Content-Type: send the body as JSON with the header Content-Type: application\/json/)
})

t.test('a body is read in the charset it declares', async t => {
  const app = await echoApp()
  t.teardown(() => app.close())
  const value = {text: 'héllo wörld — ☃ 😀'}
  const latin = {text: 'héllo wörld'}
  const cases: Array<[string, Buffer, unknown]> = [
    ['application/json', Buffer.from(JSON.stringify(value), 'utf8'), value],
    ['application/json; charset=UTF-8', Buffer.from(JSON.stringify(value), 'utf8'), value],
    ['application/json; charset=utf-16le', Buffer.from(JSON.stringify(value), 'utf16le'), value],
    ['application/json; charset=utf-16', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(JSON.stringify(value), 'utf16le')]), value],
    ['application/json; charset=iso-8859-1', Buffer.from(JSON.stringify(latin), 'latin1'), latin],
    ['application/json; charset="windows-1252"', Buffer.from(JSON.stringify(latin), 'latin1'), latin],
  ]
  for (const [type, payload, expected] of cases) {
    const r = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': type}, payload})
    t.equal(r.statusCode, 200, type)
    t.same(r.json().body, expected, type)
  }
  const unknown = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json; charset=klingon'}, payload: '{}'})
  t.equal(unknown.statusCode, 415)
  t.match(unknown.json().error.message, /Unsupported charset "klingon".*charset=utf-8/)
  // bytes that are not UTF-8, sent as UTF-8
  const bad = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload: Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])})
  t.equal(bad.statusCode, 400)
  t.match(bad.json().error.message, /not valid text in the charset/)
  t.equal(bodyCharset('application/json'), 'utf-8')
  t.equal(bodyCharset('application/json; charset=latin1'), 'windows-1252')
})

t.test(`nesting past ${MAX_BODY_DEPTH} levels is a 400 before JSON.parse; malformed JSON a 400 that says so`, async t => {
  const app = await echoApp()
  t.teardown(() => app.close())
  const nest = (n: number) => '['.repeat(n) + ']'.repeat(n)
  const ok = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload: `{"a":${nest(MAX_BODY_DEPTH - 1)}}`})
  t.equal(ok.statusCode, 200)
  for (const payload of [`{"a":${nest(MAX_BODY_DEPTH)}}`, nest(200_000), '{"a":'.repeat(50_000)]) {
    const r = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload})
    t.equal(r.statusCode, 400)
    t.match(r.json().error.message, new RegExp(`more than ${MAX_BODY_DEPTH} levels deep`))
  }
  // brackets inside strings do not count
  t.equal(jsonDepth(JSON.stringify({a: '[[[[{{{{', b: ['\\"[', {c: 1}]})), 3)
  for (const payload of ['{"a":', 'a'.repeat(1 << 20), '{"a":1}}', '\u0000']) {
    const r = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload})
    t.equal(r.statusCode, 400, payload.slice(0, 10))
    t.match(r.json().error.message, /not valid JSON/)
  }
})

t.test('text past MAX_PROMPT_CHARS is refused before any work; inline media does not count', async t => {
  const app = await echoApp()
  t.teardown(() => app.close())
  const big = {messages: [{role: 'user', content: 'a'.repeat(MAX_PROMPT_CHARS + 1)}]}
  const r = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload: JSON.stringify(big)})
  t.equal(r.statusCode, 400)
  t.equal(r.json().error.code, 'context_length_exceeded')
  t.match(r.json().error.message, /prompt is too long: the request holds \d+ characters of text/)
  const image = {messages: [{role: 'user', content: [{type: 'image_url', image_url: {url: `data:image/png;base64,${'A'.repeat(MAX_PROMPT_CHARS + 1)}`}}]}]}
  const media = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload: JSON.stringify(image)})
  t.equal(media.statusCode, 200)
  t.equal(textChars({a: 'xyz', data: 'AAAA', b: ['de', {url: 'http://x'}]}), 'a'.length + 3 + 'data'.length + 'b'.length + 2 + 'url'.length)
})

t.test('every 5xx is logged at the default level with its request id and cause, and counted by route', async t => {
  const lines: string[] = []
  const app = await echoApp(lines)
  t.teardown(() => app.close())
  const crash = await app.inject({url: '/v1/test/crash', headers: host})
  t.equal(crash.statusCode, 500)
  t.notMatch(crash.body, /secret/)
  const busy = await app.inject({url: '/v1/test/busy', headers: host})
  t.equal(busy.statusCode, 503)
  const bad = await app.inject({url: '/v1/test/bad', headers: host})
  t.equal(bad.statusCode, 400)
  const ok = await app.inject({method: 'POST', url: '/v1/test/echo', headers: {...host, 'content-type': 'application/json'}, payload: '{}'})
  t.equal(ok.statusCode, 200)

  const logged = lines.map(l => JSON.parse(l) as {level: number; reqId: string; route: string; status: number; code: string; err?: {message: string; stack: string}; msg: string})
  t.equal(logged.length, 2, 'the two 5xx and nothing else (no 4xx, no request lines)')
  const [c, b] = logged
  t.equal(c!.level, 50)
  t.match(c!.reqId, /\S/)
  t.equal(c!.route, '/v1/test/crash')
  t.equal(c!.status, 500)
  t.equal(c!.err?.message, 'secret cause of the crash', 'the cause is in the log, not in the answer')
  t.match(c!.err?.stack, /TypeError/)
  t.equal(b!.route, '/v1/test/busy')
  t.equal(b!.status, 503)
  t.equal(b!.code, 'overloaded')
  t.equal(app.metrics.serverErrors.get({route: '/v1/test/crash', code: 'internal_error'}), 1)
  t.equal(app.metrics.serverErrors.get({route: '/v1/test/busy', code: 'overloaded'}), 1)
  const metrics = await app.inject({url: '/metrics', headers: host})
  t.match(metrics.body, /splash_server_errors_total\{code="internal_error",route="\/v1\/test\/crash"\} 1/)
})
