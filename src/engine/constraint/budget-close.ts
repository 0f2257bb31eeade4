// Budget-aware structured output: an answer under a response format (json_object or a JSON Schema), and a forced
// tool call, always parses within max_tokens. Its closing path (the shortest way from where it stands to a complete
// output, src/grammar/closing.ts) is kept within the tokens left: before each step it is forced once it takes all but
// MARGIN of them; after each step, near the end, the token the step chose is taken only if the path after it still
// fits, else the path from before it is forced instead. A forced close ends with a stop token where tokens are left
// (a grammar that may go on, such as a second tool call, must not start something it cannot finish) and finishes
// with 'length' (Scheduler.acceptToken).
import type {Batch} from '../batch.js'
import type {GrammarRows} from './grammar-rows.js'
import type {GenerationRequest, TokenConstraint} from '../request.js'
import type {Sequence} from '../sequence.js'
import type {StepResult} from '../step-model.js'

/** Before a step: the path is looked up at every step once the tokens left come within WINDOW of its last length. */
const WINDOW = 16
/** Forced once it takes all but MARGIN of the tokens left. */
const MARGIN = 2
/** After a step: every chosen token is checked while the tokens left are within 4 × the path + GUARD_TOKENS. */
const GUARD_TOKENS = 64

type Close = NonNullable<GenerationRequest['closeWithinBudget']>
interface Budget {
  close: Close
  c: TokenConstraint & {closingPath: NonNullable<TokenConstraint['closingPath']>}
  remaining: number
}

function budgetOf(seq: Sequence): Budget | undefined {
  const close = seq.request.closeWithinBudget
  const c = seq.request.constraint
  if (!close || !c?.closingPath || seq.closing || seq.status === 'finished' || seq.cancelled) return undefined
  return {close, c: c as Budget['c'], remaining: seq.request.maxTokens - seq.output.length}
}

/**
 * Whether a structured answer is near its budget's end, where each step commits one checked token (no draft). Where the
 * grammar may start over (a second tool call), one token can add a whole call to the path: the guard watches for that
 * long before the last path looked up would say.
 */
export function nearBudget(seq: Sequence): boolean {
  const close = seq.request.closeWithinBudget
  if (close === undefined || seq.closing) return false
  return seq.request.maxTokens - seq.output.length <= 4 * Math.max(seq.closeEstimate, close.restart ?? 0) + GUARD_TOKENS
}

/** The closing path from the sequence's output (and `extra` tokens the matcher took after it). */
async function pathFrom(seq: Sequence, b: Budget, extra: number[] = []): Promise<number[] | undefined> {
  const before = b.close.decode(extra.length > 0 ? [...seq.output, ...extra] : seq.output)
  // a path that fits the tokens left is good enough (the grammar's alternatives, such as the tools of a forced call,
  // are compared only when the first one found does not)
  let path = await b.c.closingPath(b.remaining + WINDOW, b.close.encode, before, b.remaining)
  // already past the budget: the path anyway (max_tokens cuts it if it must)
  if (path === 'long') path = await b.c.closingPath(4 * (b.remaining + WINDOW), b.close.encode, before, b.remaining)
  return typeof path === 'string' ? undefined : path
}

function force(seq: Sequence, b: Budget, path: number[]): void {
  seq.closing = true
  seq.forced.push(...path)
  const stop = b.c.stopTokenIds?.[0]
  if (stop !== undefined && path.length < b.remaining) seq.forced.push(stop)
}

/** Before a step, for waiting and running sequences: forces the closing path where the tokens left come down to it. */
export async function closeBeforeStep(seqs: Sequence[], fail: (seq: Sequence, err: Error) => void): Promise<void> {
  for (const seq of seqs) {
    const b = budgetOf(seq)
    if (!b || seq.forced.length > 0 || b.remaining <= 0) continue
    const near = b.remaining <= seq.closeEstimate + WINDOW
    if (!near && (b.remaining > 2 * seq.closeEstimate + 4 * WINDOW || --seq.closeCountdown > 0)) continue
    seq.closeCountdown = 8
    try {
      const path = await pathFrom(seq, b)
      if (!path) continue
      seq.closeEstimate = path.length
      if (path.length + MARGIN >= b.remaining) force(seq, b, path)
    } catch (err) {
      fail(seq, err as Error)
    }
  }
}

/**
 * After a step, before postprocess: near the end of a structured answer, the token the step chose (taken by the
 * grammar here, as postprocess would) stands only if the closing path after it still fits the tokens left; otherwise
 * it is given back and the path from before it is forced in its place.
 */
export async function guardAfterStep(batch: Batch, results: StepResult[], grammar: GrammarRows): Promise<void> {
  for (const [i, seq] of batch.seqs.entries()) {
    const item = batch.items[i]!
    const b = budgetOf(seq)
    if (!b || batch.failed.has(seq) || item.verify || seq.forced.length > 0 || !nearBudget(seq)) continue
    if (seq.inPrefill && seq.numComputed + item.tokens.length < seq.promptLength) continue
    const rows = results[i]?.sampled
    if (!rows || rows.length === 0) continue
    const at = seq.inPrefill ? rows.length - 1 : 0
    try {
      if (seq.grammarAccepted === undefined) {
        if (!b.c.ready) await b.c.nextMask()
        rows[at] = grammar.choose(seq, rows[at]!, at)
        if (!b.c.accept(rows[at]!.token)) throw new Error(`token ${rows[at]!.token} does not follow the request's grammar`)
        seq.grammarAccepted = rows[at]!.token
      }
      b.remaining -= 1
      const after = await pathFrom(seq, b, [seq.grammarAccepted])
      b.remaining += 1
      if (!after || after.length < b.remaining) {
        if (after) seq.closeEstimate = after.length
        continue
      }
      b.c.rollBack(1)
      seq.grammarAccepted = undefined
      const path = await pathFrom(seq, b)
      if (path) force(seq, b, path)
    } catch (err) {
      batch.failed.set(seq, err as Error)
    }
  }
}
