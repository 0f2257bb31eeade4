// Grammar masks in the step loop (constrained decoding): which rows need their mask computed while the step
// runs, which are settled after it by offering the grammar the token the step chose, the token a constrained
// row commits, and the drafts of a speculative pass walked along the grammar.
//
// The grammar applies after the sampling filters (SampleRow.retry): a plain row is sampled in the step without
// a mask (the first try, from the filtered distribution F); the grammar keeps that token when it allows it, else
// the row is drawn again natively from F restricted to the allowed tokens with the token's second uniform (or,
// when F gives them no mass, from the filters applied to the masked row). Greedy rows are the special case
// where F is the argmax. Speculation works the same way: the draft's tokens are first tries (the target's
// uniforms), walked along the grammar without masks; the verify pass samples first tries too, and only the row
// after the accepted drafts may need a mask and a second draw. So constrained output with the draft is token for
// token the output without it, and a pass computes a mask only where the target's own token is refused.
import {availableParallelism} from 'node:os'
import {allows, soleAllowed} from '../../grammar/matcher.js'
import type {Batch} from '../batch.js'
import type {SampledToken} from '../sampling.js'
import type {Sequence} from '../sequence.js'
import type {StepModel, StepResult} from '../step-model.js'

export class GrammarRows {
  /**
   * Whether prepare() computes masks while the step runs. That hides a mask's cost only where a core is free
   * during the step (a device backend, or a CPU pool smaller than the machine). Where the pool takes every core, a
   * mask computed during the step slows the step as much as it would cost after it, and computing them ahead
   * (after a refusal, until one allows the in-step token) makes more of them than settle() alone: the sampled
   * T = 0.7 generations of bench/grammar-mask.ts on the default package computed 90 masks in 128 tokens ahead,
   * 50 without.
   */
  readonly ahead: boolean

  constructor(
    private readonly model: StepModel,
    cores = availableParallelism(),
  ) {
    this.ahead = (model.hostThreads ?? 0) < cores
  }

  /**
   * Computes the grammar masks the sequences of a batch need when its logits come back (the mask for the
   * token after each sequence's last accepted one). The engine runs this while the step runs, so the mask
   * for step t+1 is ready when the sampler needs it. Lazy rows, draft passes and verify passes need none
   * (settle() and settleVerify() compute the one a refused token needs).
   */
  async prepare(batch: Batch): Promise<void> {
    for (const [i, seq] of batch.seqs.entries()) {
      if (!this.masksAhead(batch, i)) continue
      await seq.request.constraint!.nextMask().catch((err: Error) => void batch.failed.set(seq, err))
    }
  }

  /** Whether prepare() computes a mask for the batch (the step should then leave the JS thread free). */
  busyDuring(batch: Batch): boolean {
    return batch.seqs.some((_, i) => this.masksAhead(batch, i))
  }

  private masksAhead(batch: Batch, i: number): boolean {
    const seq = batch.seqs[i]!
    // a plain row needs no mask while the grammar keeps allowing its in-step tokens (Sequence.grammarLazy): after
    // a refusal the next masks are computed in prepare() again, until one allows the in-step token (refusals come in
    // runs at the grammar's fixed parts)
    const c = seq.request.constraint
    return !!c && this.ahead && seq.status !== 'finished' && !batch.drafting.includes(i) && !batch.items[i]!.verify && !seq.grammarLazy && !c.ready
  }

  /**
   * After the step, for the lazy plain rows (no mask): the grammar takes the in-step token when it
   * allows it (postprocess then commits it as it is); otherwise the mask is computed now and choose() draws
   * the row under it.
   */
  async settle(batch: Batch, results: StepResult[]): Promise<void> {
    for (const [i, seq] of batch.seqs.entries()) {
      // a sequence whose grammar fails is failed alone (Batch.failed)
      if (seq.request.constraint && !batch.failed.has(seq))
        await this.settleOne(batch, seq, i, results[i]!).catch((err: Error) => void batch.failed.set(seq, err))
    }
  }

