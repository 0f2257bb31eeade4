// API key (bearer / x-api-key, constant-time) and the Host allowlist, through the assembled app.
import t from 'tap'
import {buildApp} from '../../src/server/app.js'
import {hostName, isHostAllowed} from '../../src/server/security.js'

const KEY = 'sk-test-123'

t.test('hostName strips ports from every Host form', async t => {
  t.equal(hostName('localhost:8000'), 'localhost')
  t.equal(hostName('127.0.0.1'), '127.0.0.1')
  t.equal(hostName('[::1]:8000'), '[::1]')
  t.equal(hostName('[::1]'), '[::1]')
  t.equal(hostName('LocalHost:1'), 'localhost')
})

t.test('loopback names pass, others only when allowed', async t => {
  const none = new Set<string>()
  for (const h of ['127.0.0.1', '127.0.0.1:8000', 'localhost', 'localhost:80', '[::1]', '[::1]:8000']) t.ok(isHostAllowed(h, none), h)
  for (const h of ['evil.com', 'evil.com:8000', '127.0.0.1.evil.com', 'localhost.evil.com', '10.0.0.1', '']) t.notOk(isHostAllowed(h, none), h)
  t.notOk(isHostAllowed(undefined, none))
  t.ok(isHostAllowed('mybox.local:8000', new Set(['mybox.local'])))
})

t.test('with an API key', async t => {
  const app = await buildApp({apiKey: KEY})
  t.teardown(() => app.close())

  t.test('probes stay public', async t => {
    t.equal((await app.inject({url: '/health', headers: {host: 'localhost'}})).statusCode, 200)
    t.equal((await app.inject({url: '/ready', headers: {host: 'localhost'}})).statusCode, 503, 'no model yet')
  })

  t.test('missing key: 401 in the OpenAI shape on OpenAI routes', async t => {
    const r = await app.inject({url: '/v1/models', headers: {host: 'localhost'}})
    t.equal(r.statusCode, 401)
    t.same(r.json(), {error: {message: 'Missing API key', type: 'invalid_request_error', param: null, code: 'invalid_api_key'}})
  })

  t.test('wrong key: 401', async t => {
    const r = await app.inject({url: '/v1/models', headers: {host: 'localhost', authorization: 'Bearer nope'}})
    t.equal(r.statusCode, 401)
    t.equal(r.json().error.message, 'Invalid API key')
    const r2 = await app.inject({url: '/v1/models', headers: {host: 'localhost', 'x-api-key': KEY + 'x'}})
    t.equal(r2.statusCode, 401)
  })

  t.test('bearer and x-api-key both work', async t => {
    const b = await app.inject({url: '/v1/models', headers: {host: 'localhost', authorization: `Bearer ${KEY}`}})
    t.equal(b.statusCode, 200)
    t.same(b.json(), {object: 'list', data: []})
    const lower = await app.inject({url: '/v1/models', headers: {host: 'localhost', authorization: `bearer ${KEY}`}})
    t.equal(lower.statusCode, 200)
    const x = await app.inject({url: '/v1/models', headers: {host: 'localhost', 'x-api-key': KEY}})
    t.equal(x.statusCode, 200)
  })

  t.test('missing key on Anthropic routes: 401 in the Anthropic shape', async t => {
    const r = await app.inject({method: 'POST', url: '/v1/messages?beta=true', headers: {host: 'localhost'}, payload: {}})
    t.equal(r.statusCode, 401)
    const body = r.json()
    t.equal(body.type, 'error')
    t.same(body.error, {type: 'authentication_error', message: 'Missing API key'})
    t.ok(r.headers['request-id'])
  })

  t.test('unknown routes need the key too (no probing)', async t => {
    const r = await app.inject({url: '/secret', headers: {host: 'localhost'}})
    t.equal(r.statusCode, 401)
  })
})

t.test('without an API key nothing is asked', async t => {
  const app = await buildApp({})
  t.teardown(() => app.close())
  const r = await app.inject({url: '/v1/models', headers: {host: '127.0.0.1:8000'}})
  t.equal(r.statusCode, 200)
})

t.test('Host allowlist applies to every route, probes included', async t => {
  const app = await buildApp({apiKey: KEY, allowedHosts: ['mybox.local']})
  t.teardown(() => app.close())
  for (const host of ['localhost:8000', '127.0.0.1', '[::1]:8000', 'mybox.local', 'MyBox.Local:9000']) {
    const r = await app.inject({url: '/health', headers: {host}})
    t.equal(r.statusCode, 200, `${host} allowed`)
  }
  for (const url of ['/health', '/ready', '/v1/models']) {
    const r = await app.inject({url, headers: {host: 'attacker.example:8000', authorization: `Bearer ${KEY}`}})
    t.equal(r.statusCode, 403, `${url} rejected for a foreign host`)
    t.equal(r.json().error.type, 'permission_error')
  }
  const anthropic = await app.inject({method: 'POST', url: '/v1/messages', headers: {host: 'rebind.example'}, payload: {}})
  t.equal(anthropic.statusCode, 403)
  t.equal(anthropic.json().error.type, 'permission_error')
})
