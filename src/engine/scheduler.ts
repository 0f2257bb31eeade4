// Continuous batching: which sequences run in the next step and with how many tokens, and what happens
// after the step (sampling, stop conditions, freeing). schedule() → model.step() → postprocess().
import {mediaFields} from './prompt-media.js'
import type {DraftRequest, StepItem, StepModel, StepResult} from './step-model.js'
import type {GenerationEvent, GenerationRequest, FinishReason} from './request.js'
import {Sequence} from './sequence.js'
import type {SampledToken, SampleRequest, SampleRow} from './sampling.js'
import {GrammarRows} from './constraint/grammar-rows.js'
import {PrefixSaves} from './prefix-saves.js'
import type {Batch} from './batch.js'
import {errors, SplashError} from '../errors.js'
import type {PrefixCache} from '../cache/prefix-cache.js'
import {DraftHistory, MeasuredCost, bestBlock, fixedCost, type PassCost} from './spec-policy.js'
import {closeBeforeStep, guardAfterStep, nearBudget} from './constraint/budget-close.js'

export type {Batch}

export interface SchedulerLimits {
  /** Tokens per step across all sequences (decodes count one each; prefill chunks fill the rest). */
  tokenBudget: number
  /** Sequences running at once. */
  maxRunning: number
  /** Requests allowed to wait; more get 503 with Retry-After. */
  maxWaiting: number
  /** Draft this many tokens on every pass (0: the block's B − 1) instead of the adaptive length (tests, benchmarks). */
  fixedDraft?: number
}

/** Acceptance-length observer (tokens committed per target verify pass). */
export type AcceptanceObserver = (committed: number, drafted: number) => void

export class Scheduler {
  private readonly waiting: Sequence[] = []
  private readonly running: Sequence[] = []
  /** Finished sequences whose state the prefix cache saves before they are freed (afterStep). */
  private readonly releasing: Sequence[] = []

  /** Called when a waiting sequence becomes ready for admission (its prefix read back from disk). */
  onReady: (() => void) | undefined

  /** Called after every verify pass (metrics). */
  onAcceptance: AcceptanceObserver | undefined

  /** Grammar masks of constrained rows (the engine calls prepare() while a step runs and settle() after it). */
  readonly grammar: GrammarRows
  /** Restores and saves prompt states with the prefix cache (absent without a cache or a state store). */
  private readonly saves: PrefixSaves | undefined

  constructor(
    private readonly model: StepModel,
    private readonly limits: SchedulerLimits,
    /** The prefix cache (absent: every prompt is computed in full). */
    readonly cache?: PrefixCache,
  ) {
    this.grammar = new GrammarRows(model)
    this.saves = cache && model.store ? new PrefixSaves(model, model.store, cache) : undefined
    this.fixed = fixedCost(model.backend)
    this.cost = new MeasuredCost(this.fixed)
  }

  /** Draft block length when speculative decoding is available (0: plain decode). */
  private get blockSize(): number {
    return this.model.draft && this.model.truncate ? (this.model.draftBlockSize ?? 0) : 0
  }

  get numWaiting(): number {
    return this.waiting.length
  }

  get numRunning(): number {
    return this.running.length
  }

  /** Sequences to run or admit (waiting ones whose prefix is still being read from disk do not count). */
  hasWork(): boolean {
    return this.running.length > 0 || this.waiting.some(seq => !seq.warming)
  }

