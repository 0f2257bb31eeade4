// The engine facade: accepts generation requests, runs the step loop (one model step at a time, the
// compute on native threads), and streams events back. No HTTP here.
import {readOptions} from '../config/options.js'
import type {StepModel, StepResult} from './step-model.js'
import type {GenerationEvent, GenerationRequest} from './request.js'
import {Scheduler, type Batch, type SchedulerLimits} from './scheduler.js'
import type {Metrics} from './metrics.js'
import {PrefixCache} from '../cache/prefix-cache.js'
import type {PrefixDisk} from '../cache/prefix-disk.js'
import {StepTrace} from './step-trace.js'

/** Control over one submitted request. */
export interface GenerationHandle {
  cancel(): void
  /** The next generated tokens will be these, in order, instead of sampled ones. */
  force(tokens: readonly number[]): void
  /** The budget's closing path was forced (budget-close.ts): max_tokens decided where the output ends. */
  readonly closedByBudget: boolean
}

/** How long the engine waits without work before the prefix cache writes its new snapshots to disk. */
export const IDLE_SAVE_MS = 2000

export const DEFAULT_LIMITS: SchedulerLimits = {tokenBudget: 512, maxRunning: 16, maxWaiting: 256}

/** EngineOptions.gather: the longest quiet gap that still gathers (ms), and the longest a first arrival waits, in gaps. */
export const GATHER_GAP_MAX_MS = 10
export const GATHER_MAX_GAPS = 8

export interface EngineOptions {
  /** Bytes the prefix cache may hold (0 or absent: no prefix cache). SPLASH_PREFIX_CACHE=off disables it. */
  cacheBytes?: number
  /** The prefix cache's disk tier (absent: memory only). SPLASH_PREFIX_DISK=off disables it. */
  disk?: PrefixDisk
  /** The most tokens any request may generate (default: SPLASH_MAX_OUTPUT_TOKENS, else no cap beyond the context). */
  maxOutputTokens?: number
  /**
   * Requests that reach an idle engine (nothing running) close together start in one first step: it waits for
   * more until a gap of this share of a one-sequence decode step (as measured, at most GATHER_GAP_MAX_MS) passes
   * without one (none under 1 ms), at most GATHER_MAX_GAPS gaps. Clients sent together arrive milliseconds apart once the first one's
   * step holds the cores (a 2-core CPU), and each later one's prefill would stall the streams already started.
   * 0 or absent: the first step starts at once.
   */
  gather?: number
}

/** SPLASH_PREFIX_CACHE=off (or 0/false/no): every prompt is computed in full (diagnosis and benchmarks). */
export function prefixCacheDisabled(env: NodeJS.ProcessEnv = process.env): boolean {
  return readOptions(env).prefixCacheOff
}

/**
 * SPLASH_MAX_OUTPUT_TOKENS=N: no request generates more than N tokens, whatever its max_tokens (like llama.cpp's
 * --n-predict); the request ends with finish reason `length`. Unset, empty or not a positive integer: no cap.
 */
export function outputTokenCap(env: NodeJS.ProcessEnv = process.env): number | undefined {
  return readOptions(env).maxOutputTokens
}

export class Engine {
  readonly scheduler: Scheduler
  readonly maxOutputTokens: number | undefined
  private loop: Promise<void> | undefined
  private idleTimer: NodeJS.Timeout | undefined
  private idleSave: Promise<void> | undefined
  private readonly trace: StepTrace | undefined
  private readonly gatherShare: number
  /** Wall time of a step that decodes one sequence alone (ms, decayed mean; 0 until one has run). */
  private soloStepMs = 0
  /** The wait for more arrivals before an idle engine's first step (absent: none). */
  private gathering: {timer: NodeJS.Timeout; rearm: () => void} | undefined

