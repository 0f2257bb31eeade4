// A long soak of mixed traffic against one `splash serve` (a report, not a test). N clients loop for the given
// minutes over every generating API (Chat Completions, Responses, Messages, Completions), streaming and not, with
// tools, JSON Schemas and json_object, random client aborts mid-stream and a few prompts longer than the context.
// A fixed set of greedy probes is answered once on the quiet server first; the same probes are resent under load
// and once more at the end, and every answer must be identical to the quiet one. Resident memory, KV blocks held
// by the prefix cache and the disk tier's size are sampled from /metrics every 30 s.
//   npx tsx bench/soak.ts [--model DIR] [--minutes 60] [--clients 4] [--seed N] [--max-memory 3G] [--out FILE]
import {mkdtempSync, mkdirSync, writeFileSync, readdirSync, statSync} from 'node:fs'
import {tmpdir, cpus, totalmem, hostname, loadavg} from 'node:os'
import {join, dirname} from 'node:path'
import {execSync} from 'node:child_process'
import {startSplash} from '../src/bench/splash-driver.ts'
import {rng} from '../test/helpers/fuzz.ts'

const args = new Map<string, string>()
for (let i = 2; i < process.argv.length; i += 2) args.set(process.argv[i]!.replace(/^--/, ''), process.argv[i + 1] ?? '')
const MODEL = args.get('model') ?? 'packages/default'
const MINUTES = Number(args.get('minutes') ?? 60)
const CLIENTS = Number(args.get('clients') ?? 4)
const SEED = Number(args.get('seed') ?? 20261207)
const started = new Date()
const OUT = args.get('out') ?? `bench/results/soak-${started.toISOString().slice(0, 16).replace(/[:T]/g, '-')}.json`
const REQUEST_MS = 180_000
// a ceiling on what the server plans with (its prefix cache takes half the KV memory), so a shared machine keeps room
const MAX_MEMORY = args.get('max-memory') ?? '3G'

const data = mkdtempSync(join(tmpdir(), 'splash-soak-'))
const server = await startSplash(MODEL, ['--max-memory', MAX_MEMORY], 300_000, {SPLASH_DATA_DIR: data, SPLASH_PREFIX_DISK: 'on'})
const url = server.url
const modelsBody = (await (await fetch(`${url}/v1/models`)).json()) as {data: Array<{id: string; context_length?: number}>}
const model = modelsBody.data[0]!.id
const contextLength = modelsBody.data[0]!.context_length ?? 4096
const pid = server.child.pid!

// ---- what the server holds -------------------------------------------------------------------------------
interface Sample {
  atS: number
  rssBytes: number
  /** resident memory of the process as the OS reports it (ps), next to the server's own figure */
  psRssBytes: number
  /** the JS heap in use, and memory outside it that V8 knows of (ArrayBuffers included), from process.memoryUsage() */
  heapUsedBytes: number
  externalBytes: number
  arrayBuffersBytes: number
  kvBlocks: number
  prefixCacheBytes: number
  diskBytes: number
  diskSnapshots: number
  running: number
  waiting: number
  load1: number
}
function metric(text: string, name: string): number {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text)
  return m ? Number(m[1]) : NaN
}
function psRss(): number {
  try {
    return Number(execSync(`ps -o rss= -p ${pid}`).toString().trim()) * 1024
  } catch {
    return NaN
  }
}
const t0 = performance.now()
async function sample(): Promise<Sample> {
  const text = await (await fetch(`${url}/metrics`)).text()
  return {
    atS: Math.round((performance.now() - t0) / 1000),
    rssBytes: metric(text, 'splash_process_resident_memory_bytes'),
    psRssBytes: psRss(),
    heapUsedBytes: metric(text, 'splash_process_heap_used_bytes'),
    externalBytes: metric(text, 'splash_process_external_bytes'),
    arrayBuffersBytes: metric(text, 'splash_process_array_buffers_bytes'),
    kvBlocks: metric(text, 'splash_prefix_cache_blocks'),
    prefixCacheBytes: metric(text, 'splash_prefix_cache_bytes'),
    diskBytes: metric(text, 'splash_prefix_cache_disk_bytes'),
    diskSnapshots: metric(text, 'splash_prefix_cache_disk_snapshots'),
    running: metric(text, 'splash_running_requests'),
    waiting: metric(text, 'splash_queue_depth'),
    load1: loadavg()[0]!,
  }
}
function folderBytes(dir: string): number {
  let n = 0
  for (const e of readdirSync(dir, {withFileTypes: true})) {
    const p = join(dir, e.name)
    if (e.isDirectory()) n += folderBytes(p)
    else if (e.isFile()) n += statSync(p).size
  }
  return n
}