  /** Validates and queues a request. Throws a SplashError when it cannot be served. */
  add(request: GenerationRequest, emit: (event: GenerationEvent) => void): Sequence {
    const limit = this.model.contextLength
    if (request.prompt.length === 0) throw errors.invalidRequest('The prompt is empty', 'prompt')
    if (request.prompt.length + Math.max(request.maxTokens, 0) > limit) {
      if (request.prompt.length >= limit) throw errors.contextLengthExceeded(request.prompt.length, limit)
      throw errors.invalidRequest(
        `max_tokens is too large: the prompt has ${request.prompt.length} tokens and the context is ${limit}; at most ${limit - request.prompt.length} can be generated`,
        'max_tokens',
        'context_length_exceeded',
      )
    }
    for (const t of request.prompt) {
      if (t < 0 || t >= this.model.vocabSize) throw errors.invalidRequest(`Token id ${t} is outside the vocabulary (0..${this.model.vocabSize - 1})`, 'prompt')
    }
    for (const t of request.sampling.logitBias?.ids ?? []) {
      if (t < 0 || t >= this.model.vocabSize) throw errors.invalidRequest(`logit_bias names token ${t}, outside the vocabulary (0..${this.model.vocabSize - 1})`, 'logit_bias')
    }
    if (this.waiting.length >= this.limits.maxWaiting) throw errors.overloaded(1)
    const seq = new Sequence(request, emit)
    this.waiting.push(seq)
    const warming = this.saves?.warm(seq)
    if (warming) {
      seq.warming = true
      void warming.then(() => {
        seq.warming = false
        this.onReady?.()
      })
    }
    return seq
  }

  /** Marks a sequence cancelled; it is freed now, or right after the step it is part of. */
  cancel(seq: Sequence): void {
    if (seq.status === 'finished' || seq.cancelled) return
    seq.cancelled = true
    if (!seq.inFlight) this.finish(seq, 'cancelled')
  }

  schedule(): Batch {
    // Admit waiting sequences FIFO while there is room (one whose prefix is being read from disk keeps its place).
    for (let i = 0; i < this.waiting.length && this.running.length < this.limits.maxRunning; ) {
      const seq = this.waiting[i]!
      if (seq.warming) {
        i++
        continue
      }
      // A sequence's state and KV are reserved in full (prompt + max_tokens) here, so a running sequence never
      // runs out of memory and is never preempted. Where the backend has no room for the reservation, admission
      // waits for a running sequence to give its memory back; with none running, nothing will, so it fails.
      let slot: number
      try {
        slot = this.model.createSequence(seq.maxLength)
      } catch (err) {
        if (this.running.length > 0 && err instanceof SplashError && err.code === 'out_of_memory') break
        this.waiting.splice(i, 1)
        this.refuse(seq, err as Error)
        continue
      }
      this.waiting.splice(i, 1)
      seq.slot = slot
      seq.status = 'running'
      const r = seq.request
      // An image prompt speculates too: its verify rows carry the target's M-RoPE positions (index + rope delta);
      // the draft keeps its own 1-D positions. Penalties are applied per verified row (drafted prefix counted).
      seq.useDraft = this.blockSize > 1
      if (seq.useDraft && !rejection(seq)) this.history.start(seq.acceptance)
      this.saves?.resume(seq)
      this.running.push(seq)
    }
    const seqs: Sequence[] = []
    const items: StepItem[] = []
    const drafting: number[] = []
    let budget = this.limits.tokenBudget
    // Decodes first: one token each (a verify pass: the anchor and its drafts), so a long prefill never stalls them.
    for (const seq of this.running) {
      if (seq.inPrefill || budget <= 0) continue
      seq.drafts = []
      const remaining = seq.request.maxTokens - seq.output.length
      // no draft near the budget's end of a structured answer: one token a step, each checked (budget-close.ts)
      const drafts = seq.useDraft && seq.forced.length === 0 && seq.specSkip === 0 && !nearBudget(seq) ? this.draftLength(seq) : 0
      const k = Math.min(drafts, remaining - 1, budget - 1)
      if (k >= 1) {
        drafting.push(seqs.length)
        seq.drafts.length = k // filled by fillDrafts
        budget -= 1 + k
      } else {
        if (seq.specSkip > 0) seq.specSkip--
        budget--
      }
      seqs.push(seq)
      items.push({
        seq: seq.slot,
        tokens: Int32Array.of(seq.lastToken),
        logits: 'none',
        // with a grammar the row stays where the model is, for a draw under the mask when the grammar refuses the token
        keep: seq.request.constraint !== undefined,
        capture: seq.useDraft,
        sample: seq.sampleRequest([seq.nextRow(0)]),
        ...mediaFields(seq.request.media, seq.promptLength, seq.numComputed, 1),
      })
    }
    // Then prefill chunks, oldest first, under what is left of the budget.
    for (const seq of this.running) {
      if (!seq.inPrefill || budget <= 0) continue
      const n = this.chunkLength(seq, budget)
      const tokens = seq.request.prompt.subarray(seq.numComputed, seq.numComputed + n)
      seqs.push(seq)
      const last = seq.numComputed + n === seq.promptLength
      const keep = seq.request.constraint !== undefined && last
      // the cache anchors inside the chunk: the step keeps the state there, saved after it (afterStep)
      const inside = seq.anchors.filter(a => a > seq.numComputed && a < seq.numComputed + n)
      const snapshots = inside.length > 0 ? {snapshots: inside} : {}
      items.push({seq: seq.slot, tokens, logits: 'none', keep, capture: seq.useDraft, sample: this.prefillSample(seq, n), ...snapshots, ...mediaFields(seq.request.media, seq.promptLength, seq.numComputed, n)})
      budget -= n
    }
    for (const seq of seqs) seq.inFlight = true
    return {seqs, items, drafting, committed: 0, anchored: [], failed: new Map()}
  }

