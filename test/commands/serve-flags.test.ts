// `splash serve` flag errors: exit non-zero with one line naming the flag and what it accepts.
import t from 'tap'
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {runCli, startServe} from '../helpers/cli.js'

const cases: Array<[string[], RegExp]> = [
  [['--max-memory', 'lots'], /^Error: --max-memory: expected a size such as 512M, 28G/],
  [['--max-memory', '0'], /^Error: --max-memory: expected a size/],
  [['--max-context', '10M'], /^Error: --max-context: expected a context length in tokens between 256 and 262144/],
  [['--max-context', 'abc'], /^Error: --max-context: expected a context length/],
  [['--max-image-pixels', '-1'], /^Error: --max-image-pixels: expected a pixel count/],
  [['--port', '70000'], /^Error: --port: expected a port number between 0 and 65535/],
  [['--port', 'http'], /^Error: --port: expected a port number/],
  [['--allowed-host', 'not a host'], /^Error: --allowed-host: expected a host name/],
  [['--bogus'], /^Error: Nonexistent flag: --bogus/],
]

for (const [args, expected] of cases) {
  t.test(`serve ${args.join(' ')}`, async t => {
    const r = await runCli(['serve', ...args])
    t.not(r.code, 0, 'exits non-zero')
    const lines = r.stderr.trim().split('\n')
    t.equal(lines.length, 1, `one line: ${r.stderr}`)
    t.match(lines[0], expected)
  })
}

t.test('SPLASH_PORT with a bad value names --port', async t => {
  const r = await runCli(['serve'], {SPLASH_PORT: 'eighty'})
  t.not(r.code, 0)
  t.match(r.stderr.trim(), /^Error: --port: expected a port number/)
})

t.test('--version and --help', async t => {
  const v = await runCli(['--version'])
  t.equal(v.code, 0)
  t.match(v.stdout, /^splash\/\d+\.\d+\.\d+/)
  const h = await runCli(['serve', '--help'])
  t.equal(h.code, 0)
  for (const flag of ['--model', '--port', '--max-memory', '--max-context', '--max-image-pixels', '--allowed-host', '--api-key', '--no-webui']) {
    t.ok(h.stdout.includes(flag), `help lists ${flag}`)
  }
})

// The context is honest: a package with a 128K window (made by `splash package synth --context`) is served whole by
// default within a plan sized to it, a --max-context it supports is served as asked, and one beyond it is refused.
t.test('--max-context: served as asked, or refused naming the package limit; Ready says the context and its memory', async t => {
  const dir = mkdtempSync(join(tmpdir(), 'splash-serve-context-'))
  t.teardown(() => rmSync(dir, {recursive: true, force: true}))
  const pkg = join(dir, 'long')
  const synth = await runCli(['package', 'synth', '--preset', 'tiny-hybrid', '--context', '128K', '--out', pkg], {}, 300_000)
  t.equal(synth.code, 0, synth.stderr)
  const env = {SPLASH_DATA_DIR: join(dir, 'data'), SPLASH_API_KEY: ''}

  const server = await startServe(['--model', pkg], env)
  t.teardown(() => server.child.kill('SIGKILL'))
  const ready = /Ready: \S+ \(splash\/synth-tiny-hybrid: context 131,072 tokens, ([\d.]+ \w+) of KV at full length; ([\d.]+) (\w+) of host memory planned\)/.exec(server.output())
  t.ok(ready, `Ready names the context and the memory: ${server.output()}`)
  const kvLine = /KV cache +([\d.]+) (\w+) \(([\d,]+) tokens/.exec(server.output())
  t.ok(kvLine, 'the plan has its KV line')
  const kvTokens = Number(kvLine![3].replace(/,/g, ''))
  t.ok(kvTokens <= 16 * 131072 + 1, `the KV reserve holds what 16 requests at the full window hold, no more: ${kvTokens} tokens`)
  const models = (await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<Record<string, unknown>>}
  t.equal(models.data[0].context_length, 131072)
  t.equal(models.data[0].package_context_length, 131072)
  t.same(models.data[0].input_modalities, ['text'])
  server.child.kill('SIGTERM')
  await server.exited

  const asked = await startServe(['--model', pkg, '--max-context', '100K'], env)
  t.teardown(() => asked.child.kill('SIGKILL'))
  const list = (await (await fetch(`${asked.url}/v1/models`)).json()) as {data: Array<Record<string, unknown>>}
  t.equal(list.data[0].context_length, 102400, '100K is served as 102,400 tokens exactly')
  t.equal(list.data[0].package_context_length, 131072)
  asked.child.kill('SIGTERM')
  await asked.exited

  const over = await runCli(['serve', '--port', '0', '--model', pkg, '--max-context', '256K'], env)
  t.not(over.code, 0)
  const lines = over.stderr.trim().split('\n')
  t.equal(lines.length, 1, `one line: ${over.stderr}`)
  t.equal(lines[0], 'Error: --max-context 262144 is more than splash/synth-tiny-hybrid supports: its window is 131,072 tokens; ask for 131072 or less, or serve a package with a longer window')
  t.notMatch(over.stdout, /Ready/)
})