// ---- requests ---------------------------------------------------------------------------------------------
type Json = Record<string, unknown>
interface Outcome {
  kind: string
  status: number
  /** the text (or tool call / JSON) the request produced, for the greedy probes */
  answer?: string
  /** an error event inside a 200 stream */
  streamError?: string
  aborted?: boolean
  /** a structured answer that failed to parse */
  badJson?: boolean
  finish?: string
}

async function readSse(res: Response, abortAfterEvents: number, controller: AbortController): Promise<{events: Json[]; error?: string; aborted: boolean}> {
  const events: Json[] = []
  let buf = ''
  const decoder = new TextDecoder()
  try {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buf += decoder.decode(chunk, {stream: true})
      let i: number
      while ((i = buf.indexOf('\n\n')) >= 0) {
        const block = buf.slice(0, i)
        buf = buf.slice(i + 2)
        for (const line of block.split('\n')) {
          if (!line.startsWith('data:')) continue
          const d = line.slice(5).trim()
          if (d === '[DONE]') continue
          const j = JSON.parse(d) as Json
          events.push(j)
          if (j.type === 'error' || (j.error && !j.choices)) return {events, error: JSON.stringify(j).slice(0, 300), aborted: false}
        }
        if (abortAfterEvents > 0 && events.length >= abortAfterEvents) {
          controller.abort()
          return {events, aborted: true}
        }
      }
    }
  } catch (err) {
    if (controller.signal.aborted) return {events, aborted: true}
    throw err
  }
  return {events, aborted: false}
}

/** The text a stream produced, whatever the API. */
function streamText(events: Json[]): {text: string; finish?: string} {
  let text = ''
  let finish: string | undefined
  for (const e of events) {
    const choices = e.choices as Array<{delta?: {content?: string; tool_calls?: Array<{function?: {name?: string; arguments?: string}}>}; text?: string; finish_reason?: string}> | undefined
    if (choices?.[0]) {
      const c = choices[0]
      text += c.delta?.content ?? c.text ?? ''
      for (const tc of c.delta?.tool_calls ?? []) text += (tc.function?.name ?? '') + (tc.function?.arguments ?? '')
      if (c.finish_reason) finish = c.finish_reason
    }
    if (e.type === 'response.output_text.delta') text += String(e.delta)
    if (e.type === 'response.function_call_arguments.delta') text += String(e.delta)
    if (e.type === 'response.completed') finish = String((e.response as Json | undefined)?.status)
    if (e.type === 'content_block_delta') {
      const d = e.delta as {text?: string; partial_json?: string}
      text += d.text ?? d.partial_json ?? ''
    }
    if (e.type === 'message_delta') finish = String((e.delta as Json).stop_reason)
  }
  return {text, finish}
}

