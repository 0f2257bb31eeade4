// The fuzzer (test/helpers/fuzz.ts) against the real server on the real engine: ~1,000 bodies over every route,
// mutated and raw. Every answer is a success or a 4xx in the calling API's own shape, never a 5xx; the server must
// stay up and end with nothing running or queued. bench/fuzz.ts runs 10,000 or more.
//   another seed: SPLASH_FUZZ_SEED=N npx tap test/server/fuzz.test.ts (SPLASH_FUZZ_ROUNDS=N for more)
import t from 'tap'
import {startServe, type ServerProcess} from '../helpers/cli.js'
import {synthFixture} from '../helpers/packages.js'
import {fuzz, routes} from '../helpers/fuzz.js'

const ROUNDS = Number(process.env.SPLASH_FUZZ_ROUNDS ?? 1100)
const SEED = Number(process.env.SPLASH_FUZZ_SEED ?? 20261203)

let server: ServerProcess
let model = ''

t.before(async () => {
  server = await startServe(['--model', await synthFixture('tiny-hybrid', 'q4'), '--max-context', '4K'])
  model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
})
t.teardown(async () => {
  server.child.kill('SIGTERM')
  await server.exited
})

t.test(`${ROUNDS} fuzzed requests over every route: success or a 4xx in the API's own shape, never a 5xx`, async t => {
  const r = await fuzz(server.url, model, ROUNDS, SEED)
  for (const f of r.failures.slice(0, 50)) t.fail(f)
  t.equal(r.failures.length, 0, `no 5xx, every error shaped (${[...r.statuses].map(([s, n]) => `${n}×${s}`).join(', ')})`)
  t.equal(r.byRoute.size, new Set(routes(model).map(x => `${x.method} ${x.url}`)).size, 'every route was called')
  t.ok((r.statuses.get(200) ?? 0) > ROUNDS / 10, 'a fair share of the requests were still valid and answered')
  for (const s of [400, 404, 413, 415]) t.ok((r.statuses.get(s) ?? 0) > 0, `some were answered ${s}`)

  const health = await fetch(`${server.url}/health`)
  t.equal(health.status, 200, 'the server is still up')
  const metrics = await (await fetch(`${server.url}/metrics`)).text()
  t.match(metrics, /^splash_running_requests 0$/m, 'nothing left running')
  t.match(metrics, /^splash_queue_depth 0$/m, 'nothing left queued')
  t.notMatch(metrics, /^splash_server_errors_total\{/m, 'no server error counted')
})
