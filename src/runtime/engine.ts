// The engine facade: accepts generation requests, runs the step loop (one model step at a time, the
// compute on native threads), and streams events back. No HTTP here.
import type {StepModel} from './step-model.js'
import type {GenerationEvent, GenerationRequest} from './request.js'
import {Scheduler, type SchedulerLimits} from './scheduler.js'

export const DEFAULT_LIMITS: SchedulerLimits = {tokenBudget: 512, maxRunning: 16, maxWaiting: 256}

export class Engine {
  readonly scheduler: Scheduler
  private loop: Promise<void> | undefined

  constructor(
    readonly model: StepModel,
    limits: Partial<SchedulerLimits> = {},
  ) {
    this.scheduler = new Scheduler(model, {...DEFAULT_LIMITS, ...limits})
  }

  /**
   * Starts a generation. Events arrive through `onEvent`; the last one is `done` or `error`.
   * Throws a SplashError synchronously when the request cannot be accepted (too long, queue full).
   */
  submit(request: GenerationRequest, onEvent: (event: GenerationEvent) => void): void {
    const seq = this.scheduler.add(request, onEvent)
    const signal = request.signal
    if (signal) {
      const onAbort = () => this.scheduler.cancel(seq)
      if (signal.aborted) onAbort()
      else signal.addEventListener('abort', onAbort, {once: true})
    }
    this.kick()
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

  /** Resolves when no request is left. */
  async idle(): Promise<void> {
    while (this.loop) await this.loop
  }

  private kick(): void {
    if (this.loop) return
    this.loop = this.run().finally(() => {
      this.loop = undefined
      if (this.scheduler.hasWork()) this.kick()
    })
  }

  private async run(): Promise<void> {
    while (this.scheduler.hasWork()) {
      const batch = this.scheduler.schedule()
      if (batch.items.length === 0) {
        // Everything left is cancelled or waiting for room; let cancellations land.
        await new Promise(r => setImmediate(r))
        if (this.scheduler.numRunning === 0 && this.scheduler.numWaiting === 0) break
        continue
      }
      let results: Array<Float32Array | null>
      try {
        results = await this.model.step(batch.items)
      } catch (err) {
        this.scheduler.failBatch(batch, err as Error)
        continue
      }
      try {
        this.scheduler.postprocess(batch, results)
      } catch (err) {
        this.scheduler.failBatch(batch, err as Error)
      }
    }
  }
}
