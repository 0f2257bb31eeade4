// Continuous batching: which sequences run in the next step and with how many tokens, and what happens
// after the step (sampling, stop conditions, freeing). schedule() → model.step() → postprocess().
import {cacheKeyOf, mediaFields} from './media.js'
import type {StepItem, StepModel} from './step-model.js'
import type {GenerationEvent, GenerationRequest, FinishReason} from './request.js'
import {Sequence} from './sequence.js'
import {
  sampleToken,
  logSoftmax,
  topLogprobs,
  argmax,
  sampleWithUniform,
  draftCompatible,
  maskLogits,
  type SampledToken,
} from './sampling.js'
import {errors} from '../errors.js'
import type {PrefixCache} from './prefix-cache.js'

export interface SchedulerLimits {
  /** Tokens per step across all sequences (decodes count one each; prefill chunks fill the rest). */
  tokenBudget: number
  /** Sequences running at once. */
  maxRunning: number
  /** Requests allowed to wait; more get 503 with Retry-After. */
  maxWaiting: number
}

export interface Batch {
  seqs: Sequence[]
  items: StepItem[]
  /** Indices (into seqs/items) of the speculative items: their drafts are filled by fillDrafts() before the step. */
  drafting: number[]
  /** Tokens the verify passes of this batch committed (set by postprocess). */
  committed: number
  /** Sequences whose prefill reached a cache anchor in this step (saved by afterStep). */
  anchored: Sequence[]
}

/** Automatic anchors inside long prompts: a state snapshot every this many positions. */
export const ANCHOR_EVERY = 4096

/** Acceptance-length observer (tokens committed per target verify pass). */
export type AcceptanceObserver = (committed: number, drafted: number) => void

export class Scheduler {
  private readonly waiting: Sequence[] = []
  private readonly running: Sequence[] = []
  /** Finished sequences whose state the prefix cache saves before they are freed (afterStep). */
  private readonly releasing: Sequence[] = []

  /** Called after every verify pass (metrics). */
  onAcceptance: AcceptanceObserver | undefined

  constructor(
    private readonly model: StepModel,
    private readonly limits: SchedulerLimits,
    /** The prefix cache (absent: every prompt is computed in full). */
    readonly cache?: PrefixCache,
  ) {}

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

  hasWork(): boolean {
    return this.waiting.length > 0 || this.running.length > 0
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
    if (this.waiting.length >= this.limits.maxWaiting) throw errors.overloaded(1)
    const seq = new Sequence(request, emit)
    this.waiting.push(seq)
    return seq
  }

  /** Marks a sequence cancelled; it is freed now, or right after the step it is part of. */
  cancel(seq: Sequence): void {
    if (seq.status === 'finished' || seq.cancelled) return
    seq.cancelled = true
    if (!seq.inFlight) this.finish(seq, 'cancelled')
  }

  schedule(): Batch {
    // Admit waiting sequences FIFO while there is room.
    while (this.waiting.length > 0 && this.running.length < this.limits.maxRunning) {
      const seq = this.waiting.shift()!
      seq.slot = this.model.createSequence(seq.maxLength)
      seq.status = 'running'
      const r = seq.request
      // Penalties depend on every token before; logprobs are reported per sampled token: plain decode serves those.
      // (an image prompt too: the draft has no M-RoPE positions)
      seq.useDraft = this.blockSize > 1 && draftCompatible(r.sampling) && r.logprobs === undefined && !r.media
      seq.specK = this.blockSize - 1
      this.resume(seq)
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
      const k = Math.min(seq.specK, remaining - 1, budget - 1)
      if (seq.useDraft && seq.forced.length === 0 && seq.specSkip === 0 && k >= 1 && this.draftPays(seq)) {
        drafting.push(seqs.length)
        seq.drafts.length = k // filled by fillDrafts
        budget -= 1 + k
      } else {
        if (seq.specSkip > 0) seq.specSkip--
        budget--
      }
      seqs.push(seq)
      items.push({seq: seq.slot, tokens: Int32Array.of(seq.lastToken), logits: 'last', capture: seq.useDraft, ...mediaFields(seq.request.media, seq.promptLength, seq.numComputed, 1)})
    }
    // Then prefill chunks, oldest first, under what is left of the budget.
    for (const seq of this.running) {
      if (!seq.inPrefill || budget <= 0) continue
      // a chunk ends at the next cache anchor, where the state is saved
      const stop = seq.anchors.find(a => a > seq.numComputed) ?? seq.promptLength
      const n = Math.min(budget, stop - seq.numComputed)
      const tokens = seq.request.prompt.subarray(seq.numComputed, seq.numComputed + n)
      const last = seq.numComputed + n === seq.promptLength
      const wantRows = seq.request.promptLogprobs !== undefined ? 'all' : last && seq.request.maxTokens > 0 ? 'last' : 'none'
      seqs.push(seq)
      items.push({seq: seq.slot, tokens, logits: wantRows, capture: seq.useDraft, ...mediaFields(seq.request.media, seq.promptLength, seq.numComputed, n)})
      budget -= n
    }
    for (const seq of seqs) seq.inFlight = true
    return {seqs, items, drafting, committed: 0, anchored: []}
  }