/** The text a non-streamed answer carries, whatever the API. */
function bodyText(route: string, j: Json): {text: string; finish?: string} {
  if (route === '/v1/chat/completions') {
    const c = (j.choices as Array<{message: {content?: string; tool_calls?: Array<{function: {name: string; arguments: string}}>}; finish_reason: string}>)[0]!
    return {text: (c.message.content ?? '') + (c.message.tool_calls ?? []).map(t => t.function.name + t.function.arguments).join(''), finish: c.finish_reason}
  }
  if (route === '/v1/completions') {
    const c = (j.choices as Array<{text: string; finish_reason: string}>)[0]!
    return {text: c.text, finish: c.finish_reason}
  }
  if (route === '/v1/responses') {
    let text = ''
    for (const o of (j.output as Array<{type: string; content?: Array<{type: string; text?: string}>; name?: string; arguments?: string}>) ?? []) {
      if (o.type === 'message') text += (o.content ?? []).map(c => c.text ?? '').join('')
      if (o.type === 'function_call') text += (o.name ?? '') + (o.arguments ?? '')
    }
    return {text, finish: String(j.status)}
  }
  let text = ''
  for (const c of (j.content as Array<{type: string; text?: string; name?: string; input?: unknown}>) ?? []) {
    if (c.type === 'text') text += c.text
    if (c.type === 'tool_use') text += (c.name ?? '') + JSON.stringify(c.input)
  }
  return {text, finish: String(j.stop_reason)}
}

async function send(kind: string, route: string, body: Json, opts: {abortAfterEvents?: number; structured?: boolean} = {}): Promise<Outcome> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), REQUEST_MS)
  try {
    const res = await fetch(`${url}${route}`, {method: 'POST', headers: {'content-type': 'application/json'}, body: JSON.stringify(body), signal: controller.signal})
    if (!res.ok) {
      await res.text()
      return {kind, status: res.status}
    }
    let text: string
    let finish: string | undefined
    if (body.stream) {
      const s = await readSse(res, opts.abortAfterEvents ?? 0, controller)
      if (s.aborted) return {kind, status: res.status, aborted: true}
      if (s.error) return {kind, status: res.status, streamError: s.error}
      ;({text, finish} = streamText(s.events))
    } else {
      ;({text, finish} = bodyText(route, (await res.json()) as Json))
    }
    let badJson = false
    if (opts.structured) {
      try {
        JSON.parse(text)
      } catch {
        badJson = true
      }
    }
    return {kind, status: res.status, answer: text, badJson, finish}
  } catch (err) {
    if (controller.signal.aborted) return {kind, status: 0, streamError: 'client timeout'}
    return {kind, status: 0, streamError: String(err)}
  } finally {
    clearTimeout(timer)
  }
}

const words = ['alpha', 'kernel', 'river', 'matrix', 'cloud', 'stone', 'vector', 'signal', 'branch', 'commit', 'parser', 'thread']
function prose(rand: () => number, n: number): string {
  return Array.from({length: n}, () => words[Math.floor(rand() * words.length)]).join(' ')
}
const weatherTool = {type: 'object', properties: {city: {type: 'string'}, days: {type: 'integer', minimum: 1, maximum: 7}}, required: ['city']}
const personSchema = {type: 'object', properties: {name: {type: 'string', maxLength: 12}, age: {type: 'integer', minimum: 0, maximum: 120}, tags: {type: 'array', items: {type: 'string', maxLength: 8}, maxItems: 3}}, required: ['name', 'age']}

/** The greedy probes: one per API (and tools and a schema), answered first on the quiet server. */
function probes(): Array<{kind: string; route: string; body: Json; structured?: boolean}> {
  const msg = [{role: 'user', content: 'Write a haiku about a compiler.'}]
  return [
    {kind: 'probe chat', route: '/v1/chat/completions', body: {model, messages: msg, max_tokens: 40, temperature: 0, reasoning_effort: 'none'}},
    {kind: 'probe chat stream', route: '/v1/chat/completions', body: {model, messages: msg, max_tokens: 40, temperature: 0, reasoning_effort: 'none', stream: true}},
    {kind: 'probe chat tools', route: '/v1/chat/completions', body: {model, messages: [{role: 'user', content: 'Weather in Oslo?'}], tools: [{type: 'function', function: {name: 'weather', parameters: weatherTool}}], tool_choice: 'required', max_tokens: 60, temperature: 0, reasoning_effort: 'none'}},
    {kind: 'probe chat schema', route: '/v1/chat/completions', structured: true, body: {model, messages: [{role: 'user', content: 'A person, as JSON.'}], response_format: {type: 'json_schema', json_schema: {name: 'person', schema: personSchema}}, max_tokens: 80, temperature: 0, reasoning_effort: 'none'}},
    {kind: 'probe responses', route: '/v1/responses', body: {model, input: 'Name three sorting algorithms.', max_output_tokens: 40, temperature: 0, reasoning: {effort: 'none'}}},
    {kind: 'probe messages', route: '/v1/messages', body: {model, max_tokens: 40, temperature: 0, messages: [{role: 'user', content: 'Explain recursion in one line.'}]}},
    {kind: 'probe completions', route: '/v1/completions', body: {model, prompt: 'def fibonacci(n):', max_tokens: 40, temperature: 0}},
  ]
}