  /**
   * After a step (and its postprocess): the prefix cache saves the state of sequences whose prefill reached
   * an anchor and of sequences that finished, which are then freed (PrefixSaves). Never throws.
   */
  async afterStep(batch: Batch): Promise<void> {
    const anchored = batch.anchored.filter(seq => seq.status === 'running' && !seq.cancelled)
    const releasing = this.releasing.splice(0)
    for (const seq of anchored) seq.inFlight = true // a cancel meanwhile waits until the save is done
    try {
      await this.saves?.save(anchored, releasing)
    } finally {
      for (const seq of batch.anchored) seq.reached = [] // saved or not (a cancel, no cache), they are this step's only
      for (const seq of anchored) {
        seq.inFlight = false
        if (seq.cancelled) this.finish(seq, 'cancelled')
      }
      for (const seq of releasing) this.model.freeSequence(seq.slot)
    }
  }

  /**
   * The next prefill chunk of a sequence under `budget` tokens: the rest of its prompt, its cache anchors inside it
   * kept by the step (StepItem.snapshots). A chunk the budget cuts short ends at the last anchor it reaches, so that
   * its next chunk starts there, as a request resuming from that anchor's snapshot does: the chunked GDN's sums
   * follow where its calls start, and this way a cache hit computes what the miss computed, bit for bit.
   */
  private chunkLength(seq: Sequence, budget: number): number {
    const rest = seq.promptLength - seq.numComputed
    if (budget >= rest) return rest
    const last = seq.anchors.filter(a => a > seq.numComputed && a <= seq.numComputed + budget).pop()
    return (last ?? seq.numComputed + budget) - seq.numComputed
  }

  /**
   * What a prefill chunk of n tokens samples: with prompt logprobs, every row (row r scores the prompt token
   * after it; the prompt's last row samples the first output token); else only the prompt's last row.
   */
  private prefillSample(seq: Sequence, n: number): SampleRequest | undefined {
    const r = seq.request
    const start = seq.numComputed
    const last = start + n === seq.promptLength
    if (r.promptLogprobs === undefined) return last && r.maxTokens > 0 ? seq.sampleRequest([seq.nextRow(0)]) : undefined
    const rows: SampleRow[] = []
    for (let i = 0; i < n; i++) {
      const pos = start + i + 1
      rows.push(pos < seq.promptLength ? {token: r.prompt[pos]} : seq.nextRow(0))
    }
    return {...seq.sampleRequest(rows), logprobs: Math.max(r.promptLogprobs, r.logprobs ?? 0)}
  }