  /**
   * Admission with the prefix cache: restores the longest cached prefix of the prompt (at least one
   * prompt token is always computed, for its logits) and picks the positions where this prompt's state
   * will be saved: the request's own anchors, every ANCHOR_EVERY positions, and the end of the prompt
   * less one token (a replay of the same prompt then computes only that token).
   */
  private resume(seq: Sequence): void {
    const cache = this.cache
    const store = this.model.store
    const r = seq.request
    if (!cache || !store || r.promptLogprobs !== undefined) return
    const hit = cache.lookup(cacheKeyOf(r), seq.promptLength - 1)
    if (hit) {
      const draft = store.restore(seq.slot, hit.rows, hit.state)
      seq.numComputed = hit.length
      seq.numCached = hit.length
      if (!draft) seq.useDraft = false
    }
    const anchors = new Set<number>()
    for (const a of r.cacheAnchors ?? []) anchors.add(a)
    for (let a = ANCHOR_EVERY; a < seq.promptLength; a += ANCHOR_EVERY) anchors.add(a)
    anchors.add(seq.promptLength - 1)
    seq.anchors = [...anchors].filter(a => Number.isInteger(a) && a > seq.numComputed && a < seq.promptLength).sort((a, b) => a - b)
  }

  /**
   * After a step (and its postprocess): the prefix cache saves the state of sequences whose prefill reached
   * an anchor and of sequences that finished, which are then freed. The draft first takes in its pending
   * context so that the saved rows carry it. Never throws: a failed save only means a later miss.
   */
  async afterStep(batch: Batch): Promise<void> {
    for (const seq of batch.anchored) {
      if (seq.status !== 'running' || seq.cancelled) continue
      seq.inFlight = true // a cancel meanwhile waits until the save is done
      try {
        await this.saveState(seq)
      } catch {
        // the cache is an optimisation: the request itself is unaffected
      } finally {
        seq.inFlight = false
      }
      if (seq.cancelled) this.finish(seq, 'cancelled')
    }
    for (const seq of this.releasing.splice(0)) {
      try {
        await this.saveState(seq)
      } catch {
        // as above
      }
      this.model.freeSequence(seq.slot)
    }
  }

  private async saveState(seq: Sequence): Promise<void> {
    const cache = this.cache!
    const computed = seq.numComputed
    if (computed < 1) return
    if (seq.status === 'finished') this.model.truncate?.(seq.slot, computed) // a stop inside a verify pass
    if (seq.useDraft && this.model.draft) await this.model.draft([{seq: seq.slot, token: seq.request.prompt[0], n: 0}])
    const p = cacheKeyOf(seq.request) // image pads keyed by the image's hash
    let tokens: Int32Array
    if (computed <= p.length) tokens = p.subarray(0, computed)
    else {
      tokens = new Int32Array(computed)
      tokens.set(p)
      tokens.set(seq.output.slice(0, computed - p.length), p.length)
    }
    cache.save(seq.slot, tokens)
  }

  /**
   * Greedy sequences: speculation only while a committed token costs less through draft + verify than
   * through a plain decode (both measured by the engine, see observeStep); every 16th decode step probes
   * the other way so both costs stay current. The output is identical either way (at T > 0 too: see verify).
   */
  private draftPays(seq: Sequence): boolean {
    if (process.env.SPLASH_DRAFT_FIXED) return true
    const probe = ++seq.specProbe % 16 === 0
    const better = this.specCost === 0 || this.plainCost === 0 || this.specCost < this.plainCost
    return better !== probe
  }

  /** Seconds per committed token of plain decodes and of speculative passes (EMAs over pure steps). */
  plainCost = 0
  specCost = 0