  constructor(
    readonly model: StepModel,
    limits: Partial<SchedulerLimits> = {},
    private readonly metrics?: Metrics,
    options: EngineOptions = {},
  ) {
    const env = readOptions()
    this.maxOutputTokens = options.maxOutputTokens ?? env.maxOutputTokens
    this.gatherShare = options.gather ?? 0
    const store = model.store
    const cacheBytes = options.cacheBytes ?? 0
    const cache =
      store && cacheBytes > 0 && !env.prefixCacheOff
        ? new PrefixCache(store, {
            capacityBytes: cacheBytes,
            rowBytes: store.rowBytes,
            stateBytes: store.stateBytes,
            ...(options.disk && store.exportSaved && store.importSaved ? {disk: options.disk} : {}),
          })
        : undefined
    const fixedDraft = limits.fixedDraft ?? env.fixedDraft
    this.scheduler = new Scheduler(model, {...DEFAULT_LIMITS, ...limits, ...(fixedDraft !== undefined ? {fixedDraft} : {})}, cache)
    this.trace = StepTrace.fromEnv()
    this.scheduler.onReady = () => this.kick()
    if (metrics) this.scheduler.onAcceptance = (committed, drafted) => metrics.observeAcceptance(committed, drafted)
  }

  /**
   * Starts a generation. Events arrive through `onEvent`; the last one is `done` or `error`.
   * Throws a SplashError synchronously when the request cannot be accepted (too long, queue full).
   */
  submit(request: GenerationRequest, onEvent: (event: GenerationEvent) => void): GenerationHandle {
    const cap = this.maxOutputTokens
    if (cap !== undefined && request.maxTokens > cap) request = {...request, maxTokens: cap}
    const seq = this.scheduler.add(request, this.measured(onEvent))
    const cancel = () => this.scheduler.cancel(seq)
    const signal = request.signal
    if (signal) {
      if (signal.aborted) cancel()
      else signal.addEventListener('abort', cancel, {once: true})
    }
    this.kick(true)
    return {
      cancel,
      force: tokens => void seq.forced.push(...tokens),
      get closedByBudget() {
        return seq.closing
      },
    }
  }

  /** Async iterator over a request's events (convenience for plugins that stream). */
  generate(request: GenerationRequest): AsyncIterable<GenerationEvent> {
    const queue: GenerationEvent[] = []
    let wake: (() => void) | undefined
    let ended = false
    this.submit(request, event => {
      queue.push(event)
      if (event.type === 'done' || event.type === 'error') ended = true
      wake?.()
    })
    return {
      [Symbol.asyncIterator]: async function* () {
        for (;;) {
          while (queue.length > 0) {
            const e = queue.shift()!
            yield e
            if (e.type === 'done' || e.type === 'error') return
          }
          if (ended) return
          await new Promise<void>(r => (wake = r))
          wake = undefined
        }
      },
    }
  }

  /** Wraps a request's event callback so that token counts and latencies land in the metrics. */
  private measured(onEvent: (event: GenerationEvent) => void): (event: GenerationEvent) => void {
    const m = this.metrics
    if (!m) return onEvent
    const start = performance.now()
    let last = 0
    return event => {
      if (event.type === 'token') {
        const now = performance.now()
        if (last === 0) m.ttft.observe((now - start) / 1000)
        else m.interToken.observe((now - last) / 1000)
        last = now
        m.generatedTokens.inc()
      } else if (event.type === 'done') {
        m.promptTokens.inc(event.usage.promptTokens)
        if (event.usage.cachedTokens > 0) {
          m.cacheHits.inc()
          m.cachedTokens.inc(event.usage.cachedTokens)
        }
        m.finished.inc(1, {reason: event.reason})
      } else if (event.type === 'error') {
        m.finished.inc(1, {reason: 'error'})
      }
      onEvent(event)
    }
  }

  /** The server is stopping: the prefix cache writes what it holds to its disk tier (when it has one). */
  async persist(): Promise<void> {
    clearTimeout(this.idleTimer)
    await this.idle()
    await this.idleSave
    await this.scheduler.cache?.persist()
  }

  /**
   * Once the engine has had no work for IDLE_SAVE_MS, the prefix cache writes its snapshots that are not on disk yet
   * (an agent's last turn, while the agent runs its tools), so a crash or a kill loses little; it stops as soon as
   * work comes in.
   */
  private whenIdle(): void {
    const cache = this.scheduler.cache
    if (!cache?.diskStats()) return
    clearTimeout(this.idleTimer)
    this.idleTimer = setTimeout(() => {
      if (this.loop || this.idleSave) return
      this.idleSave = cache
        .persist(() => !this.loop)
        .catch(() => undefined)
        .finally(() => (this.idleSave = undefined))
    }, IDLE_SAVE_MS)
    this.idleTimer.unref()
  }

  /** Resolves when no request is left. */
  async idle(): Promise<void> {
    while (this.loop) await this.loop
  }

