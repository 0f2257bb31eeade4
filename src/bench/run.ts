// `splash bench`: the product table. Starts `splash serve` on a package, runs the four scenarios over HTTP, and (with
// --peer llama.cpp) the same scenarios through node-llama-cpp on a GGUF export of the same weights.
import {existsSync, statSync} from 'node:fs'
import {mkdir, writeFile} from 'node:fs/promises'
import {basename, dirname, join, resolve} from 'node:path'
import {SplashError} from '../errors.js'
import {defaultPackageDir} from '../serving/load-model.js'
import {readManifest} from '../package/manifest.js'
import {benchCacheDir, machine, presetPackage, progress, splashVersion, type Log} from './common.js'
import {runScenarios, type ScenarioResults, type ScenarioSettings} from './scenarios.js'
import {SplashDriver} from './splash-driver.js'
import {markdownTable, svgChart} from './report.js'

export interface BenchOptions {
  model?: string
  preset?: string
  layers?: number
  quick: boolean
  runs?: number
  maxTokens?: number
  prefillTokens?: number
  concurrency?: number[]
  reasoningEffort: string
  /** Sampling temperature of Splash's requests (default 0, greedy; the peer stays greedy). */
  temperature?: number
  out?: string
  peer?: 'llama.cpp'
  gguf?: string
  threads?: number
  maxContext?: string
  /** Serve with the package's draft ('on') or without it ('off'); default: off for a synthetic package, whose draft
   * has random weights (its speculative figures would measure chance agreement, not the engine), on otherwise. */
  draft?: 'on' | 'off'
  log?: Log
}

export interface BenchOutput {
  table: string
  jsonPath: string
  svgPath: string
  exitCode: number
}

export async function resolveModel(o: Pick<BenchOptions, 'model' | 'preset' | 'layers'>, log: Log): Promise<string> {
  if (o.model) return o.model
  if (o.preset) return presetPackage(o.preset, o.layers, log)
  const def = defaultPackageDir()
  if (def && existsSync(join(def, 'splash.json'))) return def
  throw new SplashError('bench_no_package', 'invalid_request', `no default package (${def || 'SPLASH_DEFAULT_PACKAGE is empty'}); pass --model <package> or --preset <name> (e.g. --preset tiny-hybrid)`)
}

export function settingsFor(o: BenchOptions): ScenarioSettings {
  return {
    runs: o.runs ?? (o.quick ? 2 : 3),
    maxTokens: o.maxTokens ?? (o.quick ? 8 : 128),
    prefillTokens: o.prefillTokens ?? (o.quick ? 256 : 32768),
    concurrency: o.concurrency ?? [1, 2, 4, 8],
    prefillMaxTokens: 2,
  }
}