  /** Called by the engine with the wall time of a step (draft pass included). */
  observeStep(batch: Batch, seconds: number): void {
    let plain = 0
    let prefill = false
    for (let i = 0; i < batch.items.length; i++) {
      if (batch.items[i].verify) continue
      if (batch.items[i].tokens.length > 1 || batch.items[i].logits !== 'last') prefill = true
      plain++
    }
    if (prefill) return
    const ema = (old: number, v: number) => (old === 0 ? v : 0.8 * old + 0.2 * v)
    if (batch.drafting.length === 0 && plain > 0) this.plainCost = ema(this.plainCost, seconds / plain)
    else if (plain === 0 && batch.committed > 0) this.specCost = ema(this.specCost, seconds / batch.committed)
  }

  /** The draft requests of a batch (one per speculative item: its anchor). */
  draftRequests(batch: Batch): Array<{seq: number; token: number; n: number}> {
    return batch.drafting.map(i => ({seq: batch.seqs[i].slot, token: batch.seqs[i].lastToken, n: batch.seqs[i].drafts.length}))
  }

  /**
   * Computes the grammar masks the sequences of a batch need when its logits come back (the mask for the
   * token after each sequence's last accepted one). The engine runs this while the step runs, so the
   * mask for step t+1 is ready when the sampler needs it. Verify passes have theirs from fillDrafts.
   */
  async prepareMasks(batch: Batch): Promise<void> {
    for (const seq of batch.seqs) {
      const c = seq.request.constraint
      if (!c || seq.status === 'finished' || seq.verifyMasks) continue
      await c.nextMask()
    }
  }

  /**
   * Turns the draft's logits into drafted tokens (argmax at T = 0, else sampled from the filtered draft
   * distribution q, kept for verification) and makes each speculative item a verify pass [anchor, drafts].
   * With a grammar, drafting walks it: draft r is chosen among the tokens allowed after the anchor and
   * drafts 1..r−1, the mask of every verify row is kept (seq.verifyMasks), and the drafts stop before a
   * stop token; the matcher is then rolled back to the anchor (verify() advances it by what it commits).
   */
  async fillDrafts(batch: Batch, draftLogits: Float32Array[]): Promise<void> {
    const vocab = this.model.vocabSize
    for (let j = 0; j < batch.drafting.length; j++) {
      const i = batch.drafting[j]!
      const seq = batch.seqs[i]!
      let k = seq.drafts.length
      const rows = draftLogits[j]!
      const s = seq.request.sampling
      const c = seq.request.constraint
      const masks: Int32Array[] = []
      for (let r = 0; r < k; r++) {
        let row = rows.subarray(r * vocab, (r + 1) * vocab)
        if (c) {
          const mask = await c.nextMask()
          masks.push(mask)
          row = maskLogits(row, mask)
        }
        // the draft samples position r with the uniform the target will use there (rng.peek: not consumed)
        const d = s.temperature === 0 ? argmax(row) : sampleWithUniform(row, s, seq.rng.peek(r))
        if (c && (seq.request.stopTokenIds.includes(d) || !c.accept(d))) {
          k = r
          break
        }
        seq.drafts[r] = d
      }
      if (c) {
        seq.drafts.length = k
        masks.push(await c.nextMask())
        c.rollBack(k)
        seq.verifyMasks = masks
      }
      batch.items[i] = {
        seq: seq.slot,
        tokens: Int32Array.from([seq.lastToken, ...seq.drafts]),
        logits: 'all',
        capture: true,
        verify: true,
      }
    }
  }

  postprocess(batch: Batch, results: Array<Float32Array | null>): void {
    const vocab = this.model.vocabSize
    batch.seqs.forEach((seq, i) => {
      seq.inFlight = false
      const item = batch.items[i]
      const rows = results[i]
      if (seq.cancelled) return this.finish(seq, 'cancelled')
      if (seq.inPrefill) {
        const start = seq.numComputed
        seq.numComputed += item.tokens.length
        if (seq.anchors.includes(seq.numComputed)) batch.anchored.push(seq)
        if (seq.request.promptLogprobs !== undefined && rows) this.promptLogprobs(seq, start, item.tokens.length, rows)
        if (seq.inPrefill) return
        if (seq.request.maxTokens === 0) return this.finish(seq, 'length')
        const last = rows ? rows.subarray(rows.length - vocab) : null
        if (!last) throw new Error('the model returned no logits for the end of a prompt')
        return this.accept(seq, last)
      }
      if (!rows) throw new Error('the model returned no logits for a decode step')
      if (item.verify) return void (batch.committed += this.verify(seq, rows))
      seq.numComputed += 1
      this.accept(seq, rows.subarray(rows.length - vocab))
    })
  }

