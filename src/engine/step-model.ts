// What the scheduler needs from a loaded model: sequences and one batched step. The native engine
// implements it (src/native/native-model.ts); nothing here knows about the addon.
import type {SampleRequest, SampledToken} from './sampling.js'
import type {StateStore} from '../cache/state-store.js'

/** One sequence's work in a step: tokens appended at its length, and what to return or keep for them. */
export interface StepItem {
  seq: number
  /** Token ids appended at the sequence's current length (a prefill chunk or one decode token). */
  tokens: Int32Array
  /** Which logits to return: none, the last token's [V], or every token's [n·V]. Default 'last'. */
  logits?: 'none' | 'last' | 'all'
  /**
   * Keep the tapped target layers' outputs of these tokens as the draft's pending context. Every step of a
   * sequence that will use the draft must capture (a step without it leaves a gap: draft() then refuses the
   * sequence until it is truncated to 0).
   */
  capture?: boolean
  /**
   * Verification pass: GDN runs row by row in the recurrent form (each row bit-identical to a single-token
   * decode) and the state after every row is kept, so truncateSequence may then roll back to any length
   * between the step's start and its end.
   */
  verify?: boolean
  /** Keep the logits of the sampled rows where the backend is, for resample() until the next step. */
  keep?: boolean
  /**
   * Lengths inside this step (ascending, above the sequence's length and below its length after the step; not in
   * a verify pass) at which the GDN and conv state is kept, for saveState(h, seq, length) until the sequence's next
   * step: the prefix cache's anchors inside a prefill chunk. The step computes what steps ending there would.
   */
  snapshots?: number[]
  /** Token indices of this item (image pads) whose embeddings are replaced by rows of `embeds`. */
  embedAt?: Int32Array
  /** embedAt.length × hiddenSize values. */
  embeds?: Float32Array
  /** M-RoPE ids (T, H, W) of every token of this item, 3 per token; default: all three = the position. */
  positions?: Int32Array
  /**
   * Sample (or score) the item's trailing `sample.rows.length` rows inside the step: the tokens (and
   * log-probabilities) come back in `sampled`, and no logits row is copied out for them. Independent of
   * `logits`: the rows computed are the union of both (an item may return its logits and sample its last row).
   */
  sample?: SampleRequest
}

export interface DraftRequest {
  seq: number
  /** The last committed token (not yet processed by the target). */
  token: number
  /** Drafted tokens wanted (1..B−1); 0 only takes in the pending context (all items of the call alike). */
  n: number
  /** Sample the drafted rows inside the pass (then no logits come back). */
  sample?: SampleRequest
}

/** One item's output: the logits rows it asked for and its sampled rows (null when not asked for). */
export interface StepResult {
  logits: Float32Array | null
  sampled: SampledToken[] | null
}

/** What the caller of a step or draft pass tells the model about it. */
export interface CallHint {
  /**
   * The caller has work to do while the call runs (grammar masks): the model keeps the call off the calling
   * thread. Without it a short call may run on the calling thread (src/native/inline-steps.ts).
   */
  concurrent?: boolean
}

export interface StepModel {
  readonly vocabSize: number
  /** Longest sequence (prompt + output) the model can hold after the memory plan. */
  readonly contextLength: number
  /** Block length of the loaded speculative draft (anchor + B−1 drafts); 0 = no draft. */
  readonly draftBlockSize?: number
  /** The backend the model runs on ('cpu', 'cuda'; absent: treated as the CPU): prices speculative passes. */
  readonly backend?: string
  /** Host threads a step keeps busy: the CPU backend's pool, 0 when the step runs on a device (absent: 0). */
  readonly hostThreads?: number
  createSequence(maxLength: number): number
  freeSequence(seq: number): void
  /** One forward pass over every item; returns for each item its logits rows ([rows × vocab]) and sampled rows. */
  step(items: StepItem[], opts?: CallHint): Promise<StepResult[]>
  /** One draft pass per item: the drafted positions' logits ([n × vocab]) or, with `sample`, their tokens. */
  draft?(items: DraftRequest[], opts?: CallHint): Promise<StepResult[]>
  /** The vision encoder on one prepared image: merged embeddings [rows × hidden] (absent: no vision tower). */
  encodeImage?(pixels: Float32Array, grid: [number, number, number]): Promise<Float32Array>
  /**
   * Row `row` of the sampled rows of `seq`'s item in the last step (an item with `keep`), drawn again with
   * `sample` (one row) from the logits that stayed where the model is: a constrained row the grammar refused.
   */
  resample(seq: number, row: number, sample: SampleRequest): SampledToken
  /** Rolls a sequence back to `length` tokens (after a verify step: to the accepted prefix). */
  truncate?(seq: number, length: number): void
  /** Saved state for the prefix cache (absent: no cache). */
  readonly store?: StateStore
}
