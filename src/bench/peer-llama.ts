// The llama.cpp peer: node-llama-cpp (an optional dependency, never in package.json) running the same scenarios on a
// GGUF export of the same weights. Prompts are rendered by Splash's own chat template (/apply-template) and tokenized
// by the GGUF's tokenizer, so both engines see the same text. Like llama-server's prompt cache, a sequence keeps the
// tokens of its last request and only evaluates what follows the common prefix (when llama.cpp can erase the tail).
import {existsSync, readFileSync} from 'node:fs'
import {readOptions} from '../config/options.js'
import {cpus} from 'node:os'
import {join} from 'node:path'
import {pathToFileURL} from 'node:url'
import {SplashError} from '../errors.js'
import {projectRoot} from '../native/native.js'
import type {ChatResult, Driver, Message} from './driver.js'

export const PEER_VERSION = '3.21.1'
/** Tokens before the end of a prompt where the peer checkpoints a hybrid model's state. */
const CHECKPOINT_TAIL = 16
export const PEER_INSTALL = `NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm i --prefix /tmp/peer -E node-llama-cpp@${PEER_VERSION} && export SPLASH_PEER_PATH=/tmp/peer`

/* eslint-disable @typescript-eslint/no-explicit-any */
type Lib = any

function candidates(env: NodeJS.ProcessEnv): string[] {
  const out: string[] = []
  const peer = readOptions(env).peerPath
  if (peer) out.push(join(peer, 'node_modules', 'node-llama-cpp'), peer)
  out.push(join(projectRoot, 'node_modules', 'node-llama-cpp'))
  return out
}

/** Imports node-llama-cpp from SPLASH_PEER_PATH (an npm prefix or the package folder) or the project's node_modules. */
export async function loadNodeLlamaCpp(env: NodeJS.ProcessEnv = process.env): Promise<Lib> {
  for (const dir of candidates(env)) {
    const pj = join(dir, 'package.json')
    if (!existsSync(pj)) continue
    const pkg = JSON.parse(readFileSync(pj, 'utf8')) as {name?: string; version?: string; exports?: any; main?: string}
    if (pkg.name !== 'node-llama-cpp') continue
    const entry = pkg.exports?.['.']?.import ?? pkg.exports?.['.']?.default ?? pkg.main ?? 'dist/index.js'
    const lib = await import(pathToFileURL(join(dir, entry)).href)
    return {lib, version: pkg.version, dir}
  }
  throw new SplashError('peer_missing', 'unavailable', `node-llama-cpp is not installed; install it outside the project with: ${PEER_INSTALL}`)
}

export interface PeerOptions {
  gguf: string
  render: (messages: Message[]) => Promise<string>
  contextLength: number
  threads?: number
  maxConcurrency: number
  /** Run llama.cpp on its CUDA build with every layer on the GPU (when Splash runs on CUDA); else on the CPU. */
  cuda?: boolean
}

interface Slot {
  seq: any
  busy: boolean
  size: number
}

export class LlamaCppDriver implements Driver {
  label = 'llama.cpp'
  contextLength: number
  private slots: Slot[] = []
  private constructor(
    private readonly loaded: {lib: Lib; version: string; dir: string},
    private readonly llama: any,
    private readonly model: any,
    private readonly contexts: any[],
    private readonly o: PeerOptions,
    private readonly threads: number,
  ) {
    this.contextLength = o.contextLength
  }

  static async open(loaded: {lib: Lib; version: string; dir: string}, o: PeerOptions): Promise<LlamaCppDriver> {
    // On 2 cores or fewer llama.cpp's spinning thread pool collapses when anything else runs (measured ~60× slower
    // per token with 4 threads on 2 cores): one thread there, all cores elsewhere. --threads overrides.
    const threads = o.threads ?? (cpus().length <= 2 ? 1 : cpus().length)
    let llama: any
    try {
      llama = await loaded.lib.getLlama({gpu: o.cuda ? 'cuda' : false, build: 'never', logLevel: 'error'})
    } catch (err) {
      throw new SplashError('peer_load', 'unavailable', `node-llama-cpp ${loaded.version} has no usable ${o.cuda ? 'CUDA' : 'CPU'} build: ${(err as Error).message}`)
    }
    let model: any
    try {
      // on the GPU every layer is offloaded, as llama-server does by default
      model = await llama.loadModel({modelPath: o.gguf, gpuLayers: o.cuda ? 'max' : 0})
    } catch (err) {
      await llama.dispose()
      throw new SplashError('peer_load', 'internal', `node-llama-cpp ${loaded.version} cannot load ${o.gguf}: ${(err as Error).message}`)
    }
    // flash attention on the GPU, as llama-server's default (auto) picks there
    const common = {batchSize: 512, threads, flashAttention: o.cuda === true}
    const long = await model.createContext({...common, contextSize: o.contextLength, sequences: 1})
    const shortSize = 2048
    const multi = await model.createContext({...common, contextSize: shortSize, sequences: o.maxConcurrency})
    const d = new LlamaCppDriver(loaded, llama, model, [long, multi], o, threads)
    d.slots.push({seq: long.getSequence(), busy: false, size: o.contextLength})
    for (let i = 0; i < o.maxConcurrency; i++) d.slots.push({seq: multi.getSequence(), busy: false, size: shortSize})
    return d
  }

