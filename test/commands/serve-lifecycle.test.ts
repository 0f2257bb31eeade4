// The real `splash serve` process: loopback only, Ready line, graceful stop on SIGTERM / SIGINT.
import t from 'tap'
import http from 'node:http'
import net from 'node:net'
import {startServe} from '../helpers/cli.js'

/**
 * Collects what a streamed chat response sends through `source`; `act` runs once, when its first tokens are out
 * (the generation is in flight). Returns the text so far.
 */
function watchStream(source: NodeJS.EventEmitter, act: () => void): () => string {
  let text = ''
  let acted = false
  source.on('data', (d: Buffer | string) => {
    text += d
    if (!acted && (text.match(/"delta"/g) ?? []).length >= 3) {
      acted = true
      act()
    }
  })
  return () => text
}

function connects(host: string, port: number): Promise<boolean> {
  return new Promise(resolve => {
    const s = net.connect({host, port})
    s.once('connect', () => {
      s.destroy()
      resolve(true)
    })
    s.once('error', () => resolve(false))
  })
}

const sleep = (ms: number) => new Promise(r => setTimeout(r, ms))

for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  t.test(`${signal} lets a generation in flight finish, refuses new connections, exits 0`, async t => {
    // The default package: a real generation of 120 tokens is running when the signal arrives.
    const server = await startServe([], {SPLASH_API_KEY: ''})
    t.match(server.url, /^http:\/\/127\.0\.0\.1:\d+$/)
    const body = JSON.stringify({messages: [{role: 'user', content: 'Count to one hundred.'}], max_tokens: 120, ignore_eos: true, stream: true, stream_options: {include_usage: true}})
    const response = new Promise<{status: number; body: string}>((resolve, reject) => {
      const req = http.request(
        {host: '127.0.0.1', port: server.port, method: 'POST', path: '/v1/chat/completions', headers: {'content-type': 'application/json'}},
        res => {
          // Signal once the first tokens have streamed: the generation is in flight.
          const text = watchStream(res, () => server.child.kill(signal))
          res.on('end', () => resolve({status: res.statusCode ?? 0, body: text()}))
        },
      )
      req.on('error', reject)
      req.end(body)
    })
    const res = await response
    t.equal(res.status, 200)
    t.match(res.body, /data: \[DONE\]/, 'the stream ran to its end')
    const chunks = res.body.split('\n\n').filter(l => l.startsWith('data: {')).map(l => JSON.parse(l.slice(6)))
    // A delta may carry several tokens (speculative decoding): count them from the usage chunk.
    t.equal(chunks.at(-1).usage?.completion_tokens, 120, 'all 120 tokens were generated')
    t.equal(chunks.at(-2).choices[0].finish_reason, 'length')
    t.equal(await connects('127.0.0.1', server.port), false, 'no new connections after the signal')
    t.equal(await server.exited, 0, 'exit code 0')
    t.match(server.output(), /Stopped/)
  })
}

t.test('binds 127.0.0.1 only', async t => {
  const server = await startServe([])
  t.teardown(() => {
    server.child.kill('SIGKILL')
  })
  t.equal(await connects('127.0.0.1', server.port), true)
  t.equal(await connects('::1', server.port), false, 'not reachable over IPv6 loopback (not bound to all interfaces)')
  const res = await fetch(`${server.url}/health`)
  t.equal(res.status, 200)
  server.child.kill('SIGTERM')
  t.equal(await server.exited, 0)
})

t.test('SPLASH_PORT picks the port and the API key comes from SPLASH_API_KEY', async t => {
  const probe = net.createServer()
  await new Promise<void>(r => probe.listen(0, '127.0.0.1', () => r()))
  const port = (probe.address() as net.AddressInfo).port
  await new Promise<void>(r => probe.close(() => r()))
  const {spawn} = await import('node:child_process')
  const {bin} = await import('../helpers/cli.js')
  const child = spawn(process.execPath, [bin, 'serve'], {env: {...process.env, SPLASH_PORT: String(port), SPLASH_API_KEY: 'k1'}, stdio: ['ignore', 'pipe', 'pipe']})
  let out = ''
  child.stdout.on('data', d => (out += d))
  for (let i = 0; i < 200 && !out.includes('Ready'); i++) await sleep(100)
  t.match(out, new RegExp(`Ready: http://127\\.0\\.0\\.1:${port}`))
  t.equal((await fetch(`http://127.0.0.1:${port}/v1/models`)).status, 401)
  t.equal((await fetch(`http://127.0.0.1:${port}/v1/models`, {headers: {authorization: 'Bearer k1'}})).status, 200)
  t.equal((await fetch(`http://127.0.0.1:${port}/health`)).status, 200)
  child.kill('SIGTERM')
  const code = await new Promise(r => child.on('exit', r))
  t.equal(code, 0)
})

