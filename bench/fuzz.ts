// The request fuzzer (test/helpers/fuzz.ts) at length (a report, not a test): `splash serve` on a package, then
// N seeded bodies over every route, mutated and raw; the figures (statuses, requests per route, failures, time,
// the server's resident memory before and after) go to a JSON file. test/server/fuzz.test.ts runs ~1,000 in the suite.
//   npx tsx bench/fuzz.ts [--model DIR] [--rounds 10000] [--seed N] [--out FILE]
import {mkdtempSync, mkdirSync, writeFileSync} from 'node:fs'
import {tmpdir, cpus, totalmem, hostname} from 'node:os'
import {join, dirname} from 'node:path'
import {execSync} from 'node:child_process'
import {startSplash} from '../src/bench/splash-driver.ts'
import {fuzz} from '../test/helpers/fuzz.ts'

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1] ?? '')
const MODEL = args.get('model') ?? 'packages/default'
const ROUNDS = Number(args.get('rounds') ?? 10_000)
const SEED = Number(args.get('seed') ?? 20261207)
const started = new Date()
const OUT = args.get('out') ?? `bench/results/fuzz-${started.toISOString().slice(0, 16).replace(/[:T]/g, '-')}.json`

const server = await startSplash(MODEL, ['--max-memory', args.get('max-memory') ?? '3G'], 300_000, {SPLASH_DATA_DIR: mkdtempSync(join(tmpdir(), 'splash-fuzz-'))})
const model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
const rss = async () => Number(/^splash_process_resident_memory_bytes (\d+)/m.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1])
const rssBefore = await rss()
const t0 = performance.now()
const r = await fuzz(server.url, model, ROUNDS, SEED)
const seconds = (performance.now() - t0) / 1000
const metrics = await (await fetch(`${server.url}/metrics`)).text()
const health = (await fetch(`${server.url}/health`)).status
const rssAfter = await rss()
await server.stop()
const result = {
  command: `npx tsx bench/fuzz.ts --model ${MODEL} --rounds ${ROUNDS} --seed ${SEED}`,
  commit: execSync('git rev-parse --short HEAD').toString().trim(),
  machine: {host: hostname(), cpu: cpus()[0]?.model, cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30)},
  date: started.toISOString(),
  model,
  rounds: ROUNDS,
  seed: SEED,
  seconds: Math.round(seconds),
  statuses: Object.fromEntries([...r.statuses].sort((a, b) => a[0] - b[0])),
  fiveHundreds: [...r.statuses].filter(([s]) => s >= 500).reduce((n, [, c]) => n + c, 0),
  failures: r.failures.length,
  failureSamples: r.failures.slice(0, 50),
  byRoute: Object.fromEntries(r.byRoute),
  healthAfter: health,
  serverErrorsCounted: (metrics.match(/^splash_server_errors_total\{.*$/gm) ?? []),
  runningAfter: Number(/^splash_running_requests (\d+)/m.exec(metrics)?.[1]),
  queuedAfter: Number(/^splash_queue_depth (\d+)/m.exec(metrics)?.[1]),
  rssBytes: {before: rssBefore, after: rssAfter},
}
// The title and one record make the file a table of docs/benchmarks.md (bench/render-tables.ts); the rest is the raw run.
const day = result.date.slice(0, 10)
const record = {
  measurement: `${ROUNDS.toLocaleString('en-US')} bodies over ${r.byRoute.size} routes, seed ${SEED}`,
  command: result.command,
  result: `${result.seconds} s; ${Object.entries(result.statuses).map(([s, n]) => `${s}×${n}`).join(', ')}; ${result.fiveHundreds} 5xx, ${result.failures} shape failures; /health ${health} after`,
  machine: `${result.machine.cpu} VM, ${result.machine.cores} cores, ${result.machine.memoryGiB} GiB`,
  commit: result.commit,
  date: day,
  recorded: {commit: result.commit, date: day},
}
mkdirSync(dirname(OUT), {recursive: true})
writeFileSync(OUT, JSON.stringify({title: 'Fuzzer: bodies over every route', records: [record], ...result}, null, 2) + '\n')
console.log(`${ROUNDS} bodies in ${result.seconds} s: ${JSON.stringify(result.statuses)}; ${result.failures} failures; health ${health}; wrote ${OUT}`)
for (const f of r.failures.slice(0, 20)) console.log(`  ${f}`)