/** One request of the mix, picked at random. */
function pick(rand: () => number): {kind: string; route: string; body: Json; abortAfterEvents?: number; structured?: boolean} {
  const r = rand()
  const stream = rand() < 0.5
  const maxTokens = 8 + Math.floor(rand() * 56)
  const temperature = rand() < 0.5 ? 0 : 0.8
  const user = `${prose(rand, 4 + Math.floor(rand() * 40))}?`
  const effort = rand() < 0.7 ? 'none' : 'low'
  if (r < 0.16) return {kind: 'chat', route: '/v1/chat/completions', body: {model, messages: [{role: 'system', content: 'Be brief.'}, {role: 'user', content: user}], max_tokens: maxTokens, temperature, stream, reasoning_effort: effort, ...(stream ? {stream_options: {include_usage: true}} : {})}}
  if (r < 0.26) return {kind: 'chat tools', route: '/v1/chat/completions', body: {model, messages: [{role: 'user', content: user}], tools: [{type: 'function', function: {name: 'weather', parameters: weatherTool}}], tool_choice: rand() < 0.5 ? 'auto' : 'required', max_tokens: maxTokens + 32, temperature, stream, reasoning_effort: 'none'}}
  if (r < 0.34) return {kind: 'chat schema', route: '/v1/chat/completions', structured: true, body: {model, messages: [{role: 'user', content: user}], response_format: rand() < 0.5 ? {type: 'json_object'} : {type: 'json_schema', json_schema: {name: 'person', schema: personSchema}}, max_tokens: maxTokens + 40, temperature, stream, reasoning_effort: 'none'}}
  if (r < 0.46) return {kind: 'responses', route: '/v1/responses', body: {model, input: [{role: 'user', content: [{type: 'input_text', text: user}]}], max_output_tokens: maxTokens, temperature, stream, reasoning: {effort}}}
  if (r < 0.52) return {kind: 'responses schema', route: '/v1/responses', structured: true, body: {model, input: user, text: {format: {type: 'json_schema', name: 'person', schema: personSchema}}, max_output_tokens: maxTokens + 40, temperature, stream, reasoning: {effort: 'none'}}}
  if (r < 0.64) return {kind: 'messages', route: '/v1/messages', body: {model, max_tokens: maxTokens, temperature, stream, system: 'Be brief.', messages: [{role: 'user', content: user}]}}
  if (r < 0.70) return {kind: 'messages tools', route: '/v1/messages', body: {model, max_tokens: maxTokens + 32, temperature, stream, tools: [{name: 'weather', input_schema: weatherTool}], tool_choice: {type: rand() < 0.5 ? 'auto' : 'any'}, messages: [{role: 'user', content: user}]}}
  if (r < 0.80) return {kind: 'completions', route: '/v1/completions', body: {model, prompt: user, max_tokens: maxTokens, temperature, stream, logprobs: rand() < 0.3 ? 2 : undefined}}
  if (r < 0.95) {
    // a client that hangs up mid-stream (after a few events), on any API
    const routes: Array<[string, Json]> = [
      ['/v1/chat/completions', {messages: [{role: 'user', content: user}], max_tokens: 64}],
      ['/v1/responses', {input: user, max_output_tokens: 64}],
      ['/v1/messages', {max_tokens: 64, messages: [{role: 'user', content: user}]}],
      ['/v1/completions', {prompt: user, max_tokens: 64}],
    ]
    const [route, b] = routes[Math.floor(rand() * routes.length)]!
    return {kind: 'abort', route, abortAfterEvents: 1 + Math.floor(rand() * 6), body: {model, ...b, stream: true, temperature}}
  }
  // longer than the context: must be refused with a 400 before any work
  return {kind: 'over-long', route: '/v1/chat/completions', body: {model, messages: [{role: 'user', content: prose(rand, Math.ceil(contextLength * 1.3))}], max_tokens: 8, stream}}
}