  /**
   * Drafts for a sequence's next pass, 0 for a plain decode (spec-policy.ts): the block length that commits the
   * most tokens per unit of cost at the sequence's acceptance, when that beats a plain decode. Greedy and
   * grammar-constrained sequences (whose output is the same either way) use the pass cost the engine measures
   * (observeStep) and decode plainly every 16th step so the plain cost stays current; sampled sequences use
   * the backend's fixed cost model (fixedCost), so a seed gives the same output on every run. While drafting does
   * not pay, a sequence drafts anyway after 16 plain steps, then 32, 64, … up to 256 while it still does not pay,
   * to follow its acceptance at little cost: a sampled sequence on its own clock, greedy and constrained ones on the
   * model's (DraftHistory, which also gives them their starting acceptance). SchedulerLimits.fixedDraft (SPLASH_DRAFT_FIXED
   * and SPLASH_DRAFT_K): always draft that many (0: B−1) per pass (tests and benchmarks).
   */
  private draftLength(seq: Sequence): number {
    const maxK = this.blockSize - 1
    const fixed = this.limits.fixedDraft
    if (fixed !== undefined) return Math.min(maxK, fixed || maxK)
    const measured = !rejection(seq)
    const {k, gain} = bestBlock(seq.acceptance.alpha, measured ? this.cost : this.fixed, maxK)
    seq.specProbe++
    if (gain > 1) {
      if (!measured) {
        seq.probeEvery = 16
        return k
      }
      this.history.paid()
      if (seq.specProbe < 16) return k
      seq.specProbe = 0
      return 0 // a plain decode keeps the plain cost current
    }
    if (measured) {
      if (!this.history.probe()) return 0
      seq.specProbe = 0
      return k
    }
    if (seq.specProbe < seq.probeEvery) return 0
    seq.specProbe = 0
    seq.probeEvery = Math.min(256, 2 * seq.probeEvery)
    return k
  }

  /** The fixed pass cost of the model's backend (sampled sequences; the measured model's prior). */
  private readonly fixed: PassCost
  /** The pass cost the engine measures (greedy and constrained sequences). */
  readonly cost: MeasuredCost
  /** What the greedy and constrained sequences' passes have shown of the draft, and their probe clock. */
  readonly history = new DraftHistory()

  /** Called by the engine with the wall time of a step (draft pass included): plain decode steps and pure verify steps feed the cost model. */
  observeStep(batch: Batch, seconds: number): void {
    let plain = 0
    let rows = 0
    for (let i = 0; i < batch.items.length; i++) {
      const it = batch.items[i]
      if (it.verify) rows += it.tokens.length
      else if (it.tokens.length > 1 || !it.sample) return // a prefill chunk: neither
      else plain++
    }
    const passes = batch.drafting.length
    if (passes === 0 && plain > 0) this.cost.observePlain(seconds / plain)
    else if (plain === 0 && passes > 0 && batch.committed > 0) this.cost.observePass(seconds / passes, rows / passes)
  }

  /**
   * The draft requests of a batch (one per speculative item: its anchor). The draft samples its position r
   * natively with the uniform the target will use there (rng.peek: not consumed; argmax at T = 0).
   */
  draftRequests(batch: Batch): DraftRequest[] {
    return batch.drafting.map(i => {
      const seq = batch.seqs[i]
      const n = seq.drafts.length
      const rows = Array.from({length: n}, (_, r) => (rejection(seq) ? {uniform: seq.rng.peek(3 * r)} : seq.nextRow(r)))
      return {seq: seq.slot, token: seq.lastToken, n, sample: {params: seq.request.sampling, rows, penalties: seq.penalties?.get()}}
    })
  }

  /**
   * Takes the drafted tokens and makes each speculative item a verify pass [anchor, drafts], every row sampled
   * natively with its uniform. With a grammar, the drafts are cut to the prefix it allows (GrammarRows.walk), and
   * the pass's rows stay where the model is for the one that may need a draw under a mask (GrammarRows.settleVerify).
   */
  async fillDrafts(batch: Batch, drafted: StepResult[]): Promise<void> {
    for (let j = 0; j < batch.drafting.length; j++) {
      const i = batch.drafting[j]!
      const seq = batch.seqs[i]!
      const sampled = drafted[j]!.sampled
      if (!sampled || sampled.length !== seq.drafts.length) throw new Error('the draft returned no tokens')
      const tokens = sampled.map(x => x.token)
      const c = seq.request.constraint
      seq.proposed = tokens.length
      try {
        seq.drafts = c ? this.grammar.walk(seq, tokens) : tokens
      } catch (err) {
        // its grammar failed: the sequence is failed after the step (Batch.failed), which verifies its anchor alone
        batch.failed.set(seq, err as Error)
        seq.drafts = []
      }
      batch.items[i] = {
        seq: seq.slot,
        tokens: Int32Array.from([seq.lastToken, ...seq.drafts]),
        logits: 'none',
        keep: c !== undefined,
        capture: true,
        verify: true,
        sample: seq.sampleRequest(this.verifyRows(seq)),
        ...mediaFields(seq.request.media, seq.promptLength, seq.numComputed, seq.drafts.length + 1),
      }
    }
  }

