// Where the aggregate-decode figure of `splash bench` goes at k concurrent clients (a report, not a test): `splash
// serve` on a package, k streaming chat requests sent together (greedy, thinking off, the bench's short prompts,
// max_tokens with ignore_eos), every token timestamped by the client. Per round it prints each client's TTFT, the
// bench's aggregate (tokens after each stream's first, over first stream's first token → last stream's last token)
// and the steady-state aggregate (tokens streamed while every client was decoding, over that window): the gap
// between the two is what staggered admissions and prefill steps inside the window cost.
//   npx tsx bench/concurrency-trace.ts <package-dir> [clients, e.g. 1,4] [max-tokens] [rounds]
import {startSplash} from '../src/bench/splash-driver.ts'
import {SHORT_PROMPTS} from '../src/bench/prompts.ts'

const [dir, ks = '1,4', maxTokensArg = '32', roundsArg = '4'] = process.argv.slice(2)
if (!dir) {
  console.log('usage: npx tsx bench/concurrency-trace.ts <package-dir> [clients] [max-tokens] [rounds]')
  process.exit(0)
}
const maxTokens = Number(maxTokensArg)
const server = await startSplash(dir, ['--max-context', '8K'])
const model = ((await (await fetch(`${server.url}/v1/models`)).json()) as {data: Array<{id: string}>}).data[0]!.id

/** One streaming request; the client time of every chunk that carries text. */
async function chat(i: number): Promise<number[]> {
  const res = await fetch(`${server.url}/v1/chat/completions`, {
    method: 'POST',
    headers: {'content-type': 'application/json'},
    body: JSON.stringify({model, stream: true, max_tokens: maxTokens, ignore_eos: true, temperature: 0, reasoning_effort: 'none', messages: [{role: 'user', content: SHORT_PROMPTS[i % SHORT_PROMPTS.length]}]}),
  })
  if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}: ${await res.text()}`)
  const times: number[] = []
  const decoder = new TextDecoder()
  let buf = ''
  for await (const chunk of res.body) {
    buf += decoder.decode(chunk, {stream: true})
    for (let k = buf.indexOf('\n\n'); k >= 0; k = buf.indexOf('\n\n')) {
      const event = buf.slice(0, k)
      buf = buf.slice(k + 2)
      if (/"(content|reasoning_content)":"[^"]/.test(event)) times.push(performance.now())
    }
  }
  return times
}

try {
  await chat(0) // warm-up
  for (const k of ks.split(',').map(Number)) {
    for (let r = 0; r < Number(roundsArg); r++) {
      const t0 = performance.now()
      const streams = await Promise.all(Array.from({length: k}, (_, i) => chat(i + r)))
      const first = Math.min(...streams.map(s => s[0]!)), last = Math.max(...streams.map(s => s.at(-1)!))
      const decoded = streams.reduce((a, s) => a + s.length - 1, 0)
      const allIn = Math.max(...streams.map(s => s[0]!)), firstOut = Math.min(...streams.map(s => s.at(-1)!))
      const steady = streams.reduce((a, s) => a + s.filter(t => t > allIn && t <= firstOut).length, 0)
      const ttft = streams.map(s => (s[0]! - t0).toFixed(0)).join(' / ')
      console.log(`${k} clients, round ${r + 1}: TTFT ${ttft} ms; aggregate ${((decoded / (last - first)) * 1000).toFixed(2)} tok/s; steady ${firstOut > allIn ? ((steady / (firstOut - allIn)) * 1000).toFixed(2) : '-'} tok/s`)
    }
  }
} finally {
  await server.stop()
}
