// What the prefix cache's disk tier saves a client after a restart (a report, not a test): `splash serve` on a
// package with a fresh data folder, one long prompt (max_tokens 1, greedy) timed by the client, then resent; the
// server stopped with SIGTERM (it writes its cache) and started again on the same folder, the prompt sent again;
// then once more with SPLASH_PREFIX_DISK=off, the cold baseline after a restart.
//   npx tsx bench/restart-ttft.ts <package-dir> [words]
import {mkdtempSync, rmSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {startSplash} from '../src/bench/splash-driver.ts'

const [dir, wordsArg = '2500'] = process.argv.slice(2)
if (!dir) {
  console.log('usage: npx tsx bench/restart-ttft.ts <package-dir> [words]')
  process.exit(0)
}
const data = mkdtempSync(join(tmpdir(), 'splash-restart-'))
const vocab = ['alpha', 'kernel', 'river', 'matrix', 'cloud', 'stone', 'vector', 'signal']
const prompt = Array.from({length: Number(wordsArg)}, (_, i) => vocab[(i * 7 + (i >> 3)) % vocab.length]).join(' ')

async function ttft(url: string): Promise<{ms: number; tokens: number}> {
  const model = ((await (await fetch(`${url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
  const t0 = performance.now()
  const res = await fetch(`${url}/v1/completions`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify({model, prompt, max_tokens: 1, temperature: 0})})
  const body = (await res.json()) as {usage: {prompt_tokens: number}}
  return {ms: performance.now() - t0, tokens: body.usage.prompt_tokens}
}

const rounds: Array<[string, NodeJS.ProcessEnv]> = [
  ['first start', {SPLASH_PREFIX_DISK: 'on'}],
  ['restart, disk tier', {SPLASH_PREFIX_DISK: 'on'}],
  ['restart, disk tier off', {SPLASH_PREFIX_DISK: 'off'}],
]
try {
  for (const [label, env] of rounds) {
    const server = await startSplash(dir, [], 180_000, {SPLASH_DATA_DIR: data, ...env})
    const first = await ttft(server.url)
    const again = await ttft(server.url)
    const t0 = performance.now()
    await server.stop()
    console.log(`${label}: TTFT ${first.ms.toFixed(0)} ms (${first.tokens} prompt tokens), resent ${again.ms.toFixed(0)} ms; stop ${(performance.now() - t0).toFixed(0)} ms`)
  }
} finally {
  rmSync(data, {recursive: true, force: true})
}