  /**
   * The sampled rows of a verify pass [anchor, d1..dk]. Greedy, or with a grammar: row r draws as plain decoding
   * would (nextRow: argmax rows, or first tries with the r-th token's uniforms). T > 0 without a grammar: row r < k
   * verifies d(r+1) by the rejection rule with the uniforms 3r+1 (acceptance) and 3r+2 (residual) of the stream;
   * the draft sampled d(r+1) with uniform 3r; the last row (all drafts accepted) draws with uniform 3k.
   */
  private verifyRows(seq: Sequence): SampleRow[] {
    const k = seq.drafts.length
    if (!rejection(seq)) return Array.from({length: k + 1}, (_, r) => seq.nextRow(r))
    const rows: SampleRow[] = seq.drafts.map((d, r) => ({draft: d, accept: seq.rng.peek(3 * r + 1), uniform: seq.rng.peek(3 * r + 2)}))
    rows.push({uniform: seq.rng.peek(3 * k)})
    return rows
  }

  /** Budget-aware structured output before a step (budget-close.ts): closing paths forced where the budget is spent. */
  closeForBudget(): Promise<void> | undefined {
    const seqs = [...this.running, ...this.waiting].filter(seq => seq.request.closeWithinBudget !== undefined)
    // nothing to await (and no turn of the event loop between steps) unless a structured answer is running
    return seqs.length > 0 ? closeBeforeStep(seqs, (seq, err) => this.fail(seq, err)) : undefined
  }

  /** After a step, before postprocess: no sampled token may leave a structured answer unable to close (budget-close.ts). */
  guardBudget(batch: Batch, results: StepResult[]): Promise<void> | undefined {
    return batch.seqs.some(nearBudget) ? guardAfterStep(batch, results, this.grammar) : undefined
  }

  postprocess(batch: Batch, results: StepResult[]): void {
    batch.seqs.forEach((seq, i) => {
      seq.inFlight = false
      // a failure of one sequence's own work (its grammar, its second draw) ends that request alone
      const failed = batch.failed.get(seq)
      if (failed) return this.fail(seq, failed)
      try {
        this.postprocessOne(batch, seq, batch.items[i]!, results[i]!.sampled)
      } catch (err) {
        this.fail(seq, err as Error)
      }
    })
  }

  private postprocessOne(batch: Batch, seq: Sequence, item: StepItem, sampled: SampledToken[] | null): void {
    if (seq.cancelled) return this.finish(seq, 'cancelled')
    if (seq.inPrefill) {
      const start = seq.numComputed
      seq.numComputed += item.tokens.length
      seq.reached = seq.anchors.filter(a => a > start && a <= seq.numComputed)
      if (seq.reached.length > 0) batch.anchored.push(seq)
      if (seq.request.promptLogprobs !== undefined && sampled) this.promptLogprobs(seq, start, sampled)
      if (seq.inPrefill) return
      if (seq.request.maxTokens === 0) return this.finish(seq, 'length')
      if (!sampled) throw new Error('the model sampled no token for the end of a prompt')
      return this.accept(seq, sampled, sampled.length - 1)
    }
    if (!sampled) throw new Error('the model sampled no token for a decode step')
    if (item.verify) return void (batch.committed += this.verify(seq, sampled))
    seq.numComputed += 1
    this.accept(seq, sampled, 0)
  }