  private async settleOne(batch: Batch, seq: Sequence, i: number, result: StepResult): Promise<void> {
    const c = seq.request.constraint!
    const sampled = result.sampled
    if (batch.items[i]!.verify) return this.settleVerify(seq, result)
    if (c.ready || !sampled || seq.cancelled || seq.status !== 'running' || seq.forced.length > 0 || !seq.grammarLazy) return
    if (seq.inPrefill && seq.numComputed + batch.items[i]!.tokens.length < seq.promptLength) return // not the prompt's end
    const token = sampled[sampled.length - 1]!.token
    if (c.accept(token)) seq.grammarAccepted = token
    else {
      seq.grammarLazy = !this.ahead
      await c.nextMask()
    }
  }

  /**
   * The token a constrained plain row commits when its mask is ready (computed during the step or by
   * settle()): the in-step token if the grammar allows it, else the native draw under the mask with the
   * row's uniforms (SampleRow.retry), which repeats the in-step draw and, as it is refused, draws again; it runs
   * on the row the step kept where the model is (StepItem.keep, StepModel.resample), so no logits row travels.
   * `at`: the row among the item's sampled rows (the last one of a prompt's final chunk).
   */
  choose(seq: Sequence, row: SampledToken, at: number): SampledToken {
    const mask = seq.request.constraint?.ready
    if (!mask) throw new Error('the grammar mask for this position was not prepared')
    const allowed = allows(mask, row.token)
    seq.grammarLazy = allowed || !this.ahead
    if (allowed) return row
    return this.redraw(seq, at, 0, mask)
  }

  /**
   * A refused row drawn again under its mask. Where the mask allows one token (the grammar's fixed parts: a
   * required key, a closing bracket), every draw gives that token, so it is taken without the native draw unless
   * the request asks for log-probabilities, which only the draw computes.
   */
  private redraw(seq: Sequence, at: number, row: number, mask: Int32Array): SampledToken {
    const sole = seq.request.logprobs === undefined ? soleAllowed(mask) : -1
    if (sole >= 0) return {token: sole}
    return this.model.resample(seq.slot, at, seq.sampleRequest([{...seq.nextRow(row), allowed: mask}]))
  }

  /**
   * The drafted tokens a verify pass checks: the longest prefix the grammar allows, stopping before a stop token
   * (the request's or the grammar's). The draft sampled them without masks (its first tries, with the uniforms
   * the target's rows use), so walking them costs an accept each and no mask; the matcher is rolled back to the
   * anchor (verify() advances it by what it commits).
   */
  walk(seq: Sequence, drafted: readonly number[]): number[] {
    const c = seq.request.constraint!
    let k = 0
    for (; k < drafted.length; k++) {
      const d = drafted[k]!
      if (seq.request.stopTokenIds.includes(d) || !c.accept(d)) break
      if (c.terminated) {
        c.rollBack(1) // a grammar stop token ends the draft like a request's stop token
        break
      }
    }
    c.rollBack(k)
    return drafted.slice(0, k)
  }

  /**
   * After a constrained verify pass, whose rows were sampled without masks (their first tries): a draft the pass
   * accepted equals the target's token there and the grammar allowed it (walk), so it stands; the token after the
   * accepted drafts stands when the grammar allows it too. Otherwise that row's mask is computed now and the row is
   * drawn again under it from the pass's logits, kept where the model is (StepModel.resample: its uniforms, the
   * drafts before it counted by the penalties), exactly as a plain constrained row would be (choose). When that
   * draw gives the draft, the rows after it still hold (they follow that token) and are checked the same way.
   * verify() then commits as usual.
   */
  async settleVerify(seq: Sequence, result: StepResult): Promise<void> {
    const c = seq.request.constraint!
    const rows = result.sampled
    if (!rows || seq.cancelled || seq.status !== 'running' || seq.forced.length > 0) return
    const drafts = seq.drafts
    let at = 0 // rows before `at` are accepted drafts, taken by the matcher
    try {
      for (;;) {
        while (at < drafts.length && rows[at]!.token === drafts[at]) {
          if (!c.accept(drafts[at]!)) throw new Error(`drafted token ${drafts[at]} no longer follows the request's grammar`)
          at++
        }
        if (c.accept(rows[at]!.token)) {
          c.rollBack(1)
          return
        }
        const mask = await c.nextMask()
        rows[at] = this.redraw(seq, at, at, mask)
        if (at >= drafts.length || rows[at]!.token !== drafts[at]) return
      }
    } finally {
      c.rollBack(at)
    }
  }
}