  /** Starts the step loop unless it runs; `arrival`: a request came in (an idle engine may gather, EngineOptions.gather). */
  private kick(arrival = false): void {
    if (this.gathering) {
      if (arrival) this.gathering.rearm()
      return
    }
    if (this.loop) return
    // a gap under a timer's 1 ms resolution (a model whose decode step takes a few ms) gathers nothing
    const gap = arrival && this.scheduler.numRunning === 0 ? Math.min(GATHER_GAP_MAX_MS, this.gatherShare * this.soloStepMs) : 0
    this.loop = (gap >= 1 ? this.gather(gap).then(() => this.run()) : this.run()).finally(() => {
      this.loop = undefined
      if (this.scheduler.hasWork()) this.kick()
      else this.whenIdle()
    })
  }

  /**
   * Resolves once `gap` ms pass without an arrival (each one rearms it), or GATHER_MAX_GAPS gaps after the first.
   * A timer that fires lets the event loop's I/O phase run first (setImmediate): after a stall of the process the
   * expired timer comes before the requests already received, which must still count.
   */
  private gather(gap: number): Promise<void> {
    const deadline = performance.now() + GATHER_MAX_GAPS * gap
    let armed = 0
    return new Promise(resolve => {
      const arm = () => {
        const mine = ++armed
        const fire = () => {
          if (mine !== armed) return // an arrival rearmed it meanwhile
          this.gathering = undefined
          resolve()
        }
        return setTimeout(() => setImmediate(fire), Math.max(0, Math.min(gap, deadline - performance.now())))
      }
      const gathering = {
        timer: arm(),
        rearm: () => {
          clearTimeout(gathering.timer)
          gathering.timer = arm()
        },
      }
      this.gathering = gathering
    })
  }

  /** The gather's measure: steps that decoded one sequence, one token, and nothing else. */
  private observeSolo(batch: Batch, ms: number): void {
    const it = batch.items
    if (it.length !== 1 || it[0].tokens.length !== 1 || it[0].verify || batch.drafting.length > 0) return
    this.soloStepMs = this.soloStepMs === 0 ? ms : 0.8 * this.soloStepMs + 0.2 * ms
  }

  private async run(): Promise<void> {
    const trace = this.trace
    while (this.scheduler.hasWork()) {
      trace?.begin()
      const closing = this.scheduler.closeForBudget()
      if (closing) await closing
      const batch = this.scheduler.schedule()
      trace?.mark('schedule')
      if (batch.items.length === 0) {
        // Everything left is cancelled or waiting for room; let cancellations land.
        await new Promise(r => setImmediate(r))
        if (!this.scheduler.hasWork()) break
        continue
      }
      let results: StepResult[]
      const t0 = performance.now()
      try {
        if (batch.drafting.length > 0) {
          const drafted = this.model.draft!(this.scheduler.draftRequests(batch), {concurrent: this.scheduler.grammar.busyDuring(batch)})
          await settled(this.scheduler.grammar.prepare(batch), drafted)
          await this.scheduler.fillDrafts(batch, await drafted)
          trace?.mark('draft')
        }
        // the grammar masks for the tokens this step's logits will choose are computed while it runs
        const stepped = this.model.step(batch.items, {concurrent: this.scheduler.grammar.busyDuring(batch)})
        await settled(this.scheduler.grammar.prepare(batch), stepped)
        results = await stepped
        trace?.mark('step')
        await this.scheduler.grammar.settle(batch, results)
        const guarding = this.scheduler.guardBudget(batch, results)
        if (guarding) await guarding
      } catch (err) {
        this.scheduler.failBatch(batch, err as Error)
        await this.scheduler.afterStep({...batch, anchored: []})
        continue
      }
      try {
        this.scheduler.postprocess(batch, results)
        const ms = performance.now() - t0
        this.scheduler.observeStep(batch, ms / 1000)
        this.observeSolo(batch, ms)
      } catch (err) {
        this.scheduler.failBatch(batch, err as Error)
      }
      trace?.mark('post')
      await this.scheduler.afterStep(batch)
      trace?.mark('save')
      trace?.end(batch.items)
    }
  }
}

/** Awaits `work`; if it fails, lets `running` settle first (so its rejection is never left unhandled). */
async function settled(work: Promise<void>, running: Promise<unknown>): Promise<void> {
  try {
    await work
  } catch (err) {
    await running.catch(() => {})
    throw err
  }
}