  /**
   * Acceptance of one verify pass. Row r of the target's logits follows [anchor, d1..dr] (penalties count
   * the drafts before it). Greedy: the target's token there is its argmax, so the output is token for token
   * the output without the draft. T > 0: row r verified d(r+1) natively by the rejection rule (accepted with
   * probability min(1, p/q), else a draw from the residual, which never equals it), so every committed token
   * follows the target's distribution; a seed gives the same output for the same draft setting. With a
   * grammar, T > 0 keeps coupled sampling: the draft and the target draw position r with the same uniform and
   * the output is the output without the draft. Drafts are accepted while they equal the row's token, then the
   * row's token at the first mismatch (or after the last draft) is committed too. The target state is rolled
   * back to the committed prefix (anchor + accepted drafts).
   */
  private verify(seq: Sequence, rows: SampledToken[]): number {
    const k = seq.drafts.length
    const commit: SampledToken[] = []
    let acc = 0
    const forced = seq.forced.shift()
    if (forced !== undefined) {
      // a token forced while the pass ran replaces the target's first token, as in a plain decode
      commit.push(forced === rows[0].token ? this.reported(seq, rows[0]) : {token: forced})
      acc = -1
    }
    // row r was sampled natively with the r-th token's uniforms of the stream (nextRow), as plain decoding would
    for (; acc >= 0 && acc < k; acc++) {
      commit.push(this.reported(seq, rows[acc]))
      if (rows[acc].token !== seq.drafts[acc]) break
    }
    if (acc < 0) acc = 0
    else if (acc === k) commit.push(this.reported(seq, rows[k]))
    if (rejection(seq) && forced === undefined) {
      // the uniforms the pass used: 3 per verified draft, and one more for the last row when all were accepted
      const used = acc === k ? 3 * k + 1 : 3 * (acc + 1)
      for (let i = 0; i < used; i++) seq.rng.next()
    } else if (forced === undefined) seq.consumeUniforms(commit.length)
    seq.numComputed += 1 + acc
    seq.specPasses++
    seq.specCommitted += commit.length
    seq.specDrafted += k
    this.onAcceptance?.(commit.length, k)
    // adaptive block (draftLength): the acceptance estimate (a draft the grammar cut counts as refused there);
    // after passes with nothing accepted, plain decodes for a while (backing off exponentially) so a useless draft
    // costs little
    if (forced === undefined) {
      seq.acceptance.observe(acc, Math.max(k, seq.proposed))
      if (!rejection(seq)) this.history.observe(acc, Math.max(k, seq.proposed))
    }
    if (acc === 0) {
      seq.specFails++
      if (seq.specFails >= 2 && this.limits.fixedDraft === undefined) seq.specSkip = Math.min(256, 4 << (seq.specFails - 2))
    } else {
      seq.specFails = 0
    }
    seq.drafts = []
    for (const t of commit) {
      this.acceptToken(seq, t)
      if (seq.status === 'finished') return commit.length
    }
    if (acc < k) this.model.truncate!(seq.slot, seq.numComputed)
    return commit.length
  }

  /** Prompt logprobs of a chunk that started at `start`: row r scored the prompt token after it. */
  private promptLogprobs(seq: Sequence, start: number, rows: SampledToken[]): void {
    const nTop = seq.request.promptLogprobs ?? 0
    const entries: Array<SampledToken | null> = []
    if (start === 0) entries.push(null) // the first prompt token has nothing before it
    for (let r = 0; r < rows.length && start + r + 1 < seq.promptLength; r++) {
      entries.push({token: rows[r].token, logprob: rows[r].logprob, top: rows[r].top?.slice(0, nTop)})
    }
    seq.emit({type: 'prompt_logprobs', entries})
  }

  /** A sampled row as the request reports it (its own logprobs count, none when not asked for). */
  private reported(seq: Sequence, row: SampledToken): SampledToken {
    const n = seq.request.logprobs
    return n === undefined ? {token: row.token} : {token: row.token, logprob: row.logprob, top: row.top?.slice(0, n)}
  }

