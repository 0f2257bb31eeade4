// Which native calls (steps, draft passes) run inline, on the JS thread, instead of on a thread of libuv's pool
// (native.ts, CallOptions). A queued call pays two thread hand-offs — to the pool thread and back to the event loop —
// which on this project's 2-core VMs cost ~0.1–0.2 ms a step, a fifth of the default package's decode step; an
// inline call blocks the event loop for its length instead. So a call runs inline when calls like it (few tokens:
// decodes, verify blocks, draft passes) have recently been short, and the caller has no work of its own to do
// while it runs (GrammarRows.prepare's masks). After an inline call the event loop gets a turn, so requests,
// disconnects and timers are served between steps as they are around a queued one.
// Inline calls are on for the CPU backend. On a device backend the step's host thread waits for the device, and
// that thread then becomes the JS thread; this has not been measured on one yet (no device in the session that
// wrote it), so there they stay queued unless SPLASH_INLINE_STEPS=1. SPLASH_INLINE_STEPS=0 keeps every call
// queued (diagnosis and measurement).
import {readOptions} from '../config/options.js'

/** Calls of more tokens than this are never inline (prefill chunks). */
export const INLINE_MAX_TOKENS = 64
/** Inline only while the recent calls of at most INLINE_MAX_TOKENS tokens average less than this (ms). */
export const INLINE_MAX_MS = 3

/** Whether short calls may run inline on `backend` ('cpu', 'cuda'), after SPLASH_INLINE_STEPS (0/off, 1/on). */
export function inlineEnabled(backend: string, env: NodeJS.ProcessEnv = process.env): boolean {
  const v = readOptions(env).inlineSteps
  return v === undefined ? backend === 'cpu' : v === 'on'
}

export class InlinePolicy {
  private ms = Number.POSITIVE_INFINITY // exponential average of the short calls' wall times; unknown at first

  constructor(private readonly enabled: boolean) {}

  /** Whether a call of `tokens` tokens runs inline; `concurrent`: the caller works while the call runs. */
  choose(tokens: number, concurrent: boolean): boolean {
    return this.enabled && !concurrent && tokens <= INLINE_MAX_TOKENS && this.ms < INLINE_MAX_MS
  }

  /** Records a call's wall time in ms (queued calls included: the hand-offs only make them look longer). */
  observe(tokens: number, ms: number): void {
    if (tokens > INLINE_MAX_TOKENS) return
    this.ms = Number.isFinite(this.ms) ? 0.75 * this.ms + 0.25 * ms : ms
  }
}

/** One turn of the event loop (I/O callbacks, then this). */
export function loopTurn(): Promise<void> {
  return new Promise(resolve => setImmediate(resolve))
}
