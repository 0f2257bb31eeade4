// The scheduler's side of the prefix cache (prefix-cache.ts is the cache itself): at admission a sequence
// restores the longest cached prefix of its prompt and gets the positions where its state will be saved;
// after a step the states of sequences that reached such an anchor or finished are saved, the draft's
// pending context synced first (not a finished one's whose prompt was a repeat). A failed save only means a later
// miss.
import {cacheKeyOf} from './prompt-media.js'
import type {PrefixCache} from '../cache/prefix-cache.js'
import type {Sequence} from './sequence.js'
import type {StepModel} from './step-model.js'
import type {StateStore} from '../cache/state-store.js'

/** Automatic anchors inside long prompts: a state snapshot every this many positions. */
export const ANCHOR_EVERY = 4096

export class PrefixSaves {
  constructor(
    private readonly model: StepModel,
    private readonly store: StateStore,
    private readonly cache: PrefixCache,
  ) {}

  /**
   * Admission: restores the longest cached prefix of the prompt (at least one prompt token is always
   * computed, for its logits) and picks the positions where this prompt's state will be saved: the request's
   * own anchors, every ANCHOR_EVERY positions, and the end of the prompt less one token (a replay of the same
   * prompt then computes only that token).
   */
  resume(seq: Sequence): void {
    const r = seq.request
    if (r.promptLogprobs !== undefined) return
    const hit = this.cache.lookup(cacheKeyOf(r), seq.promptLength - 1)
    if (hit) {
      const draft = this.store.restore(seq.slot, hit.rows, hit.state)
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
   * Before admission: when the disk tier holds a longer prefix of this prompt than memory, reads it back (the
   * promise resolves when done, never rejects); undefined when there is nothing to read.
   */
  warm(seq: Sequence): Promise<void> | undefined {
    const r = seq.request
    if (r.promptLogprobs !== undefined) return undefined
    return this.cache.warm(cacheKeyOf(r), seq.promptLength - 1)
  }

  /**
   * Saves the states of running sequences at the anchors their last prefill chunk reached (its end, or states
   * the step kept inside it) and of finished ones at those and at their length (the caller frees those
   * afterwards). The draft first takes in the pending context of all of them in one pass, so that the saved rows
   * carry it. Never throws.
   */
  async save(anchored: Sequence[], releasing: Sequence[]): Promise<void> {
    const saving = anchored.filter(seq => seq.numComputed >= 1).map(seq => ({seq, at: seq.reached}))
    for (const seq of releasing) {
      if (seq.numComputed < 1) continue
      // A prompt the cache held whole is a repeat (an agent retrying the same request): its answer is not kept,
      // so a client that loops resending one prompt adds no snapshot per attempt, in memory or on disk.
      const repeat = seq.numCached >= seq.promptLength - 1
      const anchors = seq.reached.filter(a => a < seq.numComputed)
      if (repeat) {
        if (anchors.length > 0) saving.push({seq, at: anchors})
        continue
      }
      try {
        this.model.truncate?.(seq.slot, seq.numComputed) // a stop inside a verify pass
        saving.push({seq, at: [...anchors, seq.numComputed]})
      } catch {
        // not saved: the cache is an optimisation, the request itself is unaffected
      }
    }
    const synced = await this.syncDrafts(saving.map(s => s.seq).filter(seq => seq.useDraft))
    for (const {seq, at} of saving) {
      if (seq.useDraft && !synced.has(seq)) continue
      for (const length of at) {
        try {
          this.saveState(seq, length)
        } catch {
          // as above
        }
      }
    }
  }

  /**
   * The draft takes in the pending context of these sequences: one pass for all of them, or one each when
   * the pass fails (a sequence the draft refuses must not keep the others from being saved). Returns those
   * whose draft context is complete.
   */
  private async syncDrafts(seqs: Sequence[]): Promise<Set<Sequence>> {
    const model = this.model
    if (!model.draft || seqs.length === 0) return new Set()
    const item = (seq: Sequence) => ({seq: seq.slot, token: seq.request.prompt[0], n: 0})
    try {
      await model.draft(seqs.map(item))
      return new Set(seqs)
    } catch {
      const ok = new Set<Sequence>()
      if (seqs.length > 1) {
        for (const seq of seqs) {
          try {
            await model.draft([item(seq)])
            ok.add(seq)
          } catch {
            // this one is not saved
          }
        }
      }
      return ok
    }
  }

  /**
   * Saves a sequence's first `computed` tokens (prompt, then output) in the prefix cache: its length, or one the
   * last step kept; its draft context is synced.
   */
  private saveState(seq: Sequence, computed: number): void {
    const p = cacheKeyOf(seq.request) // image pads keyed by the image's hash
    let tokens: Int32Array
    if (computed <= p.length) tokens = p.subarray(0, computed)
    else {
      tokens = new Int32Array(computed)
      tokens.set(p)
      tokens.set(seq.output.slice(0, computed - p.length), p.length)
    }
    this.cache.save(seq.slot, tokens)
  }
}