  /**
   * The next token: a forced one (scored when it was known at schedule time) or the native sample. With a
   * grammar, the in-step token when the grammar allows it (already accepted by GrammarRows.settle, or checked
   * against the mask prepared while the step ran), else the draw under the mask (GrammarRows.choose).
   */
  private accept(seq: Sequence, sampled: SampledToken[], at: number): void {
    let row = sampled[at]!
    const forced = seq.forced.shift()
    const c = seq.request.constraint
    if (forced !== undefined) {
      if (seq.grammarAccepted !== undefined) c?.rollBack(1) // a token forced since the grammar took the in-step one
      seq.grammarAccepted = undefined
      return this.acceptToken(seq, forced === row.token ? this.reported(seq, row) : {token: forced})
    }
    if (c && seq.grammarAccepted === undefined) row = this.grammar.choose(seq, row, at)
    seq.consumeUniforms(1) // the uniforms nextRow peeked are used now
    this.acceptToken(seq, this.reported(seq, row))
  }

  private acceptToken(seq: Sequence, picked: SampledToken): void {
    const r = seq.request
    const taken = seq.grammarAccepted
    seq.grammarAccepted = undefined
    if (r.constraint && taken !== picked.token && !r.constraint.accept(picked.token)) {
      return this.fail(seq, new Error(`token ${picked.token} does not follow the request's grammar`))
    }
    seq.output.push(picked.token)
    seq.penalties?.add(picked.token)
    // the grammar's stop tokens end it too (a request may stop on fewer, e.g. none)
    if (r.stopTokenIds.includes(picked.token) || r.constraint?.terminated) return this.finish(seq, seq.closing ? 'length' : 'stop')
    seq.emit({type: 'token', ...picked})
    if (seq.output.length >= r.maxTokens) this.finish(seq, 'length')
  }

  private finish(seq: Sequence, reason: FinishReason): void {
    if (seq.status === 'finished') return
    const wasWaiting = seq.status === 'waiting'
    seq.status = 'finished'
    seq.request.constraint?.dispose()
    seq.finishReason = reason
    if (wasWaiting) {
      const i = this.waiting.indexOf(seq)
      if (i >= 0) this.waiting.splice(i, 1)
    } else {
      const i = this.running.indexOf(seq)
      if (i >= 0) this.running.splice(i, 1)
      // a finished generation's state goes to the prefix cache first (afterStep frees it)
      if (this.saves && reason !== 'cancelled' && !seq.inFlight) this.releasing.push(seq)
      else this.model.freeSequence(seq.slot)
    }
    const completion = seq.output.length - (reason === 'stop' ? 1 : 0)
    seq.emit({
      type: 'done',
      reason,
      usage: {
        promptTokens: seq.promptLength,
        completionTokens: Math.max(0, completion),
        cachedTokens: seq.numCached,
        ...(seq.specPasses > 0 ? {draft: {passes: seq.specPasses, committed: seq.specCommitted, drafted: seq.specDrafted}} : {}),
      },
    })
  }

  /** Fails every sequence in a batch whose step threw (the model state of those sequences is unknown). */
  failBatch(batch: Batch, error: Error): void {
    for (const seq of batch.seqs) {
      seq.inFlight = false
      this.fail(seq, error)
    }
  }

  /** Fails a waiting sequence that could not be admitted (it holds no model sequence). */
  private refuse(seq: Sequence, error: Error): void {
    seq.status = 'finished'
    seq.request.constraint?.dispose()
    seq.emit({type: 'error', error})
  }

  private fail(seq: Sequence, error: Error): void {
    if (seq.status === 'finished') return
    seq.status = 'finished'
    seq.request.constraint?.dispose()
    const i = this.running.indexOf(seq)
    if (i >= 0) this.running.splice(i, 1)
    this.model.freeSequence(seq.slot)
    seq.emit({type: 'error', error})
  }
}

/** Sampled (T > 0) sequences without a grammar verify their drafts by the rejection rule. */
function rejection(seq: Sequence): boolean {
  return seq.request.sampling.temperature > 0 && !seq.request.constraint
}
