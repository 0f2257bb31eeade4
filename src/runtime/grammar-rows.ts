// Grammar masks in the step loop (constrained decoding): which rows need their mask computed while the step
// runs, which are settled after it by offering the grammar the token the step chose, the token a constrained
// row commits, and the drafts of a speculative pass walked along the grammar.
//
// The grammar applies after the sampling filters (SampleRow.retry): a plain row is sampled in the step without
// a mask (the first try, from the filtered distribution F); the grammar keeps that token when it allows it, else
// the row is drawn again natively from F restricted to the allowed tokens with the token's second uniform (or,
// when F gives them no mass, from the filters applied to the masked row). Greedy rows are the special case
// where F is the argmax. A verify pass and the draft's rows carry their masks and draw the same way natively, so
// constrained output with the draft is token for token the output without it.
import {allows} from '../grammar/matcher.js'
import type {Batch} from './scheduler.js'
import type {SampledToken} from './sampling.js'
import type {Sequence} from './sequence.js'
import type {StepModel, StepResult} from './step-model.js'

export class GrammarRows {
  constructor(private readonly model: StepModel) {}

  /**
   * Computes the grammar masks the sequences of a batch need when its logits come back (the mask for the
   * token after each sequence's last accepted one). The engine runs this while the step runs, so the mask
   * for step t+1 is ready when the sampler needs it. Verify passes have theirs from draft(); lazy rows none.
   */
  async prepare(batch: Batch): Promise<void> {
    for (const [i, seq] of batch.seqs.entries()) {
      const c = seq.request.constraint
      if (!c || seq.status === 'finished' || seq.verifyMasks || this.lazy(batch, i)) continue
      await c.nextMask()
    }
  }

  /**
   * A plain row (not drafting, not a verify pass) needs no mask when the grammar allows the token the step
   * sampled without one: that token is then the row's answer (greedy: the masked argmax too). While the grammar
   * keeps allowing the in-step tokens such rows skip prepare(); after a refusal the next masks are computed
   * while the step runs again, until one allows the in-step token (refusals come in runs at the grammar's
   * fixed parts). Drafting rows always have the mask computed while the step runs.
   */
  private lazy(batch: Batch, i: number): boolean {
    return batch.seqs[i]!.grammarLazy && !batch.drafting.includes(i) && !batch.items[i]!.verify
  }

  /**
   * After the step, for the rows lazy() left without a mask: the grammar takes the in-step token when it
   * allows it (postprocess then commits it as it is); otherwise the mask is computed now and choose() draws
   * the row under it.
   */
  async settle(batch: Batch, results: StepResult[]): Promise<void> {
    for (const [i, seq] of batch.seqs.entries()) {
      const c = seq.request.constraint
      const sampled = results[i]?.sampled
      if (!c || c.ready || !sampled || seq.cancelled || seq.status !== 'running' || seq.forced.length > 0 || !this.lazy(batch, i)) continue
      if (seq.inPrefill && seq.numComputed + batch.items[i]!.tokens.length < seq.promptLength) continue // not the prompt's end
      const token = sampled[sampled.length - 1]!.token
      if (c.accept(token)) seq.grammarAccepted = token
      else {
        seq.grammarLazy = false
        await c.nextMask()
      }
    }
  }

  /**
   * The token a constrained plain row commits when its mask is ready (computed during the step or by
   * settle()): the in-step token if the grammar allows it, else the native draw under the mask with the
   * row's uniforms (SampleRow.retry), which repeats the in-step draw and, as it is refused, draws again.
   */
  choose(seq: Sequence, row: SampledToken, logits: Float32Array | null): SampledToken {
    const mask = seq.request.constraint?.ready
    if (!mask) throw new Error('the grammar mask for this position was not prepared')
    seq.grammarLazy = allows(mask, row.token)
    if (seq.grammarLazy) return row
    if (!logits) throw new Error('the model returned no logits for a constrained position')
    return this.model.sampleRows(logits, seq.sampleRequest([{...seq.nextRow(0), allowed: mask}]))[0]!
  }

  /**
   * Drafts along the grammar from the draft pass's logits ([k × vocab]): draft r is sampled natively among the
   * tokens allowed after the anchor and drafts 1..r−1, with the uniforms the target uses at that position;
   * drafting stops before a stop token (the request's or the grammar's). Sets seq.drafts (k or fewer) and returns the masks of the verify rows
   * (one per draft and one after the last), the matcher rolled back to the anchor.
   */
  async draft(seq: Sequence, logits: Float32Array): Promise<Int32Array[]> {
    const c = seq.request.constraint!
    const vocab = this.model.vocabSize
    const masks: Int32Array[] = []
    let k = seq.drafts.length
    for (let r = 0; r < k; r++) {
      const mask = await c.nextMask()
      masks.push(mask)
      const row = {...seq.nextRow(r), allowed: mask}
      const d = this.model.sampleRows(logits.subarray(r * vocab, (r + 1) * vocab), {params: seq.request.sampling, rows: [row]})[0]!.token
      if (seq.request.stopTokenIds.includes(d) || !c.accept(d)) {
        k = r
        break
      }
      if (c.terminated) {
        c.rollBack(1) // a grammar stop token ends the draft like a request's stop token
        k = r
        break
      }
      seq.drafts[r] = d
    }
    seq.drafts.length = k
    masks.push(await c.nextMask())
    c.rollBack(k)
    return masks
  }
}
