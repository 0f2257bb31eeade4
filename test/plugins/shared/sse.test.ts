// SSE streams: a silent stream (a long prefill before the first token) gets keep-alive comments, which SSE
// clients ignore, so idle timeouts of clients and proxies do not cut it; the timer stops with the stream.
import t from 'tap'
import Fastify from 'fastify'
import {SseStream} from '../../../plugins/shared/sse.js'

t.test('keep-alive comments while silent, none after the end', async t => {
  const app = Fastify()
  let stream: SseStream | undefined
  app.get('/s', async (request, reply) => {
    stream = SseStream.open(request, reply, 150)
    setTimeout(() => {
      stream!.data({done: true})
      stream!.end()
    }, 700)
  })
  await app.listen({port: 0, host: '127.0.0.1'})
  t.teardown(() => app.close())
  const address = app.server.address() as {port: number}
  const res = await fetch(`http://127.0.0.1:${address.port}/s`)
  const text = await res.text()
  const pings = text.split('\n\n').filter(e => e === ': keep-alive').length
  t.ok(pings >= 2, `${pings} keep-alive comments before the data`)
  t.match(text, /data: \{"done":true\}\n\n$/, 'the data follows and ends the stream')
  t.ok(stream!.closed)
})
