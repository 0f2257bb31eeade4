// What the idle engine's gather costs a lone client (a report, not a test): `splash serve` on a package with the
// gather off (SPLASH_GATHER=0) and on (the default on the CPU), alternated; each round sends N streaming requests one
// after another, each the same short prompt (cached after the first, so a request's first step computes one token:
// the case where a wait before the step weighs most), and prints the median and quartiles of the client's TTFT.
//   npx tsx bench/gather-ttft.ts <package-dir> [requests] [rounds]
import {startSplash} from '../src/bench/splash-driver.ts'
import {SHORT_PROMPTS} from '../src/bench/prompts.ts'

const [dir, nArg = '20', roundsArg = '2'] = process.argv.slice(2)
if (!dir) {
  console.log('usage: npx tsx bench/gather-ttft.ts <package-dir> [requests] [rounds]')
  process.exit(0)
}

async function ttft(url: string, model: string, maxTokens: number): Promise<number> {
  const t0 = performance.now()
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({model, stream: true, max_tokens: maxTokens, ignore_eos: true, temperature: 0, reasoning_effort: 'none', messages: [{role: 'user', content: SHORT_PROMPTS[0]}]}),
  })
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`)
  let first = 0
  const decoder = new TextDecoder()
  for await (const chunk of res.body) if (!first && /"(content|reasoning_content)":"[^"]/.test(decoder.decode(chunk))) first = performance.now()
  return first - t0
}

const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(p * (xs.length - 1))]!
for (let r = 0; r < Number(roundsArg); r++) {
  for (const gather of r % 2 === 0 ? ['0', '1'] : ['1', '0']) {
    const server = await startSplash(dir, ['--max-context', '8K'], undefined, {SPLASH_GATHER: gather})
    try {
      const model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id
      await ttft(server.url, model, 8) // warm-up: the prompt is cached and one-sequence decode steps are measured
      const times: number[] = []
      for (let i = 0; i < Number(nArg); i++) times.push(await ttft(server.url, model, 4))
      console.log(`round ${r + 1}, gather ${gather === '1' ? 'on ' : 'off'}: TTFT median ${q(times, 0.5).toFixed(1)} ms (quartiles ${q(times, 0.25).toFixed(1)}–${q(times, 0.75).toFixed(1)}), n=${times.length}`)
    } finally {
      await server.stop()
    }
  }
}