  info(): Record<string, unknown> {
    return {engine: 'llama.cpp via node-llama-cpp', version: this.loaded.version, dir: this.loaded.dir, gguf: this.o.gguf, threads: this.threads, gpu: this.o.cuda === true ? 'cuda' : false}
  }

  private async tokens(messages: Message[]): Promise<number[]> {
    return this.model.tokenize(await this.o.render(messages), true)
  }

  async countTokens(messages: Message[]): Promise<number> {
    return (await this.tokens(messages)).length
  }

  /** Like llama-server's slot choice: the free sequence sharing the longest prefix, else the smallest that fits. */
  private acquire(toks: number[], n: number): Slot {
    // Long prompts go to the long sequence, where their follow-ups (longer still) will also fit.
    const longest = Math.max(...this.slots.map(s => s.size))
    const fit = this.slots.filter(s => !s.busy && s.size >= n && (n <= 1024 || s.size === longest))
    let best: Slot | undefined
    let bestCommon = -1
    for (const s of fit) {
      const had: number[] = s.seq.contextTokens
      let c = 0
      while (c < had.length && c < toks.length && had[c] === toks[c]) c++
      if (c > bestCommon || (c === bestCommon && best && s.size < best.size)) {
        best = s
        bestCommon = c
      }
    }
    if (!best) throw new SplashError('peer_busy', 'internal', `no free llama.cpp sequence for ${n} tokens`)
    best.busy = true
    return best
  }

  async chat(messages: Message[], maxTokens: number): Promise<ChatResult> {
    // Rendering goes through Splash's /apply-template (an HTTP call this engine would not make): the clock starts after
    // it, so TTFT here is tokenize + evaluate; the render time is kept in raw.renderAndTokenizeMs.
    const tr = performance.now()
    const toks = await this.tokens(messages)
    const t0 = performance.now()
    const slot = this.acquire(toks, toks.length + maxTokens + 8)
    try {
      const seq = slot.seq
      const had: number[] = seq.contextTokens
      let common = 0
      while (common < had.length && common < toks.length - 1 && had[common] === toks[common]) common++
      let cached = 0
      if (common > 0 && common < had.length) {
        // Hybrid (recurrent) models cannot drop a tail of their state: node-llama-cpp falls back to the latest
        // checkpoint at or before `common` (see below), else re-evaluates everything.
        try {
          await seq.eraseContextTokenRanges([{start: common, end: seq.nextTokenIndex}])
          const now: number[] = seq.contextTokens
          cached = now.length <= common && now.every((x, i) => x === toks[i]) ? now.length : 0
          if (!cached && now.length > 0) await seq.clearHistory()
        } catch {
          await seq.clearHistory()
        }
      } else if (common > 0 && common === had.length) cached = common
      else if (had.length > 0) await seq.clearHistory()
      let rest = toks.slice(cached)
      // Like llama-server's context checkpoints: state saved a few tokens before the end of a long prompt, so a
      // follow-up that shares the conversation up to there can resume from it.
      if (seq.needsCheckpoints && rest.length > 2 * CHECKPOINT_TAIL) {
        const head = rest.slice(0, rest.length - CHECKPOINT_TAIL)
        await seq.evaluateWithoutGeneratingNewTokens(head)
        await seq.takeCheckpoint()
        rest = rest.slice(head.length)
      }
      let firstAt = 0
      let lastAt = 0
      let n = 0
      for await (const _token of seq.evaluate(rest, {temperature: 0, yieldEogToken: true})) {
        const now = performance.now()
        if (!firstAt) firstAt = now
        lastAt = now
        n++
        if (n >= maxTokens) break // EOS ignored, as Splash's requests ask (ignore_eos): the same output length on both sides
      }
      const end = performance.now()
      if (!firstAt) firstAt = lastAt = end
      const decodeMs = lastAt - firstAt
      return {
        ttftMs: firstAt - t0,
        totalMs: end - t0,
        promptTokens: toks.length,
        cachedTokens: cached,
        promptMs: firstAt - t0,
        completionTokens: n,
        decodeMs,
        decodeTps: n > 1 && decodeMs > 0 ? ((n - 1) / decodeMs) * 1000 : NaN,
        raw: {renderAndTokenizeMs: t0 - tr, threads: this.threads},
        firstAt,
        lastAt,
      }
    } finally {
      slot.busy = false
    }
  }

  async close(): Promise<void> {
    for (const c of this.contexts) await c.dispose()
    await this.model.dispose()
    await this.llama.dispose()
  }
}
