// An agent's turns (a report, not a test): `splash serve` on a package, one conversation grown turn by turn the
// way a coding agent resends it (system prompt, then user / assistant pairs), each turn sent with max_tokens 1 and
// temperature 0 and timed by the client; per turn its TTFT, prompt and cached tokens, and the engine steps the
// server took for it with their wall time, the prefix cache's saves after them included (SPLASH_TRACE_STEPS).
// Between turns the server is left idle (the agent running its tools).
//   npx tsx bench/turn-ttft.ts <package-dir> [turns] [words per turn]
import {mkdtempSync, readFileSync, rmSync, writeFileSync} from 'node:fs'
import {tmpdir} from 'node:os'
import {join} from 'node:path'
import {startSplash} from '../src/bench/splash-driver.ts'

const [dir, turnsArg = '6', wordsArg = '60'] = process.argv.slice(2)
if (!dir) {
  console.log('usage: npx tsx bench/turn-ttft.ts <package-dir> [turns] [words per turn]')
  process.exit(0)
}
const vocab = ['alpha', 'kernel', 'river', 'matrix', 'cloud', 'stone', 'vector', 'signal', 'patch', 'tool']
const words = (seed: number, n: number) => Array.from({length: n}, (_, i) => vocab[(i * 7 + seed * 3 + (i >> 3)) % vocab.length]).join(' ')
const tmp = mkdtempSync(join(tmpdir(), 'splash-turns-'))
const trace = join(tmp, 'steps.txt')
writeFileSync(trace, '')
const server = await startSplash(dir, [], 180_000, {SPLASH_TRACE_STEPS: trace})
try {
  const model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
  const messages: Array<{role: string; content: string}> = [{role: 'system', content: `You are a coding agent. ${words(0, 4 * Number(wordsArg))}`}]
  for (let turn = 1; turn <= Number(turnsArg); turn++) {
    messages.push({role: 'user', content: `Turn ${turn}: ${words(turn, Number(wordsArg))}`})
    const before = readFileSync(trace, 'utf8').split('\n').filter(Boolean).length
    const t0 = performance.now()
    const res = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {'content-type': 'application/json'},
      body: JSON.stringify({model, messages, max_tokens: 1, temperature: 0}),
    })
    const body = (await res.json()) as {usage: {prompt_tokens: number; prompt_tokens_details?: {cached_tokens?: number}}}
    const ms = performance.now() - t0
    // an agent runs its tools between turns: wait until the server is idle (a step's trace line is written after
    // its saves, which may follow the response)
    for (let size = -1, quiet = 0; quiet < 12 && performance.now() - t0 < 120_000; ) {
      await new Promise(r => setTimeout(r, 250))
      const now = readFileSync(trace, 'utf8').length
      quiet = now === size ? quiet + 1 : 0
      size = now
    }
    const steps = readFileSync(trace, 'utf8').split('\n').filter(Boolean).slice(before)
    const tokens = steps.map(l => Number(/tokens=(\d+)/.exec(l)?.[1] ?? 0))
    // the engine's busy time for the turn: its steps, with the prefix-cache saves after them (which may follow the
    // response)
    const busy = steps.reduce((a, l) => a + Number(/total=([\d.]+)ms/.exec(l)?.[1] ?? 0), 0)
    console.log(`turn ${turn}: TTFT ${ms.toFixed(0)} ms, ${body.usage.prompt_tokens} prompt tokens, ${body.usage.prompt_tokens_details?.cached_tokens ?? 0} cached; ${steps.length} steps of ${tokens.join(' + ')} tokens, engine busy ${busy.toFixed(0)} ms`)
    messages.push({role: 'assistant', content: `Done with turn ${turn}. ${words(turn + 50, Number(wordsArg) / 2)}`})
  }
} finally {
  await server.stop()
  if (process.env.KEEP_TRACE) console.log(readFileSync(trace, "utf8"))
  rmSync(tmp, {recursive: true, force: true})
}