  /**
   * Acceptance of one verify pass. Row r of the target's logits follows [anchor, d1..dr]; the target's
   * token there is its argmax (T = 0) or its sample with the r-th uniform of the sequence's stream (T > 0:
   * the very draw plain decoding would make). Drafts are accepted while they equal the target's token,
   * then the target's token at the first mismatch (or after the last draft) is committed too. So the output
   * is token for token the output without the draft, at every temperature and seed, and every token is a
   * sample of the target's distribution (each uniform is fresh given the committed prefix). The draft
   * sampled its tokens with the same uniforms (coupled), so it matches whenever q puts the same token at
   * the same CDF point. The target state is rolled back to the committed prefix (anchor + accepted drafts).
   */
  private verify(seq: Sequence, rows: Float32Array): number {
    const vocab = this.model.vocabSize
    const s = seq.request.sampling
    const k = seq.drafts.length
    const masks = seq.verifyMasks
    seq.verifyMasks = undefined
    const row = (r: number) => maskLogits(rows.subarray(r * vocab, (r + 1) * vocab), masks?.[r])
    const commit: number[] = []
    let acc = 0
    const forced = seq.forced.shift()
    if (forced !== undefined) {
      // a token forced while the pass ran replaces the target's first token, as in a plain decode
      commit.push(forced)
      acc = -1
    }
    const target = (r: number) => (s.temperature === 0 ? argmax(row(r)) : sampleWithUniform(row(r), s, seq.rng.peek(r)))
    for (; acc >= 0 && acc < k; acc++) {
      const t = target(acc)
      commit.push(t)
      if (t !== seq.drafts[acc]) break
    }
    if (acc < 0) acc = 0
    else if (acc === k) commit.push(target(k))
    if (s.temperature !== 0 && forced === undefined) for (let i = 0; i < commit.length; i++) seq.rng.next()
    seq.numComputed += 1 + acc
    seq.specPasses++
    seq.specCommitted += commit.length
    seq.specDrafted += k
    this.onAcceptance?.(commit.length, k)
    // adaptive block: grow with acceptance; after passes with nothing accepted, fall back to plain decodes
    // for a while (backing off exponentially) so a useless draft costs little
    if (acc === 0) {
      seq.specFails++
      if (!process.env.SPLASH_DRAFT_FIXED) seq.specK = Math.max(1, seq.specK >> 1)
      if (seq.specFails >= 2 && !process.env.SPLASH_DRAFT_FIXED) seq.specSkip = Math.min(256, 4 << (seq.specFails - 2))
    } else {
      seq.specFails = 0
      seq.specK = process.env.SPLASH_DRAFT_FIXED ? this.blockSize - 1 : Math.min(this.blockSize - 1, Math.max(2, 2 * (acc + 1)))
    }
    seq.drafts = []
    for (const t of commit) {
      this.acceptToken(seq, {token: t})
      if (seq.status === 'finished') return commit.length
    }
    if (acc < k) this.model.truncate!(seq.slot, seq.numComputed)
    return commit.length
  }

  private promptLogprobs(seq: Sequence, start: number, n: number, rows: Float32Array): void {
    const vocab = this.model.vocabSize
    const prompt = seq.request.prompt
    const nTop = seq.request.promptLogprobs ?? 0
    const entries: Array<SampledToken | null> = []
    if (start === 0) entries.push(null) // the first prompt token has nothing before it
    for (let r = 0; r < n; r++) {
      const pos = start + r + 1 // row r predicts the token after it
      if (pos >= prompt.length) break
      const lp = logSoftmax(rows.subarray(r * vocab, (r + 1) * vocab))
      entries.push({token: prompt[pos], logprob: lp[prompt[pos]], top: topLogprobs(lp, nTop)})
    }
    seq.emit({type: 'prompt_logprobs', entries})
  }

  private accept(seq: Sequence, logits: Float32Array): void {
    const r = seq.request
    const forced = seq.forced.shift()
    if (forced !== undefined) return this.acceptToken(seq, {token: forced})
    const allowed = r.constraint ? r.constraint.ready : undefined
    if (r.constraint && !allowed) throw new Error('the grammar mask for this position was not prepared')
    this.acceptToken(seq, sampleToken(maskLogits(logits, allowed), r.sampling, seq.rng, seq.output, r.prompt, r.logprobs))
  }

  private acceptToken(seq: Sequence, picked: SampledToken): void {
    const r = seq.request
    if (r.constraint && !r.constraint.accept(picked.token)) {
      return this.fail(seq, new Error(`token ${picked.token} does not follow the request's grammar`))
    }
    seq.output.push(picked.token)
    if (r.stopTokenIds.includes(picked.token)) return this.finish(seq, 'stop')
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
      if (this.cache && this.model.store && reason !== 'cancelled' && !seq.inFlight) this.releasing.push(seq)
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