export async function runBench(o: BenchOptions): Promise<BenchOutput> {
  const log = o.log ?? progress
  // The peer is checked first: a missing node-llama-cpp fails in one line before anything slow starts.
  const peerMod = o.peer ? await import('./peer-llama.js') : undefined
  const peerLib = peerMod ? await peerMod.loadNodeLlamaCpp() : undefined
  const model = await resolveModel(o, log)
  const dir = existsSync(join(model, 'splash.json')) ? resolve(model) : undefined
  const manifest = dir ? await readManifest(dir) : undefined
  const s = settingsFor(o)
  log(`bench: ${manifest?.name ?? model}${o.quick ? ' (quick)' : ''}: ${s.runs} runs, ${s.maxTokens} output tokens, ${s.prefillTokens}-token prefill, concurrency ${s.concurrency.join('/')}`)
  const extra = o.maxContext ? ['--max-context', o.maxContext] : []
  const synthetic = manifest?.provenance.kind === 'synthetic'
  const draft = o.draft ?? (synthetic ? 'off' : 'on')
  const env = draft === 'off' ? {SPLASH_DRAFT: 'off'} : {}
  const splash = await SplashDriver.start(model, {reasoningEffort: o.reasoningEffort, seed: 1, temperature: o.temperature ?? 0}, extra, env)
  const results: ScenarioResults[] = []
  let peerInfo: Record<string, unknown> | null = null
  let code: string
  let draftedTokens = 0
  try {
    log(`server ready at ${splash.server.url} (context ${splash.contextLength})`)
    const r = await runScenarios(splash, s, log)
    code = r.code
    draftedTokens = await splash.draftedTokens()
    results.push(strip(r))
    if (peerMod && peerLib) {
      if (!dir || !manifest) throw new SplashError('bench_peer_package', 'invalid_request', '--peer needs a local package folder (--model ./dir or --preset)')
      const gguf = o.gguf ?? join(benchCacheDir(), 'gguf', `${basename(dir)}.gguf`)
      // An export in the bench cache is reused while it is newer than the package's manifest.
      const fresh = existsSync(gguf) && (o.gguf !== undefined || statSync(gguf).mtimeMs > statSync(join(dir, 'splash.json')).mtimeMs)
      if (!fresh) {
        const {exportGguf} = await import('../package/export/export-gguf.js')
        await mkdir(dirname(gguf), {recursive: true})
        log(`exporting ${dir} → ${gguf}`)
        await exportGguf({dir, out: gguf, log})
      }
      const peer = await peerMod.LlamaCppDriver.open(peerLib, {
        gguf,
        render: msgs => splash.render(msgs),
        contextLength: Math.min(splash.contextLength, s.prefillTokens + 2048),
        threads: o.threads,
        maxConcurrency: Math.max(...s.concurrency),
        cuda: splash.backend.startsWith('cuda'),
      })
      try {
        peerInfo = peer.info()
        results.push(strip(await runScenarios(peer, s, log, code)))
      } finally {
        await peer.close()
      }
    }
  } finally {
    await splash.close()
  }

  const m = machine()
  const notes = [
    `Medians (min–max) over ${s.runs} runs; ${s.maxTokens} output tokens, ${o.temperature ? `temperature ${o.temperature}` : 'greedy'}, reasoning_effort ${o.reasoningEffort}. ` +
      `Splash (${splash.backend} backend): streaming chat completions against splash serve, timed by the HTTP client.`,
    draft === 'off'
      ? `Speculative decoding off${synthetic && o.draft === undefined ? " (a synthetic package's draft has random weights; --draft on measures it, as random-draft figures)" : ''}.`
      : `Speculative decoding on: ${draftedTokens} tokens drafted${synthetic ? '; random draft (synthetic package): its figures measure chance agreement with random weights' : ''}.`,
  ]
  if (peerInfo) {
    notes.push(
      `llama.cpp: node-llama-cpp ${String(peerInfo.version)} in-process on ${basename(String(peerInfo.gguf))}, ` +
        `${peerInfo.gpu === 'cuda' ? 'CUDA (every layer on the GPU, flash attention)' : `${String(peerInfo.threads)} threads`}, ` +
        `prompts rendered by Splash's chat template; its TTFT starts after rendering (no HTTP). Ratio > 1: Splash is better.`,
    )
  }
  const table = `${markdownTable(results)}\n\n${notes.join('\n')}`
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const jsonPath = resolve(o.out ?? join('bench-results', `bench-${(manifest?.name ?? 'model').replace(/[^\w.-]+/g, '_')}-${stamp}.json`))
  const svgPath = jsonPath.replace(/\.json$/i, '') + '.svg'
  await mkdir(dirname(jsonPath), {recursive: true})
  const doc = {
    kind: 'splash-bench',
    version: splashVersion(),
    date: new Date().toISOString(),
    quick: o.quick,
    machine: m,
    backend: {splash: splash.backend, peer: peerInfo},
    package: manifest
      ? {dir, name: manifest.name, family: manifest.family, quant: manifest.weights.quant, layers: manifest.config.num_hidden_layers, provenance: manifest.provenance}
      : {spec: model},
    settings: {...s, reasoningEffort: o.reasoningEffort, temperature: o.temperature ?? 0, seed: 1, draft, randomDraft: synthetic && draft === 'on'},
    draftedTokens,
    results,
    table,
  }
  await writeFile(jsonPath, JSON.stringify(doc, null, 2))
  const subtitle = `${manifest?.name ?? model} (${manifest?.weights.quant ?? '?'}) · ${m.cpu}, ${m.cores} cores${m.gpu ? `, ${m.gpu}` : ''} · ${splashVersion()} · ${doc.date.slice(0, 16)}Z`
  await writeFile(svgPath, svgChart(results, subtitle))
  return {table, jsonPath, svgPath, exitCode: 0}
}

/** Drops the long prompt text from the stored results (the JSON keeps figures, not prompts). */
function strip(r: ScenarioResults & {code?: string}): ScenarioResults {
  const {code: _code, ...rest} = r
  return rest
}