// ---- the run -----------------------------------------------------------------------------------------------
const quiet = new Map<string, string>()
for (const p of probes()) {
  const o = await send(p.kind, p.route, p.body, {structured: p.structured})
  if (o.status !== 200 || o.answer === undefined) throw new Error(`quiet probe ${p.kind}: HTTP ${o.status} ${o.streamError ?? ''}`)
  quiet.set(p.kind, o.answer)
}
const samples: Sample[] = [await sample()]
const byStatus: Record<string, number> = {}
const byKind: Record<string, Record<string, number>> = {}
const problems: string[] = []
let requests = 0
let aborts = 0
let structured = 0
let badJson = 0
let probeRuns = 0
let probeMismatches = 0
const note = (o: Outcome, expected: number) => {
  requests++
  const key = o.aborted ? 'aborted by client' : String(o.status)
  byStatus[key] = (byStatus[key] ?? 0) + 1
  const k = (byKind[o.kind] ??= {})
  k[key] = (k[key] ?? 0) + 1
  if (o.aborted) aborts++
  if (o.badJson) {
    badJson++
    problems.push(`${o.kind}: unparseable structured answer (finish ${o.finish})`)
  }
  if (o.streamError) problems.push(`${o.kind}: ${o.streamError}`)
  else if (!o.aborted && o.status !== expected) problems.push(`${o.kind}: HTTP ${o.status}, expected ${expected}`)
}

const deadline = t0 + MINUTES * 60_000
const sampler = setInterval(() => void sample().then(s => samples.push(s)).catch(() => undefined), 30_000)
async function client(id: number): Promise<void> {
  const rand = rng(SEED + id)
  let n = 0
  while (performance.now() < deadline) {
    // every 25th request of a client is a greedy probe, compared with the quiet server's answer
    if (++n % 25 === 0) {
      const ps = probes()
      const p = ps[Math.floor(rand() * ps.length)]!
      const o = await send(p.kind, p.route, p.body, {structured: p.structured})
      note(o, 200)
      probeRuns++
      if (o.answer !== quiet.get(p.kind)) {
        probeMismatches++
        problems.push(`${p.kind} under load differs from the quiet run: ${JSON.stringify(o.answer?.slice(0, 120))} vs ${JSON.stringify(quiet.get(p.kind)?.slice(0, 120))}`)
      }
      continue
    }
    const req = pick(rand)
    const o = await send(req.kind, req.route, req.body, {abortAfterEvents: req.abortAfterEvents, structured: req.structured})
    if (req.structured && !o.aborted && o.status === 200) structured++
    note(o, req.kind === 'over-long' ? 400 : 200)
  }
}
await Promise.all(Array.from({length: CLIENTS}, (_, i) => client(i)))
clearInterval(sampler)

// quiet again: nothing running, the same greedy answers
await new Promise(r => setTimeout(r, 2000))
const finalProbes: Record<string, boolean> = {}
for (const p of probes()) {
  const o = await send(p.kind, p.route, p.body, {structured: p.structured})
  finalProbes[p.kind] = o.answer === quiet.get(p.kind)
  if (!finalProbes[p.kind]) problems.push(`${p.kind} after the soak differs from the quiet run`)
}
const end = await sample()
samples.push(end)
// SIGTERM, as a service manager stops it: the prefix cache writes its disk tier before the process exits
const exited = new Promise<void>(r => (server.child.exitCode !== null || server.child.signalCode !== null ? r() : server.child.once('exit', () => r())))
const stopAt = performance.now()
server.child.kill('SIGTERM')
await Promise.race([exited, new Promise(r => setTimeout(r, 120_000))])
if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL')
await exited
const stopMs = Math.round(performance.now() - stopAt)
const exitCode = server.child.exitCode ?? server.child.signalCode
// what the server logged at error level (every 5xx is): pino's JSON lines with level 50 or more
const errorLog = server.output().split('\n').filter(l => /"level":(5|6)0/.test(l))
const diskFolderBytes = folderBytes(data)