// A service manager may repeat SIGTERM while the server drains: the second keeps draining; a third, or a second
// SIGINT (Ctrl-C twice), exits at once and cuts the streams.
for (const signals of [['SIGTERM', 'SIGTERM'], ['SIGTERM', 'SIGTERM', 'SIGTERM'], ['SIGINT', 'SIGINT']] as const) {
  const cuts = signals.length === 3 || signals[0] === 'SIGINT'
  t.test(`${signals.join(' + ')} while a stream runs: ${cuts ? 'exits at once' : 'keeps draining'}`, async t => {
    const server = await startServe([], {SPLASH_API_KEY: ''})
    const tokens = cuts ? 3000 : 200
    const body = JSON.stringify({messages: [{role: 'user', content: 'Count to one hundred.'}], max_tokens: tokens, ignore_eos: true, stream: true, stream_options: {include_usage: true}})
    const res = await new Promise<{body: string}>((resolve, reject) => {
      const req = http.request(
        {host: '127.0.0.1', port: server.port, method: 'POST', path: '/v1/chat/completions', headers: {'content-type': 'application/json'}},
        res => {
          const text = watchStream(res, () => {
            void (async () => {
              for (const s of signals) {
                server.child.kill(s)
                await sleep(150)
              }
            })()
          })
          res.on('end', () => resolve({body: text()}))
          res.on('error', () => resolve({body: text()}))
          res.on('aborted', () => resolve({body: text()}))
        },
      )
      req.on('error', reject)
      req.end(body)
    })
    const code = await server.exited
    if (cuts) {
      t.notMatch(res.body, /data: \[DONE\]/, 'the stream was cut')
      t.equal(code, 130, 'exit code 130')
      t.match(server.output(), /again: exiting now/)
    } else {
      t.match(res.body, /data: \[DONE\]/, 'the stream ran to its end')
      const chunks = res.body.split('\n\n').filter(l => l.startsWith('data: {')).map(l => JSON.parse(l.slice(6)))
      t.equal(chunks.at(-1).usage?.completion_tokens, tokens, 'every token was generated')
      t.equal(code, 0, 'exit code 0')
      t.match(server.output(), /still finishing requests in flight/)
      t.match(server.output(), /Stopped/)
    }
  })
}

// A request that arrives while the server drains (here pipelined behind a stream on the same connection, so it is
// read after SIGTERM) gets a 503 in the OpenAI shape, and the 503 is logged like every 5xx.
t.test('SIGTERM while a stream runs: a request that arrives during the drain gets a logged 503', async t => {
  const server = await startServe([], {SPLASH_API_KEY: ''})
  const stream = JSON.stringify({messages: [{role: 'user', content: 'Count to one hundred.'}], max_tokens: 400, ignore_eos: true, stream: true})
  const next = JSON.stringify({messages: [{role: 'user', content: 'Hi'}], max_tokens: 4})
  const request = (body: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`
  const socket = net.connect(server.port, '127.0.0.1')
  const received = watchStream(socket, () => {
    server.child.kill('SIGTERM')
    setTimeout(() => socket.write(request(next)), 300)
  })
  socket.write(request(stream))
  await new Promise(r => socket.on('close', r))
  const code = await server.exited
  const text = received()
  t.match(text, /data: \[DONE\]/, 'the stream ran to its end')
  const second = text.slice(text.indexOf('data: [DONE]'))
  t.match(second, /HTTP\/1\.1 503/, 'the request read during the drain: 503')
  t.match(second, /"code":"shutting_down"/, 'in the OpenAI error shape')
  t.equal(code, 0, 'exit code 0')
  t.match(server.output(), /503 shutting_down: The server is shutting down/, 'the 503 is logged')
})
