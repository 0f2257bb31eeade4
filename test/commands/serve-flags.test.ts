// `splash serve` flag errors: exit non-zero with one line naming the flag and what it accepts.
import t from 'tap'
import {runCli} from '../helpers/cli.js'

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
