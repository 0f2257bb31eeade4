import t from 'tap'
import {buildApp} from '../../src/server/app.js'

t.test('/metrics is Prometheus text, counts requests, and needs the key', async t => {
  const app = await buildApp({apiKey: 'k'})
  t.teardown(() => app.close())
  const host = {host: 'localhost'}
  t.equal((await app.inject({url: '/metrics', headers: host})).statusCode, 401)
  await app.inject({url: '/health', headers: host})
  const r = await app.inject({url: '/metrics', headers: {...host, authorization: 'Bearer k'}})
  t.equal(r.statusCode, 200)
  t.match(r.headers['content-type'], /^text\/plain/)
  t.match(r.body, /splash_requests_total\{route="\/health",status="200"\} 1/)
  t.match(r.body, /splash_queue_depth 0/)
  t.match(r.body, /splash_model_ready 0/)
})
