// One step's work as the scheduler hands it to the step model, and what the step left to do after it.
import type {Sequence} from './sequence.js'
import type {StepItem} from './step-model.js'

/** The sequences of one step, their step items, and what postprocess and afterStep act on. */
export interface Batch {
  seqs: Sequence[]
  items: StepItem[]
  /** Indices (into seqs/items) of the speculative items: their drafts are filled by fillDrafts() before the step. */
  drafting: number[]
  /** Tokens the verify passes of this batch committed (set by postprocess). */
  committed: number
  /** Sequences whose prefill reached a cache anchor in this step (saved by afterStep). */
  anchored: Sequence[]
  /**
   * Sequences whose own work around the step failed (their grammar's walk, mask or second draw): postprocess fails
   * each of them alone, and the rest of the batch goes on.
   */
  failed: Map<Sequence, Error>
}
