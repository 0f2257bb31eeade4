// One request's progress through the engine.
import type {GenerationEvent, GenerationRequest, FinishReason} from './request.js'
import {Rng, randomSeed} from './rng.js'
import {PenaltyCounts} from './penalties.js'
import {penalized, type SampleRequest, type SampleRow} from './sampling.js'
import {Acceptance} from './spec-policy.js'

export type SequenceStatus = 'waiting' | 'running' | 'finished'

let nextId = 1

export class Sequence {
  readonly id = nextId++
  readonly request: GenerationRequest
  readonly rng: Rng
  /** Token counts for repetition / presence / frequency penalties (only when the request has any). */
  readonly penalties: PenaltyCounts | undefined
  readonly emit: (event: GenerationEvent) => void
  status: SequenceStatus = 'waiting'
  /** The native sequence handle once admitted. */
  slot = -1
  /** Tokens already fed to the model (prompt first, then outputs). */
  numComputed = 0
  /** Prompt tokens found in the prefix cache (not recomputed). */
  numCached = 0
  /** Prompt positions at which the prefix cache saves this sequence's state (ascending; set at admission). */
  anchors: number[] = []
  /** Anchors the last step's prefill chunk reached (its end, or states the step kept inside it), saved after it. */
  reached: number[] = []
  readonly output: number[] = []
  finishReason: FinishReason | undefined
  /** Waiting while the prefix cache reads its prompt's prefix back from disk (not admitted until then). */
  warming = false
  /** Set while a step that includes this sequence is running. */
  inFlight = false
  cancelled = false
  /** Tokens to emit next instead of sampling (e.g. closing a think block when its budget is spent). */
  readonly forced: number[] = []
  /** Speculative decoding with the model's draft (decided at admission; every step then captures features). */
  useDraft = false
  /** Drafts proposed this step (the verify tokens after the anchor). */
  drafts: number[] = []
  /**
   * Adaptive block (spec-policy.ts, Scheduler.draftLength): the acceptance estimate, plain decodes left before
   * drafting again, passes in a row with none accepted, decode steps since the last probe and the probe interval.
   */
  readonly acceptance = new Acceptance()
  specSkip = 0
  specFails = 0
  specProbe = 0
  probeEvery = 16
  /** Target passes that verified drafts, and the tokens they committed (acceptance length = committed / passes). */
  specPasses = 0
  specCommitted = 0
  specDrafted = 0
  /** Tokens the last draft pass proposed, before a grammar cut them to the prefix it allows (GrammarRows.walk). */
  proposed = 0
  /** A plain row's in-step token that the grammar already accepted (GrammarRows.settle). */
  grammarAccepted: number | undefined
  /** With a grammar: the last in-step token was allowed, so the next mask is left out until the grammar refuses one. */
  grammarLazy = true
  /**
   * Budget-aware structured output (budget-close.ts): the length of the last closing path looked up (at first the
   * shortest instance's), steps until the next look, and whether the closing path was forced (the request then
   * finishes with 'length').
   */
  closeEstimate: number
  closeCountdown = 0
  closing = false

  constructor(request: GenerationRequest, emit: (event: GenerationEvent) => void) {
    this.request = request
    this.emit = emit
    this.rng = new Rng(request.sampling.seed ?? randomSeed())
    this.penalties = penalized(request.sampling) ? new PenaltyCounts(request.prompt) : undefined
    this.closeEstimate = request.closeWithinBudget?.shortest ?? 0
  }

  /**
   * Uniforms each sampled token takes from the RNG stream: none at T = 0; one without a grammar; two with one
   * (the draw from the filtered distribution, and the draw under the mask when the grammar refuses that token),
   * both consumed whether or not the second was needed, so every token's uniforms sit at a fixed place in the
   * stream (a verify pass knows row r's before anything is sampled).
   */
  get uniformsPerToken(): number {
    if (this.request.sampling.temperature === 0) return 0
    return this.request.constraint ? 2 : 1
  }

  /** The sampled row for the r-th token from now: its uniforms (peeked, not consumed) or a forced token. */
  nextRow(r: number): SampleRow {
    if (r === 0 && this.forced.length > 0) return {token: this.forced[0]}
    const n = this.uniformsPerToken
    if (n === 0) return {}
    return n === 1 ? {uniform: this.rng.peek(r)} : {uniform: this.rng.peek(2 * r), retry: this.rng.peek(2 * r + 1)}
  }

  /** Consumes the uniforms of `tokens` committed sampled tokens. */
  consumeUniforms(tokens: number): void {
    for (let i = tokens * this.uniformsPerToken; i > 0; i--) this.rng.next()
  }

  /** A sampling request for these rows with the request's parameters and the penalty counts so far. */
  sampleRequest(rows: SampleRow[]): SampleRequest {
    const r = this.request
    return {params: r.sampling, rows, logprobs: r.logprobs, penalties: this.penalties?.get()}
  }

  get promptLength(): number {
    return this.request.prompt.length
  }

  get inPrefill(): boolean {
    return this.numComputed < this.promptLength
  }

  /** The token the next decode step feeds: the last output token. */
  get lastToken(): number {
    return this.output[this.output.length - 1]
  }

  get maxLength(): number {
    return this.promptLength + this.request.maxTokens
  }
}
