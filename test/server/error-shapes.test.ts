// Every error reaches the client in the envelope of the API that was called, without internals.
import t from 'tap'
import {buildApp} from '../../src/server/app.js'
import {SplashError, errors} from '../../src/errors.js'
import {toSplashError} from '../../src/server/error-shapes.js'

const host = {host: 'localhost'}

t.test('unknown routes: 404 in the OpenAI shape by default', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  for (const url of ['/nope', '/v1/nope', '/v1/chat/completionz']) {
    const r = await app.inject({url, headers: host})
    t.equal(r.statusCode, 404, url)
    const body = r.json()
    t.same(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type'])
    t.equal(body.error.code, 'not_found')
    t.equal(body.error.type, 'invalid_request_error')
  }
})

t.test('unknown routes under /v1/messages: 404 in the Anthropic shape', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  const r = await app.inject({method: 'POST', url: '/v1/messages/nope', headers: host, payload: {}})
  t.equal(r.statusCode, 404)
  t.equal(r.json().type, 'error')
  t.equal(r.json().error.type, 'not_found_error')
})

t.test('thrown errors map by kind; internal errors say nothing about their cause', async t => {
  const app = await buildApp({})
  app.get('/v1/test/bad-request', async () => {
    throw errors.invalidRequest('temperature must be at most 2', 'temperature')
  })
  app.get('/v1/test/crash', async () => {
    throw new TypeError('secret internal detail at /home/x/file.ts:12')
  })
  app.get('/v1/test/busy', async () => {
    throw errors.overloaded(3)
  })
  app.get('/v1/messages/test/busy', async () => {
    throw errors.overloaded(3)
  })
  app.get('/v1/messages/test/too-long', async () => {
    throw errors.contextLengthExceeded(300000, 262144)
  })
  t.teardown(() => app.close())

  const bad = await app.inject({url: '/v1/test/bad-request', headers: host})
  t.equal(bad.statusCode, 400)
  t.same(bad.json(), {error: {message: 'temperature must be at most 2', type: 'invalid_request_error', param: 'temperature', code: 'invalid_request'}})

  const crash = await app.inject({url: '/v1/test/crash', headers: host})
  t.equal(crash.statusCode, 500)
  t.equal(crash.json().error.type, 'server_error')
  t.notMatch(crash.body, /secret|file\.ts|TypeError|at /)

  const busy = await app.inject({url: '/v1/test/busy', headers: host})
  t.equal(busy.statusCode, 503)
  t.equal(busy.headers['retry-after'], '3')

  const abusy = await app.inject({url: '/v1/messages/test/busy', headers: host})
  t.equal(abusy.statusCode, 529, "Anthropic's overloaded status")
  t.equal(abusy.json().error.type, 'overloaded_error')

  const long = await app.inject({url: '/v1/messages/test/too-long', headers: host})
  t.equal(long.statusCode, 400)
  t.match(long.json().error.message, /^prompt is too long/)
})

t.test('Fastify validation and body errors become invalid_request', async t => {
  const app = await buildApp({})
  app.post('/v1/test/validated', {schema: {body: {type: 'object', required: ['n'], properties: {n: {type: 'integer'}}}}}, async () => ({ok: true}))
  t.teardown(() => app.close())
  const r = await app.inject({method: 'POST', url: '/v1/test/validated', headers: host, payload: {n: 'x'}})
  t.equal(r.statusCode, 400)
  t.equal(r.json().error.type, 'invalid_request_error')
  t.equal(r.json().error.param, 'n')
  const broken = await app.inject({method: 'POST', url: '/v1/test/validated', headers: {...host, 'content-type': 'application/json'}, payload: '{"n":'})
  t.equal(broken.statusCode, 400)
  t.equal(broken.json().error.type, 'invalid_request_error')
})

t.test('toSplashError keeps SplashErrors and hides everything else', async t => {
  const se = new SplashError('x', 'not_found', 'gone')
  t.equal(toSplashError(se), se)
  const hidden = toSplashError(new Error('boom'))
  t.equal(hidden.kind, 'internal')
  t.equal(hidden.message, 'The server had an internal error')
})