const first = samples[0]!
const result = {
  command: `npx tsx bench/soak.ts --model ${MODEL} --minutes ${MINUTES} --clients ${CLIENTS} --seed ${SEED} --max-memory ${MAX_MEMORY}`,
  // --commit when the run goes from a copy of the build outside the repository
  commit: args.get('commit') ?? execSync('git rev-parse --short HEAD').toString().trim(),
  machine: {host: hostname(), cpu: cpus()[0]?.model, cores: cpus().length, memoryGiB: Math.round(totalmem() / 2 ** 30)},
  date: started.toISOString(),
  model,
  contextLength,
  minutes: MINUTES,
  clients: CLIENTS,
  seed: SEED,
  requests,
  requestsPerMinute: Math.round((requests / ((performance.now() - t0) / 60_000)) * 10) / 10,
  byStatus,
  byKind,
  clientAborts: aborts,
  structuredAnswers: structured,
  unparseableStructured: badJson,
  greedyProbes: {underLoad: probeRuns, mismatches: probeMismatches, afterSoakIdentical: finalProbes},
  start: first,
  end,
  rssGrowthBytes: end.rssBytes - first.rssBytes,
  kvBlocksStartEnd: [first.kvBlocks, end.kvBlocks],
  diskTier: {bytesReported: end.diskBytes, snapshots: end.diskSnapshots, dataFolderBytesAfterStop: diskFolderBytes},
  serverExit: exitCode,
  stopMs,
  serverErrorLogLines: errorLog.length,
  serverErrorLog: errorLog.slice(0, 20),
  problems: problems.slice(0, 200),
  problemCount: problems.length,
  samples,
}
// The title and one record make the file a table of docs/benchmarks.md (bench/render-tables.ts); the rest is the raw run.
const day = result.date.slice(0, 10)
const MiB = 2 ** 20
const record = {
  measurement: `${MINUTES} minutes, ${CLIENTS} clients, seed ${SEED}`,
  command: result.command,
  result:
    `${requests.toLocaleString('en-US')} requests: ${Object.entries(byStatus).map(([s, n]) => `${s}×${n}`).join(', ')}; ` +
    `${badJson} unparseable of ${structured} structured answers; ${probeMismatches} of ${probeRuns} greedy probes differing; ` +
    `KV blocks ${first.kvBlocks} → ${end.kvBlocks}; RSS ${(first.rssBytes / MiB).toFixed(0)} → ${(end.rssBytes / MiB).toFixed(0)} MiB; ` +
    `disk tier ${(end.diskBytes / MiB).toFixed(0)} MiB; ${problems.length} problems`,
  machine: `${result.machine.cpu} VM, ${result.machine.cores} cores, ${result.machine.memoryGiB} GiB`,
  commit: result.commit,
  date: day,
  recorded: {commit: result.commit, date: day},
}
mkdirSync(dirname(OUT), {recursive: true})
writeFileSync(OUT, JSON.stringify({title: 'Soak: mixed traffic on every API', records: [record], ...result}, null, 2) + '\n')
console.log(`${requests} requests in ${MINUTES} min at ${CLIENTS} clients: ${JSON.stringify(byStatus)}; problems ${problems.length}`)
console.log(`RSS ${(first.rssBytes / 2 ** 20).toFixed(0)} -> ${(end.rssBytes / 2 ** 20).toFixed(0)} MiB; KV blocks ${first.kvBlocks} -> ${end.kvBlocks}; disk tier ${(end.diskBytes / 2 ** 20).toFixed(1)} MiB`)
console.log(`greedy probes under load: ${probeRuns}, mismatches ${probeMismatches}; wrote ${OUT}`)
