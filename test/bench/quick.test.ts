// `splash bench --quick` end to end through the built CLI, so the harness cannot rot. No assertion on timings.
import t from 'tap'
import {existsSync, mkdtempSync, readFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {runCli} from '../helpers/cli.js'

const root = mkdtempSync(join(tmpdir(), 'splash-bench-'))
const env = {SPLASH_DATA_DIR: join(root, 'data'), SPLASH_BENCH_CACHE: join(root, 'cache'), SPLASH_PEER_PATH: join(root, 'no-peer')}

t.test('bench --quick --preset tiny-hybrid: table, JSON, SVG', async t => {
  const out = join(root, 'res', 'quick.json')
  const r = await runCli(['bench', '--quick', '--preset', 'tiny-hybrid', '--out', out], env, 120_000)
  t.equal(r.code, 0, r.stderr)
  t.match(r.stdout, /^\| Scenario \| Splash \|$/m)
  for (const row of ['Decode, short coding prompt', 'Prefill, ', 'TTFT uncached', 'TTFT cached', 'Aggregate decode, 1 concurrent', 'Aggregate decode, 8 concurrent']) {
    t.ok(r.stdout.includes(`| ${row}`), row)
  }
  t.match(r.stderr, /\[Splash\] decode 1\/2/, 'progress on stderr')
  t.ok(existsSync(out))
  const doc = JSON.parse(readFileSync(out, 'utf8'))
  t.equal(doc.kind, 'splash-bench')
  t.match(doc.version, /^splash /)
  t.type(doc.machine.cpu, 'string')
  t.ok(doc.machine.cores >= 1)
  t.ok(doc.machine.memoryBytes > 0)
  t.match(doc.backend.splash, /^cpu \((scalar|avx2|avx512)\)$/, 'the backend the server reports')
  t.equal(doc.package.name, 'splash/synth-tiny-hybrid')
  t.equal(doc.package.quant, 'q4')
  t.equal(doc.package.provenance.kind, 'synthetic')
  // a synthetic package's draft is random: served without it unless --draft on asks for it
  t.equal(doc.settings.draft, 'off')
  t.equal(doc.settings.randomDraft, false)
  t.equal(doc.draftedTokens, 0, 'the server proposed no draft token')
  t.match(r.stdout, /Speculative decoding off \(a synthetic package's draft has random weights/)
  t.equal(doc.results.length, 1)
  const s = doc.results[0]
  t.equal(s.engine, 'Splash')
  t.equal(s.decode.runs.length, 2)
  t.ok(s.decode.runs.every((x: {completionTokens: number}) => x.completionTokens >= 1))
  t.ok(s.prefill.promptTokens > 100)
  t.equal(s.cachedTtft.cached.length, 2)
  t.equal(s.cachedTtft.uncached.length, 2)
  t.same(s.concurrency.map((c: {clients: number}) => c.clients), [1, 2, 4, 8])
  t.equal(s.concurrency[3].runs[0].results.length, 8)
  const svg = readFileSync(out.replace(/\.json$/, '.svg'), 'utf8')
  t.match(svg, /^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/)
  t.match(svg, /8 concurrent/)
  t.match(svg, /<\/svg>\s*$/)
})

t.test('bench --draft on on a synthetic package: served with its draft, the figures labelled random-draft', async t => {
  const out = join(root, 'res', 'draft-on.json')
  const r = await runCli(['bench', '--quick', '--preset', 'tiny-hybrid', '--draft', 'on', '--concurrency', '1', '--runs', '1', '--out', out], env, 120_000)
  t.equal(r.code, 0, r.stderr)
  const doc = JSON.parse(readFileSync(out, 'utf8'))
  t.equal(doc.settings.draft, 'on')
  t.equal(doc.settings.randomDraft, true)
  t.type(doc.draftedTokens, 'number')
  t.match(r.stdout, /Speculative decoding on: \d+ tokens drafted; random draft \(synthetic package\)/)
})

t.test('bench --peer llama.cpp without node-llama-cpp: one line, how to install, non-zero', async t => {
  const r = await runCli(['bench', '--quick', '--preset', 'tiny-hybrid', '--peer', 'llama.cpp'], env, 60_000)
  t.not(r.code, 0)
  t.match(r.stderr, /^Error: node-llama-cpp is not installed; install it outside the project with: .*npm i .*node-llama-cpp@3\.21\.1/)
  t.equal(r.stderr.trim().split('\n').length, 1)
})

t.test("bench on a missing package: the server's one-line error, non-zero", async t => {
  const r = await runCli(['bench', '--model', join(root, 'missing')], env, 60_000)
  t.not(r.code, 0)
  t.match(r.stderr, /Error: splash serve exited with 1: .*no such folder/)
})
